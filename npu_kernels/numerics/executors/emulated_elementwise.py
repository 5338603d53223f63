"""The direct-codegen elementwise and normalisation kernels of the emulated executor, row by row (RMSNorm,
LayerNorm, RoPE, SiLU-and-Mul, GELU), and the bf16 rounding steps every emulated kernel is built from
(`rounded`, `mul_rounded`, `add_rounded`, in "floor" - the AIE core's default - or "rne" - conv_even). The
evidence for each step: docs/emulated_numerics.md (Rounding modes, RMSNorm / LayerNorm, SiLU-and-Mul, GELU).
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import add_rounded, floor_bf16, mul_rounded, rne_bf16_, rounded, to_bf16  # noqa: F401 (re-exported)
from npu_kernels.numerics.executors.emulated_nlf import tanh_nlf

GELU_SQRT_2_OVER_PI = 0.7978845608
GELU_BETA = 0.044715


def rmsnorm_rows(x, w, eps):
    """x*x kept in FP32 (exact), FP32 sum and mean, FP32 rsqrt floored to bf16, x*rstd and *w floored."""
    sq = np.multiply(x, x, dtype=np.float32)  # bf16*bf16 is exact in FP32; widened without a bf16 rounding
    ms = sq.sum(axis=-1, keepdims=True, dtype=np.float32) / np.float32(x.shape[-1])  # FP32 reduction
    rstd = floor_bf16(np.float32(1.0) / np.sqrt(ms + eps))  # FP32 rsqrt, bf16 scalar
    return mul_rounded(mul_rounded(x, rstd, "floor"), w, "floor")


def layernorm_rows(x, w, b, eps):
    """FP32 mean floored to bf16, bf16 x-mean, its square kept in FP32, FP32 variance, rstd floored to
    bf16, (x-mean)*rstd floored, *w kept in FP32 into the bias add, one floor rounding at the end."""
    n = np.float32(x.shape[-1])
    mean = floor_bf16(x.sum(axis=-1, keepdims=True, dtype=np.float32) / n)
    d = add_rounded(x, -mean, "floor")
    var = np.multiply(d, d, dtype=np.float32).sum(axis=-1, keepdims=True, dtype=np.float32) / n
    rstd = floor_bf16(np.float32(1.0) / np.sqrt(var + eps))
    y = mul_rounded(d, rstd, "floor")
    y *= w  # bf16*bf16: exact in FP32, widened into the bias add without a bf16 rounding
    return add_rounded(y, b, "floor")


def rope_rows(x, cos, sin):
    """FP32 products (exact), one FP32 add/sub, one bf16 rounding (aie::sub/add of two accumulators)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    out = np.empty(x.shape, np.float32)
    np.subtract(x1 * cos, x2 * sin, out=out[..., :half])
    np.add(x1 * sin, x2 * cos, out=out[..., half:])
    return floor_bf16(out, out=out)


def silu_mul_rows(g, u):
    """silu_and_mul.cc: tanh(g/2), 1 + tanh, 0.5*(.), g*sigmoid, *u - bf16, floor rounding."""
    half = np.float32(0.5)
    t = tanh_nlf(g * half)  # aie::tanh<bfloat16>(g/2); halving a bf16 is exact
    sig = add_rounded(t, np.float32(1.0), "floor")
    sig *= half  # 0.5 * (1 + tanh): exact
    return mul_rounded(mul_rounded(g, sig, "floor"), u, "floor")


def gelu_rows(x):
    """gelu.py (direct codegen): x*x, *x, *beta, +x, *sqrt(2/pi), tanh, +1, x/2, * - bf16, floor rounding,
    with the constants themselves bf16 (MLIR constants of bf16 type)."""
    beta = to_bf16(np.float32(GELU_BETA))
    s2opi = to_bf16(np.float32(GELU_SQRT_2_OVER_PI))
    x3 = mul_rounded(x, mul_rounded(x, x, "floor"), "floor")
    inner = add_rounded(x, mul_rounded(x3, beta, "floor"), "floor")
    t = tanh_nlf(mul_rounded(inner, s2opi, "floor"))
    return mul_rounded(x * np.float32(0.5), add_rounded(t, np.float32(1.0), "floor"), "floor")  # x/2 is exact
