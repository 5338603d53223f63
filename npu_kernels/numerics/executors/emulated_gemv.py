"""GEMV's sum as mv.cc computes it on the AIE (`mv_lane_sum`): 64 FP32 lane accumulators per output row,
then aie_api's reduce_add tree (aie2p or aie2). Evidence: docs/emulated_numerics.md (GEMV).
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import widened

MV_LANES = 64  # mv.cc:81 `matvec_vectorized<64>`: 64 accfloat lanes per row
# the products of a block of rows held at once (256 KiB: in L2; measured 2026-12-07, one core, a 1B-size decode's
# shapes 2-2.7x faster than one pass over all rows per step, whose accumulators fall out of cache; small shapes alike)
CHUNK_BYTES = 1 << 18


def mv_lane_sum(a: np.ndarray, x: np.ndarray, target: str = "npu2") -> np.ndarray:
    """sum_k a[m, k] * x[k] in float32 in mv.cc's order (docs/emulated_numerics.md, GEMV): 64 lane
    accumulators over k = l (mod 64) in order, then aie::reduce_add's tree. K is zero-padded to a
    multiple of 64 (the builder asserts K % 64 == 0; exact zeros change no sum). `a` is float32 values or a
    weight held as bf16 bits (uint16, npu_kernels.numerics.bf16.held_bf16): those are widened a block of rows at a
    time, exactly, in cache (no float32 copy of the whole weight, and no pass over one)."""
    M, K = a.shape
    bits = a.dtype == np.uint16
    pad = -K % MV_LANES
    if pad:
        a = np.concatenate([a, np.zeros((M, pad), a.dtype)], axis=1)  # bits 0: +0.0
        x = np.concatenate([x, np.zeros(pad, np.float32)])
    steps = (K + pad) // MV_LANES
    a3 = a.reshape(M, steps, MV_LANES)  # (rows, k steps, lanes): lane l of step j is k = 64 j + l
    x2 = x.reshape(steps, MV_LANES)
    acc = np.empty((M, MV_LANES), np.float32)
    rows = max(1, CHUNK_BYTES // (4 * (K + pad)))
    prod = np.empty((min(rows, M), steps, MV_LANES), np.float32)
    wide = np.empty(prod.shape, np.uint32) if bits else None
    for r0 in range(0, M, rows):  # a block of rows at a time, its products in cache
        r1 = min(M, r0 + rows)
        p = prod[: r1 - r0]
        block = a3[r0:r1]
        if bits:  # bf16 bits -> the float32 of the same value, in the block's buffer
            block = widened(block, wide[: r1 - r0])
        np.multiply(block, x2, out=p)  # exact bf16 products (mac_elem_64's multiplies)
        # each lane's sum over the steps j = 0, 1, ... in order from +0, one FP32 rounding per add: numpy reduces
        # an axis that is not the innermost one element-wise, slice after slice (the lanes axis is innermost), the
        # order a loop of `acc += p[:, j]` has (tests/unit/test_emulated.py checks the two agree bit for bit)
        np.add.reduce(p, axis=1, out=acc[r0:r1], initial=np.float32(0))
    if target == "npu1":  # aie2: quarters (q0 + q1) + (q2 + q3), add_reduce.hpp:288-297
        q = acc.reshape(M, 4, 16)  # (rows, quarter, lane)
        t = (q[:, 0] + q[:, 1]) + (q[:, 2] + q[:, 3])
    else:  # aie2p: lanes i + (i + 32), add_reduce.hpp:344-352
        t = acc[:, :32] + acc[:, 32:]
        t = t[:, :16] + t[:, 16:]
    while t.shape[1] > 1:  # the 16-lane shift tree: i + (i + 8), i + (i + 4), i + (i + 2), i + (i + 1)
        h = t.shape[1] // 2
        t = t[:, :h] + t[:, h:]
    return t[:, 0]


# a block of rows for BLAS is a multiple of this many rows: OpenBLAS's sgemv kernels take rows in groups (of 4 or 8
# on x86) and the leftover rows alone, so blocks that are multiples of 16 leave every row in the group it has in one
# call over all rows (tests/unit/test_emulated.py checks the two agree bit for bit at the model shapes in scope)
BLAS_ROW_GROUP = 16


def blas_rows_sum(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`widened(a) @ x` in float32 (the host BLAS's order, `gemv_order="blas"`) for a weight held as bf16 bits
    (uint16): widened a block of rows at a time into a buffer that stays in cache, each block handed to BLAS as the
    C-contiguous float32 rows one whole widened copy would give it, so every row sums in the same order. Measured
    2026-12-07 (one core): a 1B-size decode step's GEMVs 1.24 s -> 0.78 s against widening each weight whole."""
    M, K = a.shape
    rows = max(BLAS_ROW_GROUP, CHUNK_BYTES // (4 * K) // BLAS_ROW_GROUP * BLAS_ROW_GROUP)
    y = np.empty(M, np.float32)
    buf = np.empty((min(rows, M), K), np.uint32)
    for r0 in range(0, M, rows):
        r1 = min(M, r0 + rows)
        np.matmul(widened(a[r0:r1], buf[: r1 - r0]), x, out=y[r0:r1])
    return y
