"""What an mlir-air harness feeds the device and checks against (`HarnessCase`), and the draws several harness
scripts share: the harness's bf16 cast (`harness_bf16`) and the elementwise scripts' `default_rng(0)` draws. The
builders are `npu_kernels.numerics.harness_inputs` and the kernel modules of `npu_kernels.numerics.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16

ELEMENTWISE_SEED = 0  # eltwise_add.py:223, gelu.py:248, silu_and_mul.py:318, rope_halfsplit.py:282


@dataclass(frozen=True)
class HarnessCase:
    """The device inputs (float32 arrays holding bf16 values) and the harness's reference."""

    inputs: dict[str, np.ndarray]
    reference: np.ndarray  # float32, already cast to the output dtype
    out_dtype: str  # "bf16" | "f32"
    source: str


def harness_bf16(x: np.ndarray) -> np.ndarray:
    """The harness's `.astype(bfloat16)` as NPU2's lines were measured with it; returns float32.

    A float64 draw goes to float32 first, then to bf16, both nearest-even (double rounding): the cast of
    every ml_dtypes before 0.7 (jax-ml/ml_dtypes v0.5.4 `ml_dtypes/_src/custom_float.h:625-634`, v0.6.0
    :633-642: `NPyCast` converts through `CastToFloat`, a `static_cast<float>`), which is what mlir-air's
    unpinned `ml_dtypes` (utils/requirements.txt:2) installed when the lines were measured (the registry
    JSON's `"measured": "2026-06"`, PR #1841's comment 2026-08-20; ml_dtypes 0.7.0 is of 2026-11-16).
    0.7.0 rounds float64 to bf16 once (its changelog: "Fixed double rounding when converting ... from
    float64" (#401); `include/float8.h` `RoundToOddFloat`, round-to-odd narrowing to float): about one
    draw in 130,000 lands on a bf16 tie after the float32 step and comes out one bf16 ulp apart, which
    moves the drain lines of 64x720x32 and 64x720x2048 in their third digit. The float32 step is explicit
    here (`npu_kernels.numerics.bf16.to_bf16`), so the inputs are the same under any ml_dtypes.
    """
    return to_bf16(np.asarray(x, dtype=np.float32))


def elementwise_draws(n: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(ELEMENTWISE_SEED)
    return [harness_bf16(rng.standard_normal(n, dtype=np.float32)) for _ in range(count)]


def sequential_matmul_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with one float32 accumulator per output, k = 0, 1, ... in order (the harness reference)."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    prod = np.empty_like(c)
    for k in range(a.shape[1]):
        np.multiply(a[:, k : k + 1], b[k : k + 1, :], out=prod)  # (M, 1) * (1, N): float32 products
        c += prod
    return c
