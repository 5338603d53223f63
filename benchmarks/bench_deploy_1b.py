"""Benchmark: a Llama-3.2-1B-size deployment on the emulated executor, phase by phase (issue 48 item 3).

    python benchmarks/bench_deploy_1b.py [--out bench-results/deploy_1b.json] [--dir bench-results/deploy_1b]
                                         [--until 7] [--min-available-gib 1.0]

Builds (once; kept under --dir, git-ignored) a random-weight model folder of Llama-3.2-1B's published shape
(tests/fixtures/configs/llama-3.2-1b.json: hidden 2048, 16 layers, 32 q / 8 kv heads, FFN 8192, vocab 128256, tied
head; bf16 safetensors) with the tiny test models' initialisation and byte-level tokenizer (tests/models.py), then
runs `ledger init` and `ledger advance --until K` for K = 0..7 on the emulated executor, each a process of its own
with a SQLite ledger in --dir's workspace. Each process's rusage (os.wait4) gives its peak RSS and CPU seconds
(user + sys); the wall time is recorded too but is information only on a shared machine. Not a test: nothing here
is asserted; the JSON is the record (docs/STATUS.md quotes it).

A watchdog stops the phase's process (SIGKILL, its own child only) when this machine's MemAvailable falls under
--min-available-gib, so that a deployment the machine cannot hold does not take other processes with it; the phase
is then recorded as stopped for memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

GIB = 2**30
CONFIG = ROOT / "tests" / "fixtures" / "configs" / "llama-3.2-1b.json"
NAME = "llama-1b"
SEED = 1001
BUILD_VERSION = "1"  # bump when the folder's recipe changes: the folder is rebuilt


def mem_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def build_model(folder: Path) -> dict:
    """The 1B-shaped folder: config.json (the published config, the tiny tokenizer's special ids), one bf16
    safetensors file and the tokenizer. Tensors are drawn one at a time in float32 (the peak is the bf16 file's
    2.3 GiB, not a float32 model's)."""
    stamp = folder / "bench-build.json"
    recipe = {"version": BUILD_VERSION, "seed": SEED, "config": CONFIG.name}
    if stamp.exists() and json.loads(stamp.read_text()) == recipe:
        return {"built": False, "seconds": 0.0}
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from npu_kernels.model.architecture import resolve
    from npu_kernels.model.weights import expected_tensors
    from tests.models import CHAT_TEMPLATE, LOGIT_SPREAD, train_tokenizer

    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(CHAT_TEMPLATE)
    raw = json.loads(CONFIG.read_text())
    raw.update(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    cfg = resolve(raw)
    E = cfg.emb_dim
    rng = np.random.default_rng(SEED)
    tensors = {}
    for name, shape in expected_tensors(cfg).items():  # the tests/models.py initialisation, tensor by tensor
        if len(shape) == 1:  # norm weights
            values = 1.0 + 0.2 * rng.standard_normal(shape, dtype=np.float32)
        elif "embed_tokens" in name:
            values = (LOGIT_SPREAD / E**0.5) * rng.standard_normal(shape, dtype=np.float32)
        else:  # a projection (out, in): unit-scale activations
            values = rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(shape[1]))
        tensors[name] = torch.from_numpy(values).to(torch.bfloat16)
        del values
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    del tensors
    (folder / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
    tokenizer.save_pretrained(folder)
    stamp.write_text(json.dumps(recipe))
    return {"built": True, "seconds": round(time.perf_counter() - t0, 1)}


def probe(model: Path) -> None:
    """The work of Phases 4-6 on the emulated executor with every optimisation switch on (weight residency: the
    executor's resident GEMM operands beside the weights): the prefill and the 16-step decode Phases 4-5 time, the
    token gate on the first prompt, and Phase 6's integrated run. Run only when a gate stopped the deployment
    before Phase 4, so that the memory of those phases is still recorded; it judges nothing."""
    from npu_kernels.backends.in_process import InProcessBackend
    from npu_kernels.model.architecture import load_raw_config, resolve

    cfg = resolve(load_raw_config(model))
    backend = InProcessBackend(model, cfg, "emulated", "npu2",
                               {"weight_residency": True, "fusion": True, "seq_first": True})
    tokens = backend._prompt(len(backend._canonical()))
    backend.measure_prefill(len(tokens))
    backend.measure_decode(len(tokens), 16)
    gate = backend.token_gate(backend.prompts(False)[0], "probe")
    run = backend.integrated_run(tokens, 32)
    print(json.dumps({"token_gate_prompt0": {"passed": gate.passed, "tf_ppl_ratio": gate.tf_ppl_ratio},
                      "integrated_tokens": len(run.tokens)}))


def run_phase(argv: list[str], env: dict, min_available: int, log) -> dict:
    """One `ledger` process: its exit status, wall time, CPU seconds and peak RSS (os.wait4), the last lines
    it printed; stopped by the watchdog when the machine's MemAvailable falls under `min_available`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    stopped = threading.Event()
    low: list[int] = []

    def watch() -> None:
        while not stopped.wait(0.5):
            avail = mem_available()
            if avail is not None and avail < min_available:
                low.append(avail)
                os.kill(proc.pid, signal.SIGKILL)  # our own child, by its id
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, status, usage = os.wait4(proc.pid, 0)
    stopped.set()
    watcher.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "rc": proc.returncode,
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_user_s": round(usage.ru_utime, 1),
        "cpu_sys_s": round(usage.ru_stime, 1),
        "peak_rss_gib": round(usage.ru_maxrss * 1024 / GIB, 2),  # ru_maxrss is in KiB on Linux
        "stopped_for_memory": (f"MemAvailable {low[0] / GIB:.2f} GiB < {min_available / GIB:.2f} GiB"
                               if low else None),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-results/deploy_1b.json")
    ap.add_argument("--dir", default="bench-results/deploy_1b", help="model folder and workspace (git-ignored)")
    ap.add_argument("--until", type=int, default=7, help="last phase to run")
    ap.add_argument("--min-available-gib", type=float, default=1.0)
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--probe-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-probe", action="store_true",
                    help="when a gate stops the deployment before Phase 4, do not probe the Phases 4-6 workload")
    args = ap.parse_args()

    base = Path(args.dir).resolve()
    model = base / "llama-3.2-1b-random"
    if args.build_only:
        print(json.dumps(build_model(model)))
        return 0
    if args.probe_only:
        probe(model)
        return 0
    # built in a process of its own: a child forked from a parent that held the tensors would start with its RSS
    built = subprocess.run([sys.executable, __file__, "--dir", str(base), "--build-only"], capture_output=True,
                           text=True, check=True)
    build = json.loads(built.stdout.strip().splitlines()[-1])
    ws = base / "workspace"
    if ws.exists():
        import shutil

        shutil.rmtree(ws)
    ws.mkdir(parents=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("LEDGER_DB", None)
    cli = [sys.executable, "-m", "handlers.cli", "--workspace", str(ws)]
    steps = [("init", [*cli, "init", str(model), "--name", NAME, "--executor", "emulated"])]
    steps += [(f"phase {k}", [*cli, "advance", NAME, "--until", str(k)]) for k in range(args.until + 1)]
    rows = []
    for label, argv in steps:
        log_path = base / f"{label.replace(' ', '_')}.log"
        with open(log_path, "w") as log:
            row = {"step": label, **run_phase(argv, env, int(args.min_available_gib * GIB), log)}
        tail = log_path.read_text(errors="replace").strip().splitlines()
        row["last_lines"] = tail[-3:]
        rows.append(row)
        cpu = row["cpu_user_s"] + row["cpu_sys_s"]
        print(f"{label:8} rc {row['rc']:>3}  wall {row['wall_s']:7.1f} s  cpu {cpu:7.1f} s"
              f"  peak RSS {row['peak_rss_gib']:6.2f} GiB  {tail[-1] if tail else ''}", flush=True)
        if row["rc"] != 0:
            break
    deployed = len(rows) == len(steps) and all(r["rc"] == 0 for r in rows)
    stopped_at = next((r["step"] for r in rows if r["rc"] != 0), None)
    if stopped_at and stopped_at in ("phase 0", "phase 1", "phase 2", "phase 3") and not args.no_probe:
        label = "probe: Phases 4-6 workload, ungated"
        with open(base / "probe.log", "w") as log:
            row = {"step": label, **run_phase([sys.executable, __file__, "--dir", str(base), "--probe-only"], env,
                                              int(args.min_available_gib * GIB), log)}
        row["last_lines"] = (base / "probe.log").read_text(errors="replace").strip().splitlines()[-1:]
        rows.append(row)
        print(f"{label} rc {row['rc']}  cpu {row['cpu_user_s'] + row['cpu_sys_s']:.1f} s  "
              f"peak RSS {row['peak_rss_gib']:.2f} GiB", flush=True)
    result = {
        "bench": "deploy_1b",
        "model": {"config": CONFIG.name, "weights": "random, tests/models.py initialisation, bf16", "seed": SEED,
                  **build},
        "executor": "emulated",
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                 "load_avg_at_end": os.getloadavg()},
        "provenance": "emulated executor on this CPU host (not an NPU2 measurement)",
        "steps": rows,
        "deployed": deployed,
        "stopped_at": stopped_at,
        "max_peak_rss_gib": max(r["peak_rss_gib"] for r in rows),
        # the totals are the gated steps' (init and the phases run), not the probe's
        "total_wall_s": round(sum(r["wall_s"] for r in rows if not r["step"].startswith("probe")), 1),
        "total_cpu_s": round(sum(r["cpu_user_s"] + r["cpu_sys_s"] for r in rows if not r["step"].startswith("probe")),
                             1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"deployed: {deployed} (stopped at {stopped_at})  peak RSS {result['max_peak_rss_gib']} GiB  "
          f"cpu {result['total_cpu_s']} s  wall {result['total_wall_s']} s  -> {out}")
    return 0 if deployed else 1


if __name__ == "__main__":
    sys.exit(main())
