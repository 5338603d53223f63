"""Benchmark: SmolLM2-135M prefill (2048 tokens) and 32-token greedy decode, pipeline vs HF bf16.

    python benchmarks/bench_pipeline.py [--out bench-results/pipeline.json] [--quick] [--executor emulated]

Runs, in one process on the same CPU: HF transformers bf16 (the reference, `logits_to_keep=1`), then the
leaf-kernel pipeline on the chosen executor without any PipelineOptions switch, with each switch alone and
with all of them. Prefill and decode are timed separately (median of the timed runs after warm-up
runs); decode is 32 greedy steps after a prefill of the same prompt. Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from npu_kernels.model.architecture import load_raw_config, resolve  # noqa: E402
from npu_kernels.model.hf_reference import HfRunner  # noqa: E402
from npu_kernels.model.options import SWITCHES, PipelineOptions  # noqa: E402
from npu_kernels.model.pipeline import NpuPipeline  # noqa: E402
from npu_kernels.model.prompts import BASE_PROMPTS, CANONICAL_PROMPT  # noqa: E402
from npu_kernels.model.smollm2 import ensure_smollm2  # noqa: E402
from npu_kernels.model.weights import load_weights  # noqa: E402


def make_executor(name: str):
    if name == "fp32":
        from npu_kernels.numerics.executors.base import Fp32Executor

        return Fp32Executor()
    from npu_kernels.backends.in_process import pipeline_executor

    return pipeline_executor(name, "npu2")  # what a deployment's pipeline runs on


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def long_prompt(tokenizer, n: int) -> list[int]:
    text = " ".join([CANONICAL_PROMPT, *BASE_PROMPTS])
    ids: list[int] = []
    while len(ids) < n:
        ids += tokenizer(text)["input_ids"]
    return ids[:n]


def time_runner(runner, tokens, n_decode: int, warmup: int, runs: int) -> dict:
    def prefill():
        t0 = time.perf_counter()
        rec = runner.prefill(tokens)
        return time.perf_counter() - t0, rec

    for _ in range(warmup):
        prefill()
    prefill_s = []
    for _ in range(runs):
        dt, rec = prefill()
        prefill_s.append(dt)
    token, pos = rec.top1_token, len(tokens)
    generated = [token]
    t0 = time.perf_counter()
    for _ in range(n_decode):
        step = runner.decode_step(token, pos)
        token, pos = step.top1_token, pos + 1
        generated.append(token)
    decode_s = time.perf_counter() - t0
    return {"prefill_s": statistics.median(prefill_s), "prefill_runs_s": prefill_s,
            "decode_ms_per_token": 1e3 * decode_s / max(n_decode, 1), "decode_tokens_per_s": n_decode / decode_s,
            "tokens": generated}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="256-token prefill, 8 decode steps, one timed run")
    ap.add_argument("--executor", default="emulated")
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads for HF (default: torch's own); on shared cores 1 avoids "
                         "OpenMP spin-wait stalls that can make HF decode 50x slower")
    args = ap.parse_args(argv)
    seq = args.seq or (256 if args.quick else 2048)
    n_decode, warmup, runs = (8, 1, 1) if args.quick else (32, 1, 3)

    folder = ensure_smollm2()
    cfg = resolve(load_raw_config(folder))
    t0 = time.perf_counter()
    weights = load_weights(folder, cfg)
    load_s = time.perf_counter() - t0
    load_before = os.getloadavg()
    hf = HfRunner(folder, threads=args.threads)
    tokens = long_prompt(hf.tokenizer, seq)

    results = {}
    results["hf_bf16"] = time_runner(hf, tokens, n_decode, warmup, runs)
    variants = {"baseline": PipelineOptions()}
    variants.update({s: PipelineOptions(**{s: True}) for s in SWITCHES})
    variants["all"] = PipelineOptions.optimised()
    profile = {}
    for name, options in variants.items():
        executor = make_executor(args.executor)
        t0 = time.perf_counter()
        pipe = NpuPipeline(weights, cfg, executor, options)
        setup_s = time.perf_counter() - t0
        row = time_runner(pipe, tokens, n_decode, warmup, runs)
        row.update(setup_s=setup_s, options=options.to_dict())
        results[f"{args.executor}:{name}"] = row
        if name == "all":
            pipe.reset_timers()
            executor.timer.reset()
            rec = pipe.prefill(tokens)
            pipe.decode_step(rec.top1_token, len(tokens))
            profile = pipe.profile()

    hf_prefill = results["hf_bf16"]["prefill_s"]
    print(f"SmolLM2-135M, prefill {seq} tokens, {n_decode}-token greedy decode, executor {args.executor}, "
          f"torch threads {torch_threads()}, load average {load_before[0]:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'runner':<28}{'prefill s':>11}{'vs HF':>8}{'decode ms/tok':>15}{'tok/s':>8}  same tokens as HF")
    for name, row in results.items():
        same = row["tokens"] == results["hf_bf16"]["tokens"]
        print(f"{name:<28}{row['prefill_s']:>11.3f}{row['prefill_s'] / hf_prefill:>8.2f}"
              f"{row['decode_ms_per_token']:>15.1f}{row['decode_tokens_per_s']:>8.1f}  {same}")
    report = {
        "model": "SmolLM2-135M-Instruct", "seq": seq, "n_decode": n_decode, "warmup": warmup, "runs": runs,
        "executor": args.executor, "weights_load_s": load_s, "torch_threads": torch_threads(),
        "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
        "host": {"machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
                 "python": platform.python_version()},
        "results": results, "profile_all_switches": profile,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, default=float))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
