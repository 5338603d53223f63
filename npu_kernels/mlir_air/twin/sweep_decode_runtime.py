"""The twin's `programming_examples/llms/bench/sweep_decode_runtime.py`: mlir-air's runtime-context decode sweep CLI
and record, on the stand-in model directory.

What mlir-air's script (llms/bench/sweep_decode_runtime.py@c0dabd80) takes and writes, kept here (npu-ledger's
code, written from that contract; npu_kernels.mlir_air.sweeps.parse_decode_sweep is the reader): `--model-name`,
`--makefile`, `--contexts C1,C2,...`, `--expect-fail`, `--peano-dir`, `--env`, `--make-var` (repeatable),
`--timeout` (the whole sweep), `--out`. It runs ONE `make -f <makefile> profile-decode CONTEXTS=C1,C2,...`, reads
every `[bench] decode ctx=C median M ms min m ms (T tok/s)` line the run printed (a run that died partway keeps
the contexts it measured), gives each context without a line the run's status (host_oom, xrt_incomplete,
`fail: ...`, no_number; timeout when the sweep timed out), turns a failure at a context in --expect-fail into
status "expected_fail" with the cause in `detail` only for host/device causes (xrt_incomplete, host_oom,
timeout), prints one `[sweep] <model> ctx=<C> ...` line per context, writes the record {model, axis:
"context_len", metric: "decode_tokens_per_sec", timestamp_utc, runner, points} to --out and exits 1 if a
failure was not forgiven.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

from npu_kernels.mlir_air.sweeps import DECODE_EXPECTABLE
from npu_kernels.settings import env_get, env_copy

POINT = re.compile(r"^\[bench\] decode ctx=(\d+)\s+median\s+([\d.]+)\s*ms\s+min\s+([\d.]+)\s*ms\s*\(([\d.]+)\s*tok/s\)",
                   re.M)
XRT = re.compile(r"ERT_CMD_STATE|did not complete|not COMPLETED|command timeout|xrt::error", re.I)
OOM = re.compile(r"std::bad_alloc|MemoryError|Cannot allocate|Killed", re.I)


def classify(out: str, rc: int) -> str:
    """The status of a context the run printed no point for: the host first, then the device, then the exit."""
    if OOM.search(out):
        return "host_oom"
    if XRT.search(out):
        return "xrt_incomplete"
    if rc != 0:
        m = re.search(r"error: .{0,90}|Traceback", out)
        return f"fail: {m.group(0)}" if m else f"fail: rc={rc}"
    return "no_number"


def sweep(a: argparse.Namespace, contexts: list[int]) -> list[dict]:
    env = {**env_copy(), **dict(kv.partition("=")[::2] for kv in a.env)}
    cmd = ["make", "-f", a.makefile, "profile-decode", "CONTEXTS=" + ",".join(map(str, contexts)),
           *([f"PEANO_INSTALL_DIR={a.peano_dir}"] if a.peano_dir else []), *a.make_var]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
        out, missing = r.stdout + r.stderr, None
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        r, missing = None, "timeout"
    got = {int(m.group(1)): (float(m.group(2)), float(m.group(3)), float(m.group(4))) for m in POINT.finditer(out)}
    missing = missing or classify(out, r.returncode if r else -1)
    points = []
    for ctx in contexts:
        pt = {"context_len": ctx, "decode_tokens_per_sec": None, "ms_per_token": None, "status": "ok"}
        if ctx in got:
            pt["ms_per_token"], pt["min_ms_per_token"], pt["decode_tokens_per_sec"] = got[ctx]
        else:
            pt["status"] = missing
        points.append(pt)
    return points


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sweep_decode_runtime.py")
    p.add_argument("--model-name", required=True)
    p.add_argument("--makefile", required=True)
    p.add_argument("--contexts", required=True)
    p.add_argument("--expect-fail", default="")
    p.add_argument("--peano-dir", default="")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--make-var", action="append", default=[])
    p.add_argument("--timeout", type=int, default=5400)
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args(argv)
    contexts = [int(c) for c in a.contexts.split(",") if c.strip()]
    expect = {int(c) for c in a.expect_fail.split(",") if c.strip()}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"[sweep_decode_runtime] {a.model_name} {contexts} ...", flush=True)
    hard = False
    points = sweep(a, contexts)
    for pt in points:
        if pt["status"] != "ok":
            if pt["context_len"] in expect and pt["status"] in DECODE_EXPECTABLE:
                pt["detail"], pt["status"] = pt["status"], "expected_fail"
            else:
                hard = True
        tps = pt["decode_tokens_per_sec"]
        print(f"[sweep] {a.model_name} ctx={pt['context_len']:<7} "
              f"{f'{tps:.2f} tok/s' if tps is not None else pt['status']}", flush=True)
    rec = {"model": a.model_name, "axis": "context_len", "metric": "decode_tokens_per_sec",
           "timestamp_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "runner": env_get("RUNNER_NAME", ""), "points": points}
    a.out.write_text(json.dumps(rec, indent=2) + "\n")
    print(f"[sweep] wrote {a.out}")
    return 1 if hard else 0


if __name__ == "__main__":
    sys.exit(main())
