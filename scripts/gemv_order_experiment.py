"""Issue #17: which FP32 summation order of the GEMV kernel reproduces NPU2's `[precision]` lines.

    PYTHONPATH=. python scripts/gemv_order_experiment.py [MxK ...]

For every row of mlir-air's GEMV_bf16.md tested-shapes table (programming_examples/kernel_registry/details/
GEMV_bf16.md:90-128, mirror e972f29; all measured with matvec.py, seed 42, randn*4 - the same harness as
npu_kernels.numerics.harness_inputs._gemv) it prints the three statistics of each candidate kernel order against the
harness reference (numpy's float32 dot, as the harness computes it) and whether every printed digit
agrees. A published tie like "1.3e-1" for 0.125 counts as agreeing (half a unit of the last digit).

Candidate orders (HW side):
  mv.cc      64 lane accumulators, then aie_api's aie2p reduce_add tree (the emulator, mv_lane_sum)
  lanes_seq  the same 64 lanes summed 0..63 in order
  exact      the float64 dot rounded to float32 (no FP32 accumulation error at all)
  lanes_f64  the 64 FP32 lanes, the reduction exact
The reference's own order (an FP32 sum in numpy's order) is what the emulator returned before: 0 | 0 | 0
everywhere. Note the reference is numpy's BLAS: on this machine OpenBLAS's Haswell sgemv_t kernel
(8 lanes x 4 rows, kernel/x86_64/sgemv_t_microk_haswell-4.c); a host whose BLAS or thread split differs
rounds a few near-tie outputs differently.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.executors.emulated_gemv import mv_lane_sum
from npu_kernels.numerics.harness_inputs import harness_case, precision_stats, significant_digits

# (M, K, mean_rel_L1, rel_err max, abs_err max) as GEMV_bf16.md:92-128 prints them
ROWS = [
    (2048, 2048, "1.6e-9", "4.4e-3", "2.0e-3"), (512, 2048, "0", "0", "0"), (8192, 2048, "2.7e-8", "5.9e-3", "1.3e-1"),
    (2048, 8192, "0", "0", "0"), (16384, 2048, "0", "0", "0"), (49152, 2048, "5.9e-8", "8.5e-3", "1.0e0"),
    (2048, 1024, "1.2e-6", "5.2e-3", "1.0e0"), (1024, 1024, "0", "0", "0"), (16384, 1024, "2.0e-8", "5.3e-3", "1.25e-1"),
    (896, 896, "0", "0", "0"), (128, 896, "0", "0", "0"), (4864, 896, "0", "0", "0"), (896, 4864, "0", "0", "0"),
    (16384, 896, "7.2e-12", "1.3e-2", "4.6e-5"), (1536, 1536, "0", "0", "0"), (256, 1536, "0", "0", "0"),
    (8960, 1536, "1.7e-9", "4.8e-3", "7.8e-3"), (1536, 8960, "2.2e-6", "7.8e-3", "4.0e+0"),
    (16384, 1536, "2.3e-8", "4.1e-3", "1.25e-1"), (1024, 2048, "0", "0", "0"), (6144, 2048, "0", "0", "0"),
    (2048, 6144, "0", "0", "0"), (256, 2048, "0", "0", "0"), (11008, 2048, "7.9e-8", "2.8e-2", "5.0e-1"),
    (2048, 11008, "0", "0", "0"), (4096, 2560, "7.3e-7", "6.7e-3", "2.0e0"), (1024, 2560, "0", "0", "0"),
    (2560, 4096, "0", "0", "0"), (9728, 2560, "0", "0", "0"), (2560, 9728, "2.3e-10", "1.2e-2", "7.3e-4"),
    (16384, 2560, "4.2e-7", "5.6e-3", "4.0e0"), (1024, 3072, "0", "0", "0"), (3072, 1024, "4.9e-10", "6.0e-3", "4.9e-4"),
    (3072, 3072, "1.8e-9", "4.8e-3", "3.9e-3"), (3072, 8192, "0", "0", "0"), (8192, 3072, "1.1e-7", "1.4e-2", "5.0e-1"),
    (16384, 3072, "3.4e-7", "7.8e-3", "4.0e0"),
]


def agrees(value: float, printed: str) -> bool:
    p = float(printed)
    if p == 0:
        return value == 0
    unit = 10 ** (math.floor(math.log10(abs(p))) - significant_digits(printed) + 1)
    return abs(value - p) <= 0.5 * unit * (1 + 1e-9)


def lanes(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    M, K = a.shape
    acc = np.zeros((M, 64), np.float32)  # (rows, lanes)
    for j in range(0, K, 64):
        acc += a[:, j : j + 64] * x[j : j + 64]
    return acc


def orders(a: np.ndarray, x: np.ndarray) -> dict[str, np.ndarray]:
    acc = lanes(a, x)
    seq = np.zeros(a.shape[0], np.float32)
    for lane in range(64):
        seq += acc[:, lane]
    return {
        "mv.cc": mv_lane_sum(a, x),
        "lanes_seq": seq,
        "exact": (a.astype(np.float64) @ x.astype(np.float64)).astype(np.float32),
        "lanes_f64": acc.astype(np.float64).sum(axis=1).astype(np.float32),
        "ref_order": a @ x,
    }


def main(only: list[str]) -> None:
    wins: dict[str, int] = {}
    for M, K, *pub in ROWS:
        if only and f"{M}x{K}" not in only:
            continue
        case = harness_case("gemv", {"M": M, "K": K})
        cells = []
        for name, y in orders(case.inputs["a"], case.inputs["x"]).items():
            s = precision_stats(to_bf16(y), case.reference, "bf16")
            ok = all(agrees(v, p) for v, p in zip((s.mean_rel_L1, s.rel_err_max, s.abs_err_max), pub))
            wins[name] = wins.get(name, 0) + ok
            cells.append(f"{name} {s.mean_rel_L1:.2g}|{s.rel_err_max:.2g}|{s.abs_err_max:.3g}{' ok' if ok else ''}")
        print(f"{M}x{K}  NPU2 {'|'.join(pub)}  " + "  ".join(cells), flush=True)
    print("rows agreeing in every printed digit:", wins)


if __name__ == "__main__":
    main(sys.argv[1:])
