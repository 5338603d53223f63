"""`make dflash-exactness` of a stand-in model directory scaffolded for a deployment with a drafter
(`ledger scaffold NAME --stand-in emulated`).

mlir-air judges its DFlash speculative loop with qwen3_4b_q4nx's `dflash_acceptance_device.py --exactness`
(@43e773e88268a33a5e2e835cc91a39e0387b7119, run by hand from the model directory as its README.md section "3b. DFlash
end to end", "Run", shows it @01c8da75: `--prompts prompts_gsm8k.json --n 8 --n-tokens 32 --exactness`): every prompt
decoded with the drafter, then again with it off, the first position the two streams differ printed per prompt, the
acceptance length (tokens committed per verify dispatch) with its standard error, and `--out` the raw per-block
lengths. This script takes the same flags and prints only lines that script prints (the ones
npu_kernels.mlir_air.dflash reads, with the histogram), computed here:

  loop        npu_kernels.model.speculative.speculative_stream on npu-ledger's emulated pipeline: the target is the
              model folder (NPU_LEDGER_MODEL), the drafter the folder in NPU_LEDGER_DRAFTER (the Makefile exports both;
              the tool passes them); the Makefile's NPU_LEDGER_SWITCHES in force on both
  drafter off npu_kernels.model.speculative.greedy_stream on the same target
  drills      NPU_LEDGER_FAULTS' speculative-loop faults (npu_kernels.model.options.SPEC_FAULTS) wrap the acceptance
              (npu_kernels.model.faults.speculation_acceptance); its other faults are the pipeline's

What it does not print, and why: the speculative step's milliseconds, break-even and SPEEDUP lines, and the step
breakdown are timings of a device the stand-in does not have; `--dataset` (a tokenizer run out of process on a
Hugging Face data set) is refused in one line: give `--prompts`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from npu_kernels.model.options import SPEC_FAULTS

ENV_DRAFTER = "NPU_LEDGER_DRAFTER"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dflash", description="DFlash acceptance and exactness (npu-ledger stand-in)")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--prompts", help="JSON file: list of token-id lists")
    p.add_argument("--dataset", default=None)
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--n-tokens", type=int, default=48)
    p.add_argument("--block", type=int, default=8)
    p.add_argument("--exactness", action="store_true")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)

    from npu_kernels.backends.in_process import InProcessBackend
    from npu_kernels.mlir_air.twin.stand_in import faults_from_env, settings, switches_from_env
    from npu_kernels.model.architecture import load_raw_config, resolve
    from npu_kernels.model.faults import speculation_acceptance
    from npu_kernels.model.speculative import greedy_stream, speculative_stream
    from npu_kernels.settings import env_get

    if a.dataset or not a.prompts:
        print("dflash: the stand-in takes --prompts (a JSON list of token-id lists), not --dataset", file=sys.stderr)
        return 2
    drafter = env_get(ENV_DRAFTER, "")
    if not drafter or not (Path(drafter) / "config.json").is_file():
        print(f"dflash: {ENV_DRAFTER} names no drafter model folder ({drafter!r}): give "
              f"{ENV_DRAFTER}=<folder> on the make command line", file=sys.stderr)
        return 2
    faults = faults_from_env()
    spec_faults, pipe_faults = faults & SPEC_FAULTS, faults - SPEC_FAULTS
    switches = switches_from_env()

    def pipeline(path: str):
        return InProcessBackend(path, resolve(load_raw_config(path)), "emulated", "npu2", switches, pipe_faults,
                                share_reference=False).pipeline  # the NPU's stand-in: no reference runs here

    target, draft = pipeline(settings(a.model_dir)["model_path"]), pipeline(drafter)
    accept = speculation_acceptance(spec_faults)
    prompts = [list(map(int, x)) for x in json.loads(Path(a.prompts).read_text())][: a.n]
    print(f"[acceptance] {len(prompts)} prompts, lengths {min(len(x) for x in prompts)}..{max(len(x) for x in prompts)}, "
          f"{a.n_tokens} tokens each, block {a.block}", flush=True)
    all_lens, rows, mismatches = [], [], 0
    for i, prompt in enumerate(prompts):
        run = speculative_stream(target, draft, prompt, a.n_tokens, a.block, accept)
        gen, acc = run.tokens, run.acceptance
        all_lens.extend(acc)
        note = ""
        if a.exactness:
            ref = greedy_stream(target, prompt, a.n_tokens)
            k = min(len(gen), len(ref))
            same = next((j for j in range(k) if gen[j] != ref[j]), k)
            mismatches += same < k
            note = f"   exact for {same}/{k}"
        rows.append({"prompt_len": len(prompt), "produced": len(gen), "acc": acc})
        print(f"  prompt {i:3d} (len {len(prompt):4d}): {len(acc):3d} blocks, {len(gen):3d} tokens, "
              f"mean {np.mean(acc):.3f}{note}", flush=True)
    lens = np.array(all_lens, float)
    mean = float(lens.mean())
    sem = float(lens.std(ddof=1) / np.sqrt(len(lens))) if len(lens) > 1 else float("nan")
    print(f"\n[acceptance] {len(lens)} blocks over {len(prompts)} prompts", flush=True)
    print("  accepted-length histogram (tokens committed per verify dispatch):", flush=True)
    for k in range(1, a.block + 2):  # a round commits the accepted drafts and the bonus: up to block + 1
        c = int((lens == k).sum())
        if c:
            print(f"    {k:2d}: {c:5d}  {c / len(lens):6.1%}  {'#' * int(60 * c / len(lens))}", flush=True)
    print(f"\n  mean tokens per verify dispatch : {mean:.3f} +/- {sem:.3f}  (1 s.e.; a FLOOR -- see the comment above)",
          flush=True)
    if a.exactness:
        print(f"  exactness: {len(prompts) - mismatches}/{len(prompts)} prompts reproduce the non-speculative stream",
              flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"rows": rows, "mean": mean, "speedup": None}, indent=1))
        print(f"  raw -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
