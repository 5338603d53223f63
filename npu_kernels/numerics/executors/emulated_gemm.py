"""GEMM's launch grid and K loops as the AIE runs them, for the emulated executor's gemm (npu_kernels.numerics.kernels.gemm):
the bf16-out-low tier's per-L1-tile rounding of the partial sum (`accumulate_bf16`), and what an illegal tile leaves
out - the rows and columns the launch grid never covers (`covered`), the part of K the L2/L1 loops never reach
(`k_used`). Evidence: docs/emulated_numerics.md (GEMM).
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import rne_bf16_


def covered(n: int, step: int) -> int:
    """How much of an axis of length n a launch grid of floor(n / step) steps covers."""
    return (n // step) * step if step > 0 else n


def k_used(K: int, tile: dict) -> np.ndarray | None:
    """Indices of K the L2/L1 loops reach for a (possibly illegal) tile; None when all of K is reached."""
    tk2, tk1 = int(tile["tile_k_l2"]), int(tile["tile_k_l1"])
    n_l2 = K // tk2 if tk2 > 0 else 0
    per_l2 = (tk2 // tk1) * tk1 if tk1 > 0 else 0
    if n_l2 * tk2 == K and per_l2 == tk2:
        return None
    return np.concatenate([np.arange(i * tk2, i * tk2 + per_l2) for i in range(n_l2)] or [np.zeros(0, int)])


def accumulate_bf16(qa: np.ndarray, qb: np.ndarray, tile_k_l1: int) -> np.ndarray:
    """Direct-codegen bf16 GEMM: the partial sum is rounded to bf16 (RNE) after every L1 K tile."""
    M, K = qa.shape
    c = np.zeros((M, qb.shape[1]), np.float32)
    part = np.empty_like(c)
    step = max(1, tile_k_l1)
    for k0 in range(0, K, step):
        np.matmul(qa[:, k0 : k0 + step], qb[k0 : k0 + step], out=part)
        c += part
        rne_bf16_(c)
    return c
