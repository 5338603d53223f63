"""Where the emulated NPU2's token-gate deviation comes from (issue 48 item 3): the token gate's statistics
(perplexity ratio, KL(reference || ours) mean and max, top-5 steps) against HF transformers in bf16, on one model
folder's Phase 3 prompts, for the reference's own precision spread and for the emulated pipeline with one datapath
step of the NPU2 model changed at a time. Every variant is a real executor; none is a knob of the product:

  hf_fp32      HF transformers with its weights and arithmetic in FP32 (scripts/ppl_spread.py's Fp32Runner)
  npu2         the emulated pipeline as Phase 3 runs it (target npu2: BFP16 MMA operands in GEMM and flash attention)
  npu1         the same executor on target npu1: native bf16 MMA operands (`EmulatedExecutor.bfp16` is off), every
               other step (NLF exp2, rsqrt, SiLU, RoPE, floor/conv_even roundings, bf16 carries) as on npu2
  npu2-fa32    npu2 with flash_attention swapped for its FP32 kernel (the bisect's swap, `with_fp32_kernels`):
               no exp2 approximation, no bf16 softmax carries, no BFP16 on Q.K^T / P.V
  npu2-elt32   npu2 with rmsnorm, rope, silu_mul, eltwise_add and eltwise_mul swapped for FP32: no rsqrt / SiLU /
               RoPE-product approximations, no floor roundings of those kernels (RoPE's host-side angle tables stay)
  npu1-nlf32   npu1 with all of the above swapped for FP32: bf16 MMA operands, FP32 accumulation, and FP32
               attention / elementwise kernels
  fp32         every kernel FP32 (GEMM/GEMV included); the pipeline's host steps still hand on bf16 buffers
  torch        the pipeline on the torch executor: every kernel a torch bf16 op (FP32 accumulation and softmax
               inside, one round-to-nearest-even per op) - a faithful bf16 datapath, the GPU / vLLM standard
  npu2-addrne  npu2 with eltwise_add (the residual adds; floor-rounded on NPU2) swapped for torch's nearest-even add
  npu1-eltrne  npu1 with rmsnorm, rope, silu_mul, eltwise_add and eltwise_mul swapped for torch's bf16 ops: bf16
               MMA operands, NPU2's flash attention, nearest-even elementwise kernels

Kernels swapped for FP32 return FP32 (not rounded to bf16); the host steps between kernels round to bf16 as in
production (MixedExecutor keeps the primary's `bf16_buffers`).

The reference walk is the same for every variant (teacher-forced on the bf16 reference's own greedy tokens), so
its records are kept per prompt after the first variant and replayed to `token_gate` for the later ones
(`_KeptReference`: a memo of the real runner's outputs, keyed on the whole call sequence; a sequence it has not
seen runs the real runner). Variants run one after another in one process, each executor's resident operands
dropped before the next (the 1B folder: peak RSS 10.9 GiB, 1302 CPU s for all ten variants).

Usage: python scripts/ppl_datapath.py DIR [--variants hf_fp32,npu2,npu1,...] [--full] [--json OUT]
A 1B-shaped folder: python benchmarks/bench_deploy_1b.py --dir DIR0 --until 0 (the folder is DIR0/llama-3.2-1b-random).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from npu_kernels.backends.in_process import InProcessBackend, hf_reference  # noqa: E402
from npu_kernels.model.architecture import load_raw_config, resolve  # noqa: E402
from npu_kernels.model.compare import token_gate  # noqa: E402
from npu_kernels.model.hf_reference import HfRunner, load_tokenizer  # noqa: E402
from npu_kernels.model.pipeline import NpuPipeline  # noqa: E402
from npu_kernels.model.prompts import prompts_for  # noqa: E402
from npu_kernels.numerics.executors import make_executor  # noqa: E402
from npu_kernels.numerics.executors.base import MixedExecutor  # noqa: E402
from npu_kernels.thresholds import TOKEN_GATE_TOP_K  # noqa: E402

NLF = ("rmsnorm", "rope", "silu_mul", "eltwise_add", "eltwise_mul")
ALL = ("gemm", "gemv", "flash_attention", *NLF)
# variant -> (emulated target, kernels swapped, the executor they are swapped for); hf_fp32 is the reference's own
# spread, torch the whole pipeline on the torch executor
VARIANTS = {
    "hf_fp32": None,
    "npu2": ("npu2", (), None),
    "npu1": ("npu1", (), None),
    "npu2-fa32": ("npu2", ("flash_attention",), "fp32"),
    "npu2-elt32": ("npu2", NLF, "fp32"),
    "npu1-nlf32": ("npu1", ("flash_attention", *NLF), "fp32"),
    "fp32": ("npu2", ALL, "fp32"),
    "torch": None,
    "npu2-addrne": ("npu2", ("eltwise_add",), "torch"),
    "npu1-eltrne": ("npu1", NLF, "torch"),
}


class Fp32Runner(HfRunner):
    """The HF reference with its weights and arithmetic in FP32 (loaded in bf16: the same weights)."""

    name = "hf_fp32"

    def __init__(self, folder) -> None:
        super().__init__(folder)
        self.model.float()


class _KeptReference:
    """The bf16 reference's records, kept per call sequence: `token_gate` calls prefill(tokens) then
    decode_step(token, pos) for each forced token, and the forced tokens are the reference's own argmaxes, so every
    variant makes the same sequence of calls. A sequence seen before returns the record the real runner gave."""

    def __init__(self, runner) -> None:
        self.runner, self.kept, self.seq, self.live = runner, {}, (), False

    def prefill(self, tokens):
        self.seq = ("prefill", tuple(int(t) for t in tokens))
        self.live = self.seq not in self.kept
        if self.live:
            self.kept[self.seq] = self.runner.prefill(tokens)
        return self.kept[self.seq]

    def decode_step(self, token, pos):
        self.seq = (*self.seq, (int(token), int(pos)))
        if self.seq not in self.kept:
            if not self.live:  # a sequence that left the kept path: the real runner's cache is elsewhere
                raise RuntimeError("reference call sequence differs from the kept one")
            self.kept[self.seq] = self.runner.decode_step(token, pos)
        return self.kept[self.seq]


def ours_for(variant: str, folder: str, config):
    if variant == "hf_fp32":
        return Fp32Runner(folder)
    if variant == "torch":
        return InProcessBackend(folder, config, "torch").pipeline  # weights: one lru_cached load for every variant
    target, swapped, fallback = VARIANTS[variant]
    pipeline = InProcessBackend(folder, config, "emulated", target).pipeline
    if fallback == "fp32":
        return pipeline.with_fp32_kernels(set(swapped))
    if fallback == "torch":  # the bisect's MixedExecutor with the torch executor as the swap-in
        return NpuPipeline(pipeline.weights, pipeline.config, MixedExecutor(pipeline.k, make_executor("torch"),
                                                                            set(swapped)), pipeline.options)
    return pipeline


def stats(g) -> dict:
    kls = g.tf_kl_per_step
    k = TOKEN_GATE_TOP_K
    top = sum(1 for o, r in zip(g.tf_topk_ours, g.tf_topk_ref) if o and r and o[0] in r[:k] and r[0] in o[:k])
    # per step log p_ref(t) - log p_ours(t) of the forced token t: the PPL ratio is exp of their mean, so their
    # standard deviation / sqrt(steps) is how far that ratio moves by which tokens happen to be forced
    d = np.asarray(g.tf_logprob_ref, np.float64) - np.asarray(g.tf_logprob_ours, np.float64)
    return {"ppl_ratio": g.tf_ppl_ratio, "kl_mean": float(np.mean(kls)), "kl_max": float(np.max(kls)),
            "top5": top, "steps": len(kls), "passed": bool(g.passed), "dlogp_mean": float(d.mean()),
            "dlogp_sd": float(d.std(ddof=1)), "dlogp": [round(float(x), 5) for x in d]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--full", action="store_true", help="all 8 prompts of the set (Phase 3 runs the first 2)")
    ap.add_argument("--json", help="write the rows here as JSON too")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        print(f"unknown variant(s) {', '.join(unknown)}; expected of {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    if not (Path(args.folder) / "config.json").is_file():
        print(f"{args.folder}: not a model folder (no config.json)", file=sys.stderr)
        return 2
    config = resolve(load_raw_config(args.folder))
    ref = _KeptReference(hf_reference(args.folder))
    prompts = prompts_for(load_tokenizer(args.folder), full=args.full)
    rows = []
    print("variant      prompt        PPL ratio  KL mean  KL max  top-5   gate  sd(dlogp)  cpu s", flush=True)
    for variant in variants:
        ours = ours_for(variant, args.folder, config)
        for p in prompts:
            t0 = time.process_time()
            s = stats(token_gate(ours, ref, p.tokens, prompt_index=p.index))
            cpu = round(time.process_time() - t0, 1)
            rows.append({"variant": variant, "prompt": f"{p.kind} {p.index}", **s, "cpu_s": cpu})
            print(f"{variant:12s} {p.kind + ' ' + str(p.index):12s}  {s['ppl_ratio']:.4f}    {s['kl_mean']:.4f}   "
                  f"{s['kl_max']:.4f}  {s['top5']}/{s['steps']}  {'PASS' if s['passed'] else 'FAIL'}  "
                  f"{s['dlogp_sd']:.4f}  {cpu}", flush=True)
        k = getattr(ours, "k", None)
        for ex in (k, getattr(k, "primary", None), getattr(k, "fallback", None)):
            if ex is not None:
                ex.clear_cache()
        del ours, k
        gc.collect()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak RSS {peak:.2f} GiB, CPU {time.process_time():.0f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"folder": Path(args.folder).name, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
