"""mlir-air's harness inputs, references and `[precision]` statistics, reproduced line by line.

`harness_case(kernel, shape, contract) -> HarnessCase` builds exactly what the mlir-air harness script of
that kernel feeds the device and compares against (seed, distribution, scale, dtype casts, the reference
and its dtype); `precision_stats(out, ref, out_dtype)` computes the three statistics of the `[precision]`
line the way XRTRunner does. Together they let the emulator print the line NPU2 printed
(`benchmarks/bench_precision_lines.py`; `ledger kernel run KERNEL --inputs harness`).

Sources (Xilinx/mlir-air, the mirror's HEAD e972f29):
  GEMM  programming_examples/matrix_multiplication/bf16/run.py:59 `np.random.seed(42)` at import;
        :493-495 `scale = 1/sqrt(k)`, `(np.random.randn(m, k) * scale).astype(bfloat16)`, then the same for
        (k, n) - float64 draws cast straight to bf16, A before B; :505-507 the reference
        `(a.astype(f32) @ b.astype(f32)).astype(OUTPUT_DATATYPE)`, f32 out on aie2p (:316-322).
        bf16_in_bf16_out/run.py:25 and :1223-1226, bf16_in_fp32_out/run.py:25 and :1111-1116 are the same.
        The reference's float32 matmul is modelled as one sequential float32 accumulator per output, k in
        order: that reproduces `rel_err max` of all five NPU2 lines of PR #1841 to the printed digits, where
        the host BLAS's blocked orders (K panels of 128...1024, 2...16 interleaved accumulators) miss on
        three or more of the five (`rel_err max` sits on outputs with |ref| ~ 1e-8, where the reference's
        own float32 rounding is the leading term). An FMA accumulator gives the same five lines.
  eltwise add  programming_examples/eltwise_add/eltwise_add.py:223-225 `rng = default_rng(0)`,
        `standard_normal(shape, dtype=float32).astype(bf16)` for a then b; :231 ref `(a + b)` in f32 -> bf16.
  GELU  programming_examples/gelu/gelu.py:248-249 `default_rng(0)`, `standard_normal(n, float32)` -> bf16;
        :55-67 ref `0.5*x*(1 + tanh(c*(x + beta*x*x*x)))` in f32 -> bf16, c and beta from
        python/air/api/ops.py:415-416.
  SiLU-and-Mul  programming_examples/silu_and_mul/silu_and_mul.py:318-320 `default_rng(0)`, gate then up;
        :249-252 `x*(1/(1+exp(-x)))` in f32; :327-328 `(silu(gate) * up).astype(bf16)`.
Statistics: python/air/backend/xrt_runner.py:375-392 (`abs_err = |a - e|`, `rel_err = abs_err/(|e| +
  1e-30)`, `mean_rel_L1 = mean(abs_err)/(mean|e| + 1e-30)`, printed `%.3e`), over the full output; bf16
  outputs are upcast to float64 first (:412-415), float32 outputs stay float32 (numpy's float32 means).
Every other kernel raises `HarnessNotReproduced`: its script has not been transcribed yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ml_dtypes import bfloat16

GEMM_SEED = 42  # bf16/run.py:59 (and bf16_in_*_out/run.py:25)
ELEMENTWISE_SEED = 0  # eltwise_add.py:223, gelu.py:248, silu_and_mul.py:318
GELU_SQRT_2_OVER_PI = 0.7978845608  # python/air/api/ops.py:415
GELU_BETA = 0.044715  # python/air/api/ops.py:416
HARNESS_KERNELS = ("gemm", "eltwise_add", "gelu", "silu_mul")


class HarnessNotReproduced(KeyError):
    """Raised when a kernel's mlir-air harness inputs have not been transcribed; names the ones that are."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class HarnessCase:
    """The device inputs (float32 arrays holding bf16 values) and the harness's reference."""

    inputs: dict[str, np.ndarray]
    reference: np.ndarray  # float32, already cast to the output dtype
    out_dtype: str  # "bf16" | "f32"
    source: str


def _bf16(x: np.ndarray) -> np.ndarray:
    """numpy -> bfloat16 -> float32, the harness's `.astype(bfloat16)` (ml_dtypes, nearest even)."""
    return np.asarray(x).astype(bfloat16).astype(np.float32)


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


def _gemm(shape: dict, contract: str) -> HarnessCase:
    m, k, n = shape["M"], shape["K"], shape["N"]
    rs = np.random.RandomState(GEMM_SEED)  # the legacy global generator that np.random.seed(42) seeds
    scale = 1.0 / math.sqrt(k)
    a = _bf16(rs.randn(m, k) * scale)  # float64 draws, cast straight to bf16
    b = _bf16(rs.randn(k, n) * scale)
    ref = sequential_matmul_f32(a, b)
    out_dtype = "f32" if contract == "f32-out" else "bf16"
    if out_dtype == "bf16":
        ref = _bf16(ref)
    return HarnessCase({"a": a, "b": b}, ref, out_dtype, "matrix_multiplication/bf16/run.py:59,493-507")


def _elementwise_draws(n: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(ELEMENTWISE_SEED)
    return [_bf16(rng.standard_normal(n, dtype=np.float32)) for _ in range(count)]


def _eltwise_add(shape: dict, contract: str) -> HarnessCase:
    a, b = _elementwise_draws(shape["N"], 2)
    return HarnessCase({"a": a, "b": b}, _bf16(a + b), "bf16", "eltwise_add/eltwise_add.py:223-231")


def _gelu(shape: dict, contract: str) -> HarnessCase:
    (x,) = _elementwise_draws(shape["N"], 1)
    c, beta = np.float32(GELU_SQRT_2_OVER_PI), np.float32(GELU_BETA)
    ref = np.float32(0.5) * x * (np.float32(1.0) + np.tanh(c * (x + beta * x * x * x)))
    return HarnessCase({"x": x}, _bf16(ref), "bf16", "gelu/gelu.py:55-67,248-256")


def _silu_mul(shape: dict, contract: str) -> HarnessCase:
    g, u = _elementwise_draws(shape["N"], 2)
    silu = g * (np.float32(1.0) / (np.float32(1.0) + np.exp(-g)))
    return HarnessCase({"g": g, "u": u}, _bf16(silu * u), "bf16", "silu_and_mul/silu_and_mul.py:249-252,318-328")


_BUILDERS = {"gemm": _gemm, "eltwise_add": _eltwise_add, "gelu": _gelu, "silu_mul": _silu_mul}


def harness_case(kernel: str, shape: dict, contract: str | None = None) -> HarnessCase:
    """mlir-air's harness inputs and reference for `kernel` at `shape` (a normalised catalog shape)."""
    try:
        build = _BUILDERS[kernel]
    except KeyError:
        raise HarnessNotReproduced(
            f"{kernel}: mlir-air's harness inputs are not reproduced yet; --inputs harness works for "
            f"{', '.join(HARNESS_KERNELS)} (add a builder to kernels/harness_inputs.py, citing the script)"
        ) from None
    return build(shape, contract or "")


@dataclass(frozen=True)
class PrecisionStats:
    """The three statistics of an XRTRunner `[precision]` line."""

    mean_rel_L1: float
    rel_err_max: float
    abs_err_max: float

    def line(self) -> str:
        return f"{self.mean_rel_L1:.3e} | {self.rel_err_max:.3e} | {self.abs_err_max:.3e}"


def precision_stats(out, ref, out_dtype: str) -> PrecisionStats:
    """XRTRunner's statistics: float64 arithmetic for a bf16 output, float32 for an f32 one."""
    dt = np.float64 if out_dtype == "bf16" else np.float32
    o = np.asarray(out, np.float32).astype(dt).ravel()
    e = np.asarray(ref, np.float32).astype(dt).ravel()
    abs_err = np.abs(o - e)
    rel_err = abs_err / (np.abs(e) + dt(1e-30))
    mean_rel = abs_err.mean() / (np.abs(e).mean() + dt(1e-30))
    return PrecisionStats(float(mean_rel), float(rel_err.max()), float(abs_err.max()))


def significant_digits(printed: str) -> int:
    """How many significant digits a printed figure carries: "9.273e-03" -> 4, "0.00926" -> 3."""
    mant = printed.strip().lower().split("e")[0].lstrip("+-").replace(".", "")
    return max(1, len(mant.lstrip("0")))


def digits_agreeing(ours: float, printed: str) -> int:
    """How many leading significant digits of `printed` (e.g. "9.273e-03" or "0.00926") `ours` reproduces
    when rounded to as many digits; 0 when the first digit or the decade differs."""
    s = significant_digits(printed)
    mine, theirs = f"{abs(ours):.{s - 1}e}", f"{abs(float(printed)):.{s - 1}e}"
    (ma, ea), (mb, eb) = mine.split("e"), theirs.split("e")
    if ea != eb:
        return 0
    n = 0
    for x, y in zip(ma.replace(".", ""), mb.replace(".", "")):
        if x != y:
            break
        n += 1
    return n
