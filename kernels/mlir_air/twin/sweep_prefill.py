"""The twin's `programming_examples/llms/bench/sweep_prefill.py`: mlir-air's prefill sweep CLI and output, on the
stand-in model directory.

What mlir-air's script (llms/bench/sweep_prefill.py@a32bef3) takes and prints, kept here (npu-ledger's code, written
from that contract; kernels.mlir_air.sweeps is the reader): `--model-name`, `--makefile`, `--lengths L1,L2,...`,
`--expect-fail`, `--timeout`, `--make-var` (repeatable), `--out`; per length it runs
`make -f <makefile> profile-prefill CTX=<L>`, prints `[sweep_prefill] <model> L=<L> ...`, refuses a point whose
engines were built at another length (`constructing seq_len=N`), reads `Time to first token (TTFT): <s>s`, and
prints `[sweep_prefill]   <point JSON>` (prefill_len, ttft_ms, prefill_tokens_per_sec = L / TTFT, status; a
failure's status moved to `detail` with status "expected_fail" for a length in --expect-fail); then it writes the
record {model, axis, metric, timestamp_utc, points} to --out, prints it, and exits 1 if any other length failed.
The stand-in's TTFT is the NPU2 performance model's (`make profile-prefill` of a stand-in model directory).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

TTFT = re.compile(r"^\s*Time to first token \(TTFT\):\s*([\d.]+)\s*s", re.M)
# the built-length guard takes both forms sweep_prefill.py@57bbed0 names: "[q4nx_prefill] constructing seq_len=N"
# and "Compiling ... prefill kernels (seq_len=N)"
BUILT = re.compile(r"(?:constructing seq_len=|prefill kernels \(seq_len=)(\d+)")


def point(makefile: str, length: int, make_vars: list[str], timeout: int) -> dict:
    """One padded prefill length: build + time through the model directory's `profile-prefill` target."""
    cmd = ["make", "-f", makefile, "profile-prefill", f"CTX={length}", *make_vars]
    pt: dict = {"prefill_len": length}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pt["status"] = "timeout"
        return pt
    out = r.stdout + r.stderr
    built = BUILT.search(out)
    if built and int(built.group(1)) != length:
        pt["status"] = f"wrong_seq_len: engines built at {built.group(1)}"
        return pt
    m = TTFT.search(out)
    if not m:
        pt["status"] = f"fail: rc={r.returncode}" if r.returncode else "no_number"
        return pt
    s = float(m.group(1))
    pt.update(ttft_ms=round(s * 1000.0, 2), prefill_tokens_per_sec=round(length / s, 1), status="ok")
    return pt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sweep_prefill.py")
    p.add_argument("--model-name", required=True)
    p.add_argument("--makefile", required=True)
    p.add_argument("--lengths", required=True)
    p.add_argument("--expect-fail", default="")
    p.add_argument("--timeout", type=int, default=3600)
    p.add_argument("--make-var", action="append", default=[])
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args(argv)
    lengths = [int(x) for x in a.lengths.split(",") if x.strip()]
    expect = {int(x) for x in a.expect_fail.split(",") if x.strip()}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    points, hard = [], False
    for length in lengths:
        print(f"[sweep_prefill] {a.model_name} L={length} ...", flush=True)
        pt = point(a.makefile, length, a.make_var, a.timeout)
        if pt["status"] != "ok":
            if length in expect:
                pt["detail"], pt["status"] = pt["status"], "expected_fail"
            else:
                hard = True
        print(f"[sweep_prefill]   {json.dumps(pt)}", flush=True)
        points.append(pt)
    rec = {"model": a.model_name, "axis": "prefill_len", "metric": "ttft_ms",
           "timestamp_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "points": points}
    a.out.write_text(json.dumps(rec, indent=2))
    print(json.dumps(rec, indent=2))
    return 1 if hard else 0


if __name__ == "__main__":
    sys.exit(main())
