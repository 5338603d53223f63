"""The per-kernel math the catalog's specs name: mlir-air's harness inputs, the FP32 references on them, how
an executor is called with them, the shape checks and the FlashAttention costs.

Signatures are the `KernelSpec` fields' (npu_kernels.numerics.spec): `*_inputs(shape, rng)`, `*_reference(inputs,
shape)` in FP32, `*_call(executor, inputs, shape, contract, tile)`. The harness scripts they follow are named
beside each constant; `npu_kernels.numerics.harness_inputs` reproduces those scripts' own draws line by line and
cites each at its file:line (mlir-air e972f29).
Imported by `npu_kernels.numerics.catalog` (and by whoever needs a reference: `rope_lut`, `attention_reference`).
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.spec import ShapeError

RMS_EPS = 1e-5  # the mlir-air harnesses' eps (weighted_rms_norm.py, layer_norm.py)
LN_EPS = 1e-5
ROPE_THETA = 500000.0  # rope_halfsplit.py's LUT (llama-3.2 rope_base)


def bf16_randn(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    """bf16-rounded N(0, scale^2) values as float32 (the harnesses draw float and cast to bf16)."""
    return to_bf16(rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))


# --- GEMM / GEMV -----------------------------------------------------------------------------------------


def gemm_inputs(s, rng):
    scale = 1.0 / math.sqrt(s["K"])
    return {"a": bf16_randn(rng, (s["M"], s["K"]), scale), "b": bf16_randn(rng, (s["K"], s["N"]), scale)}


def gemm_reference(i, s):
    return np.matmul(i["a"], i["b"], dtype=np.float32)


def gemm_call(ex, i, s, contract, tile):
    return ex.gemm(i["a"], i["b"], contract=contract, tile=tile)


def gemv_inputs(s, rng):
    scale = 1.0 / math.sqrt(s["K"])
    return {"a": bf16_randn(rng, (s["M"], s["K"]), scale), "x": bf16_randn(rng, (s["K"],), scale)}


def gemv_reference(i, s):
    return i["a"] @ i["x"]


def gemv_call(ex, i, s, contract, tile):
    return ex.gemv(i["a"], i["x"])


# --- norms -----------------------------------------------------------------------------------------------


# --- RoPE ------------------------------------------------------------------------------------------------


def rope_lut(rows: int, head_dim: int, theta: float = ROPE_THETA, positions=None) -> tuple[np.ndarray, np.ndarray]:
    """bf16 cos/sin tables (rows, head_dim/2) for positions 0..rows-1 (rope_halfsplit.py's LUT)."""
    half = head_dim // 2
    pos = np.arange(rows, dtype=np.float64) if positions is None else np.asarray(positions, np.float64)
    freqs = 1.0 / (theta ** (2.0 * np.arange(half, dtype=np.float64) / head_dim))
    angles = np.outer(pos, freqs)  # (rows, half)
    return to_bf16(np.cos(angles).astype(np.float32)), to_bf16(np.sin(angles).astype(np.float32))


# --- FlashAttention --------------------------------------------------------------------------------------


def attention_reference(q, k, v, causal: bool, q_offset: int = 0, window: int | None = None) -> np.ndarray:
    """FP32 SDPA per head (mlir-air attn_npu2.py's reference): masked scores -1e9, softmax in FP32; `window`
    also masks keys at or before q - window (a sliding window)."""
    hq, lq, dk = q.shape
    hkv = k.shape[0]
    group = hq // hkv
    out = np.empty((hq, lq, v.shape[2]), np.float32)
    scale = np.float32(1.0 / math.sqrt(dk))
    for h in range(hq):
        scores = (q[h] @ k[h // group].T) * scale  # (Lq, Lk)
        if causal:
            future = np.arange(k.shape[1])[None, :] > (q_offset + np.arange(lq))[:, None]
            scores = np.where(future, np.float32(-1e9), scores)
        if window:
            old = np.arange(k.shape[1])[None, :] <= (q_offset + np.arange(lq))[:, None] - window
            scores = np.where(old, np.float32(-1e9), scores)
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        out[h] = p @ v[h // group]
    return out


# --- elementwise -----------------------------------------------------------------------------------------


# --- Q4NX (4-bit codes, bf16 scale and min per 32-column group: w = q * scale + min) --------------------
# The on-device 4-bit kernels of mlir-air's llama32_1b_q4nx (dequant_q4nx.cc@0d63308, the fused decode's
# q4_k.h@54341c8); their emulation is npu_kernels.numerics.executors.emulated_q4.

Q4_GROUP = 32  # dequant_q4nx.py GS / dequant_q4nx.cc DIM_GS


def q4nx_check_shape(s):
    if s["K"] % Q4_GROUP:
        raise ShapeError(f"K={s['K']} must be a multiple of the {Q4_GROUP}-column Q4NX group")


def q4nx_gemv_check_shape(s):
    """One q4k block is 32 rows x 256 columns (proj_qmm.cc Q4NX_ROW_BLOCK_SIZE / Q4NX_COL_BLOCK_SIZE)."""
    if s["M"] % 32 or s["K"] % 256:
        raise ShapeError(f"M={s['M']} must be a multiple of 32 and K={s['K']} of 256 (the 32x256 q4k block)")


def q4nx_dequantised(i) -> np.ndarray:
    """W (M, K) = q * scale + min in FP32, each group's scale and min repeated over its 32 columns."""
    return i["codes"] * np.repeat(i["scale"], Q4_GROUP, axis=1) + np.repeat(i["min"], Q4_GROUP, axis=1)


def dequant_q4nx_inputs(s, rng):
    """dequant_q4nx.py's `__main__` draw (@0d63308): q uniform in 0..15, scale U(0.005, 0.02), min U(-0.1, 0.1),
    the latter two as the bf16 the packed row holds (`pack_weight` casts them)."""
    g = s["K"] // Q4_GROUP
    return {
        "codes": rng.integers(0, 16, (s["M"], s["K"])).astype(np.float32),
        "scale": to_bf16(rng.uniform(0.005, 0.02, (s["M"], g))),
        "min": to_bf16(rng.uniform(-0.1, 0.1, (s["M"], g))),
    }


def dequant_q4nx_reference(i, s):
    return q4nx_dequantised(i)


def dequant_q4nx_call(ex, i, s, contract, tile):
    return ex.dequant_q4nx(i["codes"], i["scale"], i["min"])


def gemv_q4nx_inputs(s, rng):
    """proj_qmm_gate.py `make_case` (@307c494): weights N(0, 0.02^2) quantised per 32-column group by the
    min/max rule (scale = (max - min) / 15, q = round((w - min) / scale) clipped to 0..15), activations N(0, 1)
    in bf16; scale and min as the bf16 the packed block holds."""
    M, K = s["M"], s["K"]
    w = (rng.standard_normal((M, K // Q4_GROUP, Q4_GROUP)) * 0.02).astype(np.float32)  # (rows, groups, cols)
    mn = w.min(axis=2)
    span = w.max(axis=2) - mn
    scale = np.where(span <= 0, np.float32(1.0), span / np.float32(15.0)).astype(np.float32)
    q = np.clip(np.round((w - mn[..., None]) / scale[..., None]), 0, 15).reshape(M, K).astype(np.float32)
    return {"codes": q, "scale": to_bf16(scale), "min": to_bf16(mn), "x": bf16_randn(rng, (K,))}


def gemv_q4nx_reference(i, s):
    return np.matmul(q4nx_dequantised(i), i["x"], dtype=np.float32)  # proj_qmm_gate.py's `Y_exact`


def gemv_q4nx_call(ex, i, s, contract, tile):
    return ex.gemv_q4nx(i["codes"], i["scale"], i["min"], i["x"])
