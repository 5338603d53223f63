"""The per-kernel math the catalog's specs name: mlir-air's harness inputs, the FP32 references on them, how
an executor is called with them, the shape checks and the FlashAttention costs.

Signatures are the `KernelSpec` fields' (npu_kernels.numerics.spec): `*_inputs(shape, rng)`, `*_reference(inputs,
shape)` in FP32, `*_call(executor, inputs, shape, contract, tile)`. The harness scripts they follow are named
beside each constant; `npu_kernels.numerics.harness_inputs` reproduces those scripts' own draws line by line and
cites each at its file:line (mlir-air e972f29).
Imported by the kernel modules of npu_kernels.numerics.kernels (each declares its own inputs, reference and call; the
shared pieces are here: `bf16_randn`, the eps, `rope_lut`, `attention_reference`, the 4-bit dequantisation) and by
whoever needs a reference.
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16

RMS_EPS = 1e-5  # the mlir-air harnesses' eps (weighted_rms_norm.py, layer_norm.py)
LN_EPS = 1e-5
ROPE_THETA = 500000.0  # rope_halfsplit.py's LUT (llama-3.2 rope_base)


def bf16_randn(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    """bf16-rounded N(0, scale^2) values as float32 (the harnesses draw float and cast to bf16)."""
    return to_bf16(rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))


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


def q4nx_dequantised(i) -> np.ndarray:
    """W (M, K) = q * scale + min in FP32, each group's scale and min repeated over its 32 columns."""
    return i["codes"] * np.repeat(i["scale"], Q4_GROUP, axis=1) + np.repeat(i["min"], Q4_GROUP, axis=1)
