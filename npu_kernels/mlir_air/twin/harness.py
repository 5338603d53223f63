"""The stand-in's kernel harnesses: mlir-air's scripts' command lines, computed by the emulated executor.

`python -m npu_kernels.mlir_air.twin.harness KIND [the script's own flags]` parses the flags of the mlir-air
script that KIND stands for (the argparse each `programming_examples/<dir>/<script>.py` declares, cited per
parser below), asserts what that script asserts (the same
messages, as a Python traceback), runs the kernel at the requested shape and tile on npu-ledger's emulated
NPU2 executor and prints what mlir-air's `XRTRunner` prints (python/air/backend/xrt_runner.py:296-303
Latency, :375-392 `[precision]`, :433-469 the ERROR / Shape / Mismatches / Index block, :336-373 `PASS!` /
`failed.`); exit status 0 on PASS and 255 on failure (`exit(runner.run_test(...))` with -1). A kernel module's
stand-in may be a script without argparse (`TwinStandIn.parses_flags`): no flag at all.

Latency figures are the NPU2 performance model's (`npu_kernels.perf.modelled_kernel_figures`) printed in
mlir-air's own line format, so mlir-air's parsers read them unchanged; the twin's README says they are
modelled. Inputs follow the harness scripts where `npu_kernels.numerics.harness_inputs` has transcribed them (GEMM,
eltwise add, GELU, SiLU-and-Mul), else the project's own generator (`KernelSpec.make_inputs`, seed 0).

A fault file (`twin-faults.txt` in the twin's root, or env NPU_LEDGER_TWIN_FAULTS, comma-separated) naming
KIND makes the harness fail to compile: an aircc-style error line and exit status 1, which make reports as
`make: *** [Makefile:N: run] Error 1`. A line `KIND: TEXT` prints TEXT as the compiler's error. A line `KIND: hang`
makes every run of it hang instead (a dispatch that never returns, as after an NPU2 TDR) until its caller kills it at
the harness table's timeout_s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.executors import make_executor
from npu_kernels.numerics.harness_inputs import HARNESS_KERNELS, harness_case, precision_stats
from npu_kernels.numerics.kernels import piece, stand_ins
from npu_kernels.numerics.tile_rules import check_tile
from npu_kernels.numerics.tiles import TileRuleViolation, plan_tile
from npu_kernels.perf import modelled_kernel_figures
from npu_kernels.settings import env_get

FAULT_FILE = "twin-faults.txt"
ENV_FAULTS = "NPU_LEDGER_TWIN_FAULTS"
ENV_ROOT = "NPU_LEDGER_TWIN_ROOT"
DEFAULT_COMPILE_ERROR = "error: 'aie.dma_bd' op Allocator exhausted available buffer descriptor IDs"
# the kernels of npu_kernels.numerics.kernels: each module's stand-in (its script's flags, checks and lines)
STAND_INS = {kind: t for kind, (_, t) in stand_ins().items()}
KINDS = tuple(STAND_INS)
HANG = "hang"  # the fault text that hangs the harness (module docstring)
HANG_S = 3600.0  # far past any test's timeout: the run ends when its caller kills it


def faults() -> dict[str, str]:
    """KIND -> compiler error text, from the twin's fault file and env NPU_LEDGER_TWIN_FAULTS."""
    out: dict[str, str] = {}
    lines: list[str] = []
    root = env_get(ENV_ROOT)
    if root and (Path(root) / FAULT_FILE).is_file():
        lines += (Path(root) / FAULT_FILE).read_text().splitlines()
    lines += [x for x in env_get(ENV_FAULTS, "").split(",")]
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        kind, _, text = line.partition(":")
        out[kind.strip()] = text.strip() or DEFAULT_COMPILE_ERROR
    return out


def _parser(kind: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=kind)
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("-p", "--print-module-only", action="store_true")
    if kind in STAND_INS:  # a kernel module's stand-in (npu_kernels.numerics.kernels: its script's flags)
        if not STAND_INS[kind].parses_flags:  # a script without argparse: `python3 <script>`, nothing else
            p = argparse.ArgumentParser(prog=kind)
        STAND_INS[kind].add_flags(p)
    else:
        raise SystemExit(f"unknown harness kind {kind!r}; expected one of {', '.join(KINDS)}")
    return p


def _check(kind: str, a) -> tuple[str, dict, str | None, dict, float | None, bool]:
    """The script's own assertions, then (catalog kernel, shape, contract, tile, perf_flops, compile_only)."""
    return _stand_in_check(STAND_INS[kind], a)


def _stand_in_check(stand_in, a) -> tuple[str, dict, str | None, dict, float | None, bool]:
    """A kernel module's stand-in: its own checks, then (where its script asserts them) the tile rules, the first
    broken one as an AssertionError naming the rule."""
    kernel, shape, contract, tile, perf_flops, compile_only = stand_in.check(a)
    if stand_in.asserts_tile_rules:
        broken = check_tile(kernel, shape, tile, "npu2")
        assert not broken, f"{broken[0][0]}: {broken[0][1]}"
    return kernel, shape, contract, tile, perf_flops, compile_only


def compute(kernel: str, shape: dict, contract: str | None, tile: dict):
    """(output, reference, out dtype, rtol, atol) of one emulated run at `shape` / `tile`."""

    spec = get_spec(kernel)
    s = spec.normalize_shape(shape)
    c = spec.contract(contract)
    if kernel in HARNESS_KERNELS:
        case = harness_case(kernel, s, c.name, tile=tile)  # conv1d: the pad the tile names
        data, ref = case.inputs, case.reference
    else:
        data, ref = spec.make_inputs(s, 0), None
    with_tile = piece(kernel, "calls_with_tile")  # the script's tile planned and handed to the executor
    plan = plan_tile(kernel, s, "npu2", tile if with_tile else None)
    call_tile = {k: v for k, v in plan.tile.items()} if with_tile and plan.legal else None
    out = spec.call(make_executor("emulated", "npu2"), data, s, c.name, call_tile)
    if ref is None:
        ref = spec.reference(data, s, c.name)
    return out, ref, c.out_dtype, c.rtol, c.atol


def report(out, ref, out_dtype: str, rtol: float, atol: float) -> int:
    """Print XRTRunner's `[precision]` line and check (xrt_runner.py:375-392, :433-469); 0 PASS, -1 failed."""

    st = precision_stats(out, ref, out_dtype)
    exp = np.asarray(ref, np.float32)
    act = np.asarray(out, np.float32).reshape(exp.shape)
    if out_dtype == "bf16":
        exp, act = exp.astype(np.float64), act.astype(np.float64)
    print(f"[precision] Output 0 ({exp.size} elements): mean_rel_L1={st.mean_rel_L1:.3e} | "
          f"rel_err max={st.rel_err_max:.3e} | abs_err max={st.abs_err_max:.3e} | rtol={rtol:.1e} atol={atol:.1e}")
    close = np.isclose(act, exp, rtol=rtol, atol=atol)
    bad = int(exp.size - np.count_nonzero(close))
    if bad == 0:
        print("PASS!")
        return 0
    print("ERROR: Output 0 does not meet expected output.")
    print(f"Shape: {exp.shape}")
    print(f"Mismatches: {bad} / {exp.size} elements ({100 * bad / exp.size:.2f}%)")
    where = np.where(~close)
    print(f"First {min(20, bad)} mismatched locations:")
    for j in range(min(20, bad)):
        idx = tuple(np.int64(w[j]) for w in where)
        e, a = exp[idx], act[idx]
        print(f"  Index {idx}: expected={e}, actual={a}, diff={abs(a - e)}")
    if bad > 20:
        print(f"  ... and {bad - 20} more mismatches")
    print("failed.")
    return -1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        raise SystemExit(f"usage: python -m npu_kernels.mlir_air.twin.harness KIND [flags]; KIND one of {', '.join(KINDS)}")
    kind, rest = argv[0], argv[1:]
    a = _parser(kind).parse_args(rest)
    if getattr(a, "perf_iters", 0) < 0:
        _parser(kind).error("--perf-iters must be >= 0")
    kernel, shape, contract, tile, perf_flops, compile_only = _check(kind, a)
    broken = faults().get(kind)
    if broken == HANG:
        print(f"{kind}: running on the device", flush=True)
        time.sleep(HANG_S)  # only the caller's kill at its timeout ends it
        return 1
    if broken:  # a compile failure: the compiler's error on stderr, exit 1 (make prints its own Error line)
        print(f"aircc: compiling the {kind} harness", flush=True)
        print(broken, file=sys.stderr, flush=True)
        return 1
    if compile_only:
        print(STAND_INS[kind].compiled_line, end="")
        print()
        return 0
    timing = STAND_INS[kind].timing if kind in STAND_INS else None
    if timing is not None and timing(a, modelled_kernel_figures, shape, tile):  # a timing-only run: no check
        return 0

    try:
        out, ref, out_dtype, rtol, atol = compute(kernel, shape, contract, tile)
    except TileRuleViolation as e:  # a tile NPU2 cannot build: the compiler's error, as a compile failure
        print(f"aircc: compiling the {kind} harness", flush=True)
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    if getattr(a, "perf_iters", 0) > 0:  # xrt_runner.py:296-303
        us = modelled_kernel_figures(kernel, shape, tile)["latency_us"]
        line = f"Latency (us): {us:.1f}"
        if perf_flops is not None:
            line += f" | Throughput: {perf_flops / (us * 1e-6) / 1e9:.6e} GFLOP/s"
        print(line)
    return report(out, ref, out_dtype, rtol, atol)


def profile_main(argv: list[str] | None = None) -> int:
    """The C++ timers of `make profile` (GEMV test.cpp:200-214, FA test_elf_npu2.cpp:230-267, eltwise
    test.cpp:142-226), one modelled figure for every statistic: `profile KIND --m M --k K ...`."""

    argv = list(sys.argv[1:] if argv is None else argv)
    kind = argv[0]
    p = argparse.ArgumentParser(prog=f"{kind}-profile")
    for name in ("M", "K", "lq", "lk", "dk", "dv", "num-heads", "num-kv-heads", "S"):
        p.add_argument(f"--{name}", type=int, default=None)
    a = p.parse_args(argv[1:])
    if kind in STAND_INS and STAND_INS[kind].profile is not None:  # a kernel module's timer (its test.cpp cited there)
        STAND_INS[kind].profile(a, modelled_kernel_figures)
        return 0
    raise SystemExit(f"no profile timer for {kind!r}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "profile":
        sys.exit(profile_main(sys.argv[2:]))
    sys.exit(main())
