"""mlir-air's harness inputs, references and `[precision]` statistics, reproduced line by line.

`harness_case(kernel, shape, contract) -> HarnessCase` builds exactly what the mlir-air harness script of
that kernel feeds the device and compares against (seed, distribution, scale, dtype casts, the reference
and its dtype); `precision_stats(out, ref, out_dtype)` computes the three statistics of the `[precision]`
line the way XRTRunner does. Together they let the emulator print the line NPU2 printed
(`benchmarks/bench_precision_lines.py`; `ledger kernel run KERNEL --inputs harness`).

Sources (Xilinx/mlir-air, the mirror's HEAD e972f29):
  GEMM  programming_examples/matrix_multiplication/bf16/run.py:59 `np.random.seed(42)` at import;
        :493-495 `scale = 1/sqrt(k)`, `(np.random.randn(m, k) * scale).astype(bfloat16)`, then the same for
        (k, n) - float64 draws cast to bf16 via float32 (`_bf16`), A before B; :505-507 the reference
        `(a.astype(f32) @ b.astype(f32)).astype(OUTPUT_DATATYPE)`, f32 out on aie2p (:316-322).
        bf16_in_bf16_out/run.py:25 and :1223-1226, bf16_in_fp32_out/run.py:25 and :1111-1116 are the same.
        The reference's float32 matmul is modelled as one sequential float32 accumulator per output, k in
        order: that reproduces `rel_err max` of all five NPU2 lines of PR #1841 to the printed digits, where
        the host BLAS's blocked orders (K panels of 128...1024, 2...16 interleaved accumulators) miss on
        three or more of the five (`rel_err max` sits on outputs with |ref| ~ 1e-8, where the reference's
        own float32 rounding is the leading term). An FMA accumulator gives the same five lines.
  GELU  programming_examples/gelu/gelu.py:248-249 `default_rng(0)`, `standard_normal(n, float32)` -> bf16;
        :55-67 ref `0.5*x*(1 + tanh(c*(x + beta*x*x*x)))` in f32 -> bf16, c and beta from
        python/air/api/ops.py:415-416.
  SiLU-and-Mul  programming_examples/silu_and_mul/silu_and_mul.py:318-320 `default_rng(0)`, gate then up;
        :249-252 `x*(1/(1+exp(-x)))` in f32; :327-328 `(silu(gate) * up).astype(bf16)`.
  RMSNorm  programming_examples/weighted_rms_norm/weighted_rms_norm.py:388-390 `np.random.seed(0)`,
        `randn(M, N).astype(bf16)` then `randn(N)` (float64 draws, legacy generator); :325-329 ref
        `x/sqrt(mean(x**2) + eps)*w` in f32 -> bf16 with eps 1e-5 (:40).
  LayerNorm  programming_examples/layer_norm/layer_norm.py:336-339 `np.random.seed(0)`, x (M, N), weight
        (N), bias (N), float64 randn -> bf16; :273-280 the f32 reference (mean, mean of squared deviations,
        `1/sqrt(var + 1e-5)`, `* w + b`) -> bf16.
  GEMV  programming_examples/matrix_vector_multiplication/bf16/matvec.py:286-291 `np.random.seed(42)`,
        `(randn(M, K)*4).astype(bf16)`, `(randn(K)*4)`; ref `np.dot(A.f32, x.f32).astype(bf16)`.
  FlashAttention  programming_examples/flash_attention/kernel_fusion_based/attn_npu2.py:1439-1445
        `default_rng(42)`, `standard_normal((H, LQ, DK))` (float64) -> bf16 for Q, then K (Hkv, LK, DK), then
        V (Hkv, LK, DV); :1458-1473 the f32 reference per head (scores * 1/sqrt(dk), causal mask -1e9, and
        under `--window W` also the keys at or before p - W, :1466-1468; max-subtracted exp, normalise,
        P @ V) -> bf16 (npu_kernels.numerics.references.attention_reference is that computation). The precision
        line is the compile-and-run pass (`--perf-iters` 0 by default); a latency run is a separate invocation
        and changes no input.
  Q4NX dequant  programming_examples/llms/llama32_1b_q4nx/dequant_q4nx.py `__main__` (commit 0d63308, later
        than e972f29): `np.random.seed(0)`, codes `randint(0, 16, (N_out, K), uint8)`, scales
        `uniform(0.005, 0.02, (N_out, K/32))` then mins `uniform(-0.1, 0.1, ...)`, both `.astype(float32)`;
        `pack_weight` hands the kernel bf16 scales and mins, while the reference keeps the float32 ones:
        `(q * repeat(sc, 32) + repeat(mn, 32)).astype(bfloat16)`; `run_test(..., rtol=0.1, atol=0.05)`.
  The kernels of the registry (npu_kernels.numerics.kernels: eltwise_add, eltwise_mul, conv1d, ...): each module cites its own script.
Statistics: python/air/backend/xrt_runner.py:375-392 (`abs_err = |a - e|`, `rel_err = abs_err/(|e| +
  1e-30)`, `mean_rel_L1 = mean(abs_err)/(mean|e| + 1e-30)`, printed `%.3e`), over the full output; bf16
  outputs are upcast to float64 first (:412-415), float32 outputs stay float32 (numpy's float32 means).
Every kernel of the catalog has a builder; an unknown name raises `HarnessNotReproduced`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npu_kernels.numerics.kernels import definitions as kernel_definitions
from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.harness_case import ELEMENTWISE_SEED, HarnessCase  # noqa: F401 (HarnessCase: its API)
from npu_kernels.numerics.harness_case import harness_bf16 as _bf16  # noqa: F401 (its API: the harness bf16 rounding)
from npu_kernels.numerics.harness_case import sequential_matmul_f32  # noqa: F401 (its API: the GEMM harness reference)

NORM_SEED = 0  # weighted_rms_norm.py:388, layer_norm.py:336 (np.random.seed)
NORM_EPS = 1e-5  # weighted_rms_norm.py:40, layer_norm.py:52
# every kernel's builder: each registered kernel's `harness_case` (a kernel mlir-air has no harness for declares it Absent)
HARNESS_KERNELS = tuple(d.name for d in kernel_definitions() if d.harness_case)


class HarnessNotReproduced(KeyError):
    """Raised when a kernel's mlir-air harness inputs have not been transcribed; names the ones that are."""

    def __str__(self) -> str:
        return str(self.args[0])


def harness_case(kernel: str, shape: dict, contract: str | None = None, tile: dict | None = None) -> HarnessCase:
    """mlir-air's harness inputs and reference for `kernel` at `shape` (a normalised catalog shape); `tile`
    matters only where a harness flag changes the draw (a registry kernel's, e.g. conv1d's `pad`: `--zero-pad`)."""
    registered = kernel_definition(kernel)
    if registered is not None and registered.harness_case:  # (a kernel mlir-air has no harness for declares it Absent)
        return registered.harness_case(shape, contract or "", tile)
    raise HarnessNotReproduced(
        f"{kernel}: mlir-air's harness inputs are not reproduced yet; --inputs harness works for "
        f"{', '.join(HARNESS_KERNELS)} (add a builder to npu_kernels/numerics/harness_inputs.py, citing the script)"
    )


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
