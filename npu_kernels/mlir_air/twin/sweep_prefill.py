"""The twin's `programming_examples/llms/bench/sweep_prefill.py`: mlir-air's prefill sweep CLI and output, on the
stand-in model directory.

What mlir-air's script (llms/bench/sweep_prefill.py@57bbed0b) takes and prints, kept here (npu-ledger's code,
written from that contract; npu_kernels.mlir_air.sweeps is the reader): `--model-name`, `--makefile`,
`--lengths L1,L2,...`, `--expect-fail`, `--seq-env`, `--bench-env`, `--peano-dir`, `--env`, `--make-var`
(repeatable), `--timeout`, `--out`; per length it runs `make -f <makefile> profile-prefill CTX=<L>`, prints
`[sweep_prefill] <model> L=<L> ...`, refuses a point whose engines were built at another length
(`wrong_seq_len: engines built at N`), reads `Time to first token (TTFT): <s>s`, else names the failure by the
first of its causes the output shows (`classify`: the registry/BD/tile causes, then device_fail, host_oom,
`fail: error: ...`, no_number); prints `[sweep_prefill]   <point JSON>` (prefill_len, ttft_ms,
prefill_tokens_per_sec = L / TTFT, status; a failure at a length in --expect-fail whose cause is in the closed
list becomes status "expected_fail" with the cause in `detail` - wrong_seq_len never); then it writes the record
{model, axis, metric, timestamp_utc, points} to --out, prints it, and exits 1 if a failure was not forgiven.
The stand-in's TTFT is the NPU2 performance model's (`make profile-prefill` of a stand-in model directory); its
failures are the twin's fault switch (`profile-prefill@L: CAUSE`, npu_kernels.mlir_air.twin.stand_in).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

from npu_kernels.mlir_air.sweeps import PREFILL_EXPECTABLE, cause
from npu_kernels.settings import env_copy

TTFT = re.compile(r"^\s*Time to first token \(TTFT\):\s*([\d.]+)\s*s", re.M)
# the built-length guard takes both forms sweep_prefill.py@57bbed0 names: "[q4nx_prefill] constructing seq_len=N"
# and "Compiling ... prefill kernels (seq_len=N)"
BUILT = re.compile(r"(?:constructing seq_len=|prefill kernels \(seq_len=)(\d+)")
# the causes sweep_prefill.py@57bbed0 tells apart (BUILD_LIMIT_RES, XRT_FAIL_RE, HOST_OOM_RE), most specific first
CAUSES: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"not in registry GEMM_\S+"), "no_registry_shape"),
    (re.compile(r"Too many simultaneously active buffer descriptors"), "bd_exhaustion"),
    (re.compile(r"registry tile_m=\d+ != method '[^']+' tile_m=\d+"), "method_tile_mismatch"),
    (re.compile(r"assumes all \d+ GEMMs share the .{0,40}suffix"), "stitcher_mixed_tile_m"),
    (re.compile(r"ERT_CMD_STATE|did not complete|not COMPLETED|command timeout|xrt::error", re.I), "device_fail"),
    (re.compile(r"std::bad_alloc|MemoryError|Cannot allocate|Killed|out of memory", re.I), "host_oom"),
)


def classify(out: str, rc: int) -> str:
    """A failed point's status from what `make profile-prefill` printed."""
    for rx, status in CAUSES:
        if rx.search(out):
            return status
    if rc != 0:
        m = re.search(r"error: .{0,90}", out)
        return f"fail: {m.group(0)}" if m else f"fail: rc={rc}"
    return "no_number"


def point(a: argparse.Namespace, length: int) -> dict:
    """One padded prefill length: build + time through the model directory's `profile-prefill` target."""
    env = {**env_copy(), a.seq_env: str(length), a.bench_env: str(length),
           **dict(kv.partition("=")[::2] for kv in a.env)}
    cmd = ["make", "-f", a.makefile, "profile-prefill", f"CTX={length}",
           *([f"PEANO_INSTALL_DIR={a.peano_dir}"] if a.peano_dir else []), *a.make_var]
    pt: dict = {"prefill_len": length}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
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
        pt["status"] = classify(out, r.returncode)
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
    p.add_argument("--seq-env", default="Q4NX_SEQ_LEN")
    p.add_argument("--bench-env", default="Q4NX_BENCH_L")
    p.add_argument("--peano-dir", default="")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--make-var", action="append", default=[])
    p.add_argument("--timeout", type=int, default=3600)
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args(argv)
    lengths = [int(x) for x in a.lengths.split(",") if x.strip()]
    expect = {int(x) for x in a.expect_fail.split(",") if x.strip()}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    points, hard = [], False
    for length in lengths:
        print(f"[sweep_prefill] {a.model_name} L={length} ...", flush=True)
        pt = point(a, length)
        if pt["status"] != "ok":
            if length in expect and cause(pt["status"]) in PREFILL_EXPECTABLE:
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
