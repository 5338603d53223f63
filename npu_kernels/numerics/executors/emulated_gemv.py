"""GEMV's sum as mv.cc computes it on the AIE (`mv_lane_sum`): 64 FP32 lane accumulators per output row,
then aie_api's reduce_add tree (aie2p or aie2). Evidence: docs/emulated_numerics.md (GEMV).
"""

from __future__ import annotations

import numpy as np

MV_LANES = 64  # mv.cc:81 `matvec_vectorized<64>`: 64 accfloat lanes per row


def mv_lane_sum(a: np.ndarray, x: np.ndarray, target: str = "npu2") -> np.ndarray:
    """sum_k a[m, k] * x[k] in float32 in mv.cc's order (docs/emulated_numerics.md, GEMV): 64 lane
    accumulators over k = l (mod 64) in order, then aie::reduce_add's tree. K is zero-padded to a
    multiple of 64 (the builder asserts K % 64 == 0; exact zeros change no sum)."""
    M, K = a.shape
    pad = -K % MV_LANES
    if pad:
        a = np.concatenate([a, np.zeros((M, pad), np.float32)], axis=1)
        x = np.concatenate([x, np.zeros(pad, np.float32)])
    steps = (K + pad) // MV_LANES
    a3 = a.reshape(M, steps, MV_LANES)  # (rows, k steps, lanes): lane l of step j is k = 64 j + l
    x2 = x.reshape(steps, MV_LANES)
    acc = np.zeros((M, MV_LANES), np.float32)
    prod = np.empty_like(acc)
    for j in range(steps):  # one mac_elem_64 per step: exact bf16 products, one FP32 rounding per add
        np.multiply(a3[:, j, :], x2[j], out=prod)
        acc += prod
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
