"""The emulated NPU2 executor: a CPU model of the AIE2P datapath of every leaf kernel (numpy + ml_dtypes).

Every error this executor makes comes from modelling a step of the hardware datapath: number formats,
rounding modes, accumulation granularity and the approximations of the vector non-linear-function (NLF)
unit. Nothing is random. The model, with the evidence behind each choice (mlir-air sources and the NPU2
figures of its kernel registry; `benchmarks/bench_kernels.py` prints the comparison):

Rounding modes. The AIE core resets to round-toward-minus-infinity ("floor"). Kernels that call
  `aie::set_rounding(conv_even)` round to nearest-even: mm.cc (GEMM drain cast, f32_to_bf16_mn), mv.cc
  (GEMV) and attn_npu2.cc (built with -DROUND_CONV_EVEN). Every other kernel rounds each bf16 result
  toward -inf: the direct-codegen elementwise kernels (eltwise add, RMSNorm, LayerNorm, GELU), RoPE
  (rope_halfsplit.cc) and SiLU-and-Mul (silu_and_mul.cc) never set a mode. Evidence: eltwise add with
  floor reproduces all three NPU2 statistics (mean_rel_L1 1.88e-3 / rel max 7.8e-3 / abs max 3.1e-2 vs
  1.9e-3 / 7.8e-3 / 3.1e-2; RNE would give exactly 0); RoPE with fp32 products, one fp32 add and one
  floor rounding reproduces 2.81e-3 / 2.71e-3 / 2.42e-3 at 65536 / 32 / 8 rows (NPU2 2.8 / 2.7 / 2.4e-3).
  Toward -inf, not toward zero (chopping the low 16 bits of the IEEE word): on the published lines with
  mlir-air's harness inputs, chopping matches eltwise add and RoPE as well (their errors are symmetric) but
  no RMSNorm or LayerNorm line (RMSNorm 2048x2048 mean 7.53e-3 vs NPU2 4.2e-3; floor 4.22e-3) - 7 of the
  elementwise lines agree in every digit with chopping, 14 with floor (scripts/rounding_mode_experiment.py).
GEMM (MMA kernels). bf16 operands are cast to BFP16 (blocks of 8 along K, see kernels.bf16: a block
  whose maximum rounds to +128 moves up one exponent - with mlir-air's own harness inputs this reproduces
  all six NPU2 bf16->f32 `[precision]` lines of PR #1841 in all three statistics and the registry's
  three-digit drain rows; benchmarks/bench_precision_lines.py), products accumulate in FP32 (one float32
  BLAS matmul of the dequantised operands: BFP16 products are exact in FP32; the 8-deep block sums and
  the order over K tiles move no printed digit - the output agrees with a float64 accumulation to four
  digits in every statistic on those lines). Output per contract:
    f32-out        the FP32 accumulator.
    bf16-out-high  one final cast; `method` fused-cast (the default for M*K*N >= 4e9, like mlir-air's
                   `auto`) casts in a separate direct-codegen launch -> floor; drain casts in mm.cc's
                   f32_to_bf16_mn under conv_even -> RNE. Emulated 9.7e-3 (fused-cast) / 9.3e-3 (drain)
                   at 512^3, NPU2 9.7e-3 / 9.3e-3.
    bf16-out-low   direct codegen: the L1 C buffer is bf16. The transform script in mlir-air's
                   bf16_in_bf16_out/run.py (`hoist_cast_pair`) hoists the extf/truncf pair only out of the
                   innermost loop (the 8-deep MMA k loop inside one L1 tile), so the partial sum is rounded
                   to bf16 (nearest-even) once per **L1** K tile: K / tile_k_l1 roundings. The registry's
                   rows confirm that the error depends on K, not on K / tile_k_l2: 2048x2048x{2048,512,
                   11008} at tile_k_l2 512/256/128 (4/8/16 L2 tiles) all measure 1.3e-2. This model gives
                   1.02 / 1.13 / 1.28 / 1.53 / 1.94e-2 at K = 512 / 1024 / 2048 / 4096 / 8192 (NPU2 1.0 /
                   1.1 / 1.3 / 1.5 / 1.9e-2). Rounding once per L2 tile instead gives 9.6e-3 / 1.13e-2 at
                   4 / 32 tiles (too low), chopping gives 1.2e-2 / 5.2e-2 (too steep).
  A tile that breaks `N % (tile_n*herd_n)` (or the M / K rules) is not an error on the hardware: the launch
  grid floors the division and the columns (rows, K tail) it never covers are never written. They keep
  the output buffer's initial content, modelled as zeros.
GEMV (mv.cc, conv_even): FP32 accumulate of the exact bf16 products in mv.cc's own order, one RNE cast.
  mlir-air matrix_vector_multiplication/bf16/mv.cc:54-62 (r = 64, :81): one accumulator of 64 accfloat
  lanes per output row, lane l summing a[k]*b[k] for k = l, l+64, ... in order (`aie::mac` on 64 lanes:
  aie_api detail/aie2p/mul_acc32_fp.hpp:35-37, `mac_elem_64`), then `reduce_add` of the 64 floats. On
  aie2p (__AIE_ARCH__ 21) that reduction is aie_api detail/aie2/add_reduce.hpp:344-360: lanes i + (i+32),
  then i + (i+16), then shifts of 8, 4, 2, 1 - a halving tree; on aie2 (npu1, :281-300) the 16-lane
  quarters combine as (q0+q1) + (q2+q3) before the same 16-lane tree. With the harness's reference
  (numpy's float32 dot) this reproduces gemv-2048x2048 in all three statistics (1.6e-9 | 4.4e-3 |
  2.0e-3: one output, |ref| 0.438, one bf16 ULP) and keeps 512x2048 and 1024x1024 at 0; an FP32 sum in
  the reference's own order gives 0 | 0 | 0. Over the 37 rows of GEMV_bf16.md:90-128 (same harness) it
  matches 22 in every printed digit (the reference's order alone: 20, the lanes summed 0..63: 19). Orders
  with no source behind them score higher (the float64 dot: 24, FP32 lanes with an exact reduction: 25)
  but each misses a row this one matches in all three statistics (8192x2048, 3072x3072): no FP32 order
  tried explains every row; scripts/gemv_order_experiment.py prints them all.
RMSNorm / LayerNorm (direct codegen, floor; mlir-air weighted_rms_norm.py:135-198, layer_norm.py:156-207).
  The builders write each bf16 product `arith.mulf` to an L1 scratch and read it back before `arith.extf`
  (RMSNorm's x*x, LayerNorm's (x-mean)^2) or the bf16 bias `addf` (LayerNorm's *w). The hardware behaves
  as if that bf16 value were never formed: the product is widened straight into the FP32 accumulation
  (a bf16*bf16 product is exact in FP32). mlir-aie's `convert-vector-to-aievec` pipeline allows it: it
  first runs `RedundantLoadStoreOptimization` (vector::transferOpflowOpt, store-to-load forwarding: the
  scratch round-trip disappears; ConvertVectorToAIEVec.cpp `buildConvertVectorToAIEVec`), then the
  lowering drops a truncf whose only user is an extf and computes bf16 add/sub in FP32
  (VectorToAIEVecConversions.cpp `narrowValueWithWideningCheck`, `performBF16BinaryOpInF32`). Which of
  those fire on this IR is inferred, not traced; the numbers below are the evidence.
  A product feeding another bf16 product is rounded (floor), and so are the scalar `truncf`s of the FP32
  mean and rstd. RMSNorm: FP32 sum of exact squares, /N, rsqrt, floor(rstd), floor(x*rstd), floor(*w).
  LayerNorm: floor(mean), floor(x-mean), FP32 sum of its exact squares, floor(rstd), floor(d*rstd),
  *w exact into the FP32 bias add, one floor. With mlir-air's harness inputs this reproduces every
  printed digit of all five RMSNorm lines (e.g. 2048x2048 4.224e-3 | 2.27e-2 | 0.1875 vs NPU2 4.2e-3 |
  2.3e-2 | 1.9e-1 - the one line whose abs max is 3 ULP; the registry's 1536/2560/3072 rows as well) and
  the LayerNorm line (4.437e-3 | abs 0.1875 vs 4.4e-3 | 1.9e-1). Rounding the squares to bf16 instead
  (floor: 3.89e-3 at 2048x2048, every RMSNorm mean 8% low; nearest: 4.26e-3 / 4.38e-3 at 2048x2048 /
  2048x1024, two means off) or rounding LayerNorm's *w (4.75e-3, abs 0.25) misses; a nearest-rounded
  rstd (3.70e-3), an FP32 rstd (3.58e-3) or x*rstd*w in one rounding (3.60e-3) miss further at 2048x2048
  (scripts/norm_hypotheses.py). LayerNorm's mean is the same scalar truncf as rstd, hence floor; its one
  line does not by itself exclude a nearest mean (4.45e-3 with a nearest x-mean as well).
NLF unit. exp2: the AIE-ML v2 intrinsics guide documents that VEXP2 truncates its FP32 input to 11
  fractional bits and returns an approximation in bf16; the approximation modelled here is the cheapest
  bf16 construction (Mitchell) - the integer part becomes the exponent, the top 7 fractional bits the
  mantissa, i.e. 2^i * (1 + f) instead of 2^(i+f) (up to +6.1%). That is an inference, not documentation;
  it has no free parameter and reproduces the FlashAttention means of the registry (harness inputs,
  with aie::inv below): 512x512 12/6 and 64/8 non-causal 4.60e-2 / 4.58e-2 (NPU2 4.6e-2), 1024 12/12
  4.80e-2 (4.8e-2), 2048 32/8 causal 3.85e-2 with abs max 8.40e-2 (3.9e-2, 8.4e-2; 3.84e-2 with an exact
  reciprocal), head_dim 128 16/8 causal 3.79e-2 (3.8e-2), 16384 2/2 causal / non-causal 4.48e-2 /
  5.49e-2 (4.5e-2 / 5.5e-2; measured with the exact reciprocal, not re-run). tanh(x) = sign(x) * (1 - 2 / (1 + exp2(2 log2(e) |x|))) on that
  exp2, rounded to nearest bf16 (again an inference: the same unit): SiLU-and-Mul 1.05e-2 (NPU2 1.0e-2),
  GELU 7.9e-3 (8.4e-3). An exact exp2/tanh gives 1.6e-2 (FA) / 5.1e-3 (SiLU) / 6.8e-3 (GELU) instead.
  The hardware tanh is its own instruction (`__builtin_aie2p_tanh`, v16accfloat -> v16bfloat16: llvm-aie
  clang/lib/Headers/aie2p_nlf_vector.h; aie::tanh and math.tanh both reach it, aie_api
  detail/aie2p/elementary.hpp and mlir-aie PR #2909), documented in UG1639 only as "Hyperbolic tangent".
  Against mlir-air's own harness inputs (issue #17, GELU 65536 / 3145728, SiLU 16777216) no parameter-free
  alternative does better on all lines: exact tanh rounded to nearest / floor / toward zero, exp2 with the
  11-bit input truncation but an exact 2^z, and this construction on 2^(-2 log2e |x|) or with a floor /
  toward-zero output all leave GELU's or SiLU's mean further off, and every floored tanh doubles GELU's
  abs_err max (3.1e-2 vs NPU2's 1.562e-2, which a nearest rounding gives). What stays unexplained: GELU's
  mean 5.7% low, SiLU's 2.7% high, and SiLU's rel_err max (NPU2 0.411; 0.234 here, set by g = -5.97 - a
  0.411 needs a tanh off by ~1.5 bf16 ULP near |x| = 2.5) and abs_err max at N=655360 (0.125 vs 6.25e-2).
  Rounding of the bf16 chains around it is the core's crRnd: mlir-aie AIECoreToStandard sets floor for a
  core whose only narrowing ops are float SRS (mlir-aie PR #2912; its conv_even successor #3587 is not
  merged), which is every direct-codegen elementwise core and the core calling silu_and_mul.o.
SiLU-and-Mul (silu_and_mul.cc, floor): g/2, tanh, 1+t, 0.5*(.), g*sigmoid, *u - each rounded.
GELU (gelu.py, direct codegen, floor): x*x, *x, *beta, +x, *sqrt(2/pi), tanh, +1, 0.5*x, * - each rounded,
  the constants themselves bf16 (MLIR constants of bf16 type).
FlashAttention (attn_npu2.cc, conv_even): lkp = 64 keys per chunk, cascade of up to 4 stages over
  contiguous key ranges merged last-to-first, per chunk: S = bf16(Q.K^T) (BFP16 MMA; head_dim > 64 adds
  dk chunks into the bf16 S), running max, P = exp2((S - max) * bf16(log2(e)/sqrt(dk))), rescale
  r = exp2((old max - new max) * ...), O = bf16(bf16(O*r) + P.V) (BFP16 MMA), l = bf16(l*r + sum P);
  the final bf16(O * inv(l)). Running max, sum and O are carried in bf16 between chunks, like the kernel.
  inv is aie_api's software `aie::inv` for bf16 vectors (div_gp_sp, attn_npu2.cc:613; `inv_bf16`), not
  an exactly rounded reciprocal: it lands one bf16 ulp low on ~18% of inputs, which raises the means of
  the six FA `[precision]` lines by ~0.5% and matches the head_dim-128 means (4.36e-2 / 4.37e-2 vs NPU2
  4.4e-2; the exact reciprocal gave 4.34e-2 / 4.35e-2), keeping the others' digits. Dividing in FP32 or an
  unrounded FP32 reciprocal lower every mean instead (scripts/fa_hypotheses.py prints all candidates).
  Still unexplained: four abs_err maxima 1-3 bf16 ulp low (e.g. 512 12/6: 3.52e-2 vs 3.9e-2), set by
  single outputs; no parameter-free step tried moves them without losing means (sum_g's lane order
  changes no output; VEXP2 variants of the input truncation / mantissa rounding lose means).
  Vectorised over heads and query rows; a chunk whose keys are all masked for a row is skipped for that
  row, which the kernel's arithmetic makes an exact identity.

`npu1` (AIE2) has a native bf16 MMA: the MMA kernels skip the BFP16 step; everything else is modelled as
on NPU2 (NUMERICS has no NPU1 measurements to check it against).

Speed: operands are quantised once per call (weights once per `static_key`), then one float32 BLAS call;
elementwise kernels and the activation quantisation split their rows over `threads` (default 2) Python
threads, flash attention its cascade stages - numpy releases the GIL, and the split never changes a bit.
"""

from __future__ import annotations

# The version of the emulated NPU2 numerics above: bump it whenever a datapath step changes what a kernel returns,
# so `ledger reverify` re-runs the Phase 1 rows measured on the previous model (kernels.toolchain).
EMULATED_NUMERICS_VERSION = "emulated-npu2/4"

import math
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from kernels.bf16 import bfp16_quantize, f32, floor_bf16, rne_bf16_, to_bf16
from kernels.executors.base import Executor

TARGETS = ("npu2", "npu1")
GEMM_CONTRACTS = ("f32-out", "bf16-out-high", "bf16-out-low")
GEMM_DEFAULT_TILE = {"tile_m": 64, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 128, "herd_m": 8, "herd_n": 4}
FUSED_CAST_MIN_MKN = 4e9  # mlir-air run.py `--method auto`: fused-cast for M*K*N >= 4e9, else drain

EXP2_INPUT_FRAC_BITS = 11  # VEXP2: "11 fractional bits ... the remaining bits are truncated"
BF16_MANTISSA_BITS = 7
LOG2E = 1.4426950408889634
_TWO_LOG2E = np.float32(2.0 * LOG2E)
_BF16_LOWEST = np.float32(-3.3895313892515355e38)  # 0xff7f: the kernel's running-max floor
_EXP2_ARG_LIMIT = np.float32(200.0)  # 2**±200 is 0 / inf in bf16: keeps the fixed-point conversion in range

FA_LKP = 64  # keys per chunk (= the MMA k depth of P.V), lkp in mlir-air
FA_CASCADE_STAGES = 4  # num_cascade_stages: the key range splits over the array's 4 rows
GELU_SQRT_2_OVER_PI = 0.7978845608
GELU_BETA = 0.044715


# --- the NLF unit ----------------------------------------------------------------------------------------


def exp2_nlf(z, nonpositive: bool = False) -> np.ndarray:
    """2**z as the AIE2P VEXP2 unit computes it (bf16 result as float32).

    The FP32 input is truncated toward zero to 11 fractional bits; the bf16 result takes the integer part
    (floor) as its exponent and the next 7 fractional bits as its mantissa: 2**i * (1 + f). Results below
    the bf16 normal range flush to 0; above it they are inf; NaN stays NaN. `nonpositive=True` promises
    z <= 0 or NaN (softmax arguments) and skips the upper clamp.
    """
    z = np.asarray(z, dtype=np.float32)
    t = np.maximum(z, -_EXP2_ARG_LIMIT)  # NaN propagates
    if not nonpositive:
        np.minimum(t, _EXP2_ARG_LIMIT, out=t)
    t *= np.float32(2**EXP2_INPUT_FRAC_BITS)
    with np.errstate(invalid="ignore"):  # NaN: restored below
        fixed = t.astype(np.int32)  # truncation toward zero: 11 fractional bits
    fixed >>= EXP2_INPUT_FRAC_BITS - BF16_MANTISSA_BITS  # arithmetic shift = floor: 7 fractional bits
    fixed += 127 << BF16_MANTISSA_BITS  # exponent bias; bf16 bits = (exponent << 7) | mantissa
    if not nonpositive:
        np.minimum(fixed, 255 << BF16_MANTISSA_BITS, out=fixed)  # 0x7f80 = inf
    np.copyto(fixed, 0, where=fixed < (1 << BF16_MANTISSA_BITS))  # underflow and subnormals flush to 0
    fixed <<= 16
    out = fixed.view(np.float32)
    nan = np.isnan(z)
    if nan.any():
        out[nan] = np.nan
    return out


def tanh_nlf(x) -> np.ndarray:
    """tanh as the NLF unit computes it: sign(x) * (1 - 2 / (1 + exp2_nlf(2 log2(e) |x|))), nearest bf16."""
    x = np.asarray(x, dtype=np.float32)
    e = exp2_nlf(np.abs(x) * _TWO_LOG2E)
    e += np.float32(1.0)
    y = np.float32(2.0) / e
    np.subtract(np.float32(1.0), y, out=y)
    np.copysign(y, x, out=y)
    return to_bf16(y)


# --- helpers ---------------------------------------------------------------------------------------------


def _rowmax(x: np.ndarray) -> np.ndarray:
    """max over the last axis by halving (faster than numpy's reduction over a short contiguous axis)."""
    while x.shape[-1] > 1 and x.shape[-1] % 2 == 0:
        h = x.shape[-1] // 2
        x = np.maximum(x[..., :h], x[..., h:])
    return x.max(axis=-1)


def _round(x: np.ndarray, mode: str) -> np.ndarray:
    """Round a float32 temporary to bf16 in place (`x` must be owned by the caller)."""
    return floor_bf16(x, out=x) if mode == "floor" else rne_bf16_(x)


def _mul(a, b, mode: str) -> np.ndarray:
    return _round(np.multiply(a, b, dtype=np.float32), mode)


def _add(a, b, mode: str) -> np.ndarray:
    return _round(np.add(a, b, dtype=np.float32), mode)


def _covered(n: int, step: int) -> int:
    """How much of an axis of length n a launch grid of floor(n / step) steps covers."""
    return (n // step) * step if step > 0 else n


def _k_used(K: int, tile: dict) -> np.ndarray | None:
    """Indices of K the L2/L1 loops reach for a (possibly illegal) tile; None when all of K is reached."""
    tk2, tk1 = int(tile["tile_k_l2"]), int(tile["tile_k_l1"])
    n_l2 = K // tk2 if tk2 > 0 else 0
    per_l2 = (tk2 // tk1) * tk1 if tk1 > 0 else 0
    if n_l2 * tk2 == K and per_l2 == tk2:
        return None
    return np.concatenate([np.arange(i * tk2, i * tk2 + per_l2) for i in range(n_l2)] or [np.zeros(0, int)])


_PARALLEL_MIN_ELEMENTS = 1 << 18  # below this, threads cost more than they save


def _rmsnorm(x, w, eps):
    """x*x kept in FP32 (exact), FP32 sum and mean, FP32 rsqrt floored to bf16, x*rstd and *w floored."""
    sq = np.multiply(x, x, dtype=np.float32)  # bf16*bf16 is exact in FP32; widened without a bf16 rounding
    ms = sq.sum(axis=-1, keepdims=True, dtype=np.float32) / np.float32(x.shape[-1])  # FP32 reduction
    rstd = floor_bf16(np.float32(1.0) / np.sqrt(ms + eps))  # FP32 rsqrt, bf16 scalar
    return _mul(_mul(x, rstd, "floor"), w, "floor")


def _layernorm(x, w, b, eps):
    """FP32 mean floored to bf16, bf16 x-mean, its square kept in FP32, FP32 variance, rstd floored to
    bf16, (x-mean)*rstd floored, *w kept in FP32 into the bias add, one floor rounding at the end."""
    n = np.float32(x.shape[-1])
    mean = floor_bf16(x.sum(axis=-1, keepdims=True, dtype=np.float32) / n)
    d = _add(x, -mean, "floor")
    var = np.multiply(d, d, dtype=np.float32).sum(axis=-1, keepdims=True, dtype=np.float32) / n
    rstd = floor_bf16(np.float32(1.0) / np.sqrt(var + eps))
    y = _mul(d, rstd, "floor")
    y *= w  # bf16*bf16: exact in FP32, widened into the bias add without a bf16 rounding
    return _add(y, b, "floor")


def _rope(x, cos, sin):
    """FP32 products (exact), one FP32 add/sub, one bf16 rounding (aie::sub/add of two accumulators)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    out = np.empty(x.shape, np.float32)
    np.subtract(x1 * cos, x2 * sin, out=out[..., :half])
    np.add(x1 * sin, x2 * cos, out=out[..., half:])
    return floor_bf16(out, out=out)


def _silu_mul(g, u):
    """silu_and_mul.cc: tanh(g/2), 1 + tanh, 0.5*(.), g*sigmoid, *u - bf16, floor rounding."""
    half = np.float32(0.5)
    t = tanh_nlf(g * half)  # aie::tanh<bfloat16>(g/2); halving a bf16 is exact
    sig = _add(t, np.float32(1.0), "floor")
    sig *= half  # 0.5 * (1 + tanh): exact
    return _mul(_mul(g, sig, "floor"), u, "floor")


def _gelu(x):
    """gelu.py (direct codegen): x*x, *x, *beta, +x, *sqrt(2/pi), tanh, +1, x/2, * - bf16, floor rounding,
    with the constants themselves bf16 (MLIR constants of bf16 type)."""
    beta = to_bf16(np.float32(GELU_BETA))
    s2opi = to_bf16(np.float32(GELU_SQRT_2_OVER_PI))
    x3 = _mul(x, _mul(x, x, "floor"), "floor")
    inner = _add(x, _mul(x3, beta, "floor"), "floor")
    t = tanh_nlf(_mul(inner, s2opi, "floor"))
    return _mul(x * np.float32(0.5), _add(t, np.float32(1.0), "floor"), "floor")  # x/2 is exact


MV_LANES = 64  # mv.cc:81 `matvec_vectorized<64>`: 64 accfloat lanes per row


def mv_lane_sum(a: np.ndarray, x: np.ndarray, target: str = "npu2") -> np.ndarray:
    """sum_k a[m, k] * x[k] in float32 in mv.cc's order (see the module docstring, GEMV): 64 lane
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


class EmulatedExecutor(Executor):
    """NPU2 (or NPU1) leaf kernels on the CPU, modelled step by step; see the module docstring."""

    name = "emulated"

    def __init__(self, target: str = "npu2", *, threads: int | None = None, gemv_order: str = "mv.cc") -> None:
        """`gemv_order` "mv.cc" sums a GEMV in the kernel's own lane order (`mv_lane_sum`); "blas" sums it in
        this host's BLAS order, 10x faster and equal but for an output whose FP32 sum sits on a bf16 rounding
        boundary (gemv-2048x2048: 1 output of 2048 moves one ulp). The model pipeline asks for "blas"
        (`kernels.model.backend`); kernel runs, the registry and the precision lines use "mv.cc"."""
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
        if gemv_order not in ("mv.cc", "blas"):
            raise ValueError(f"unknown gemv_order {gemv_order!r}; expected mv.cc or blas")
        self.gemv_order = gemv_order
        super().__init__(target)
        self.bfp16 = target == "npu2"
        self.threads = threads if threads is not None else _default_threads()
        self._weights: dict[tuple, tuple[tuple[int, ...], np.ndarray]] = {}

    def describe(self) -> dict:
        return {
            "executor": self.name,
            "target": self.target,
            "mma_operands": "bfp16 (8 along K, 8-bit mantissa, RNE, +128 bumps the block exponent)" if self.bfp16 else "bf16 (native MMA)",
            "rounding": "conv_even in mm.cc/mv.cc/attn_npu2.cc, floor (AIE default) elsewhere",
            "gemv_order": self.gemv_order,
            "nlf": f"exp2: input truncated to {EXP2_INPUT_FRAC_BITS} fraction bits, 2^i*(1+f) bf16; "
            "tanh = 1 - 2/(1+exp2(2 log2e |x|))",
        }

    def clear_cache(self) -> None:
        self._weights.clear()

    # --- weight residency --------------------------------------------------------------------------------

    def _static(self, kind: str, arr, static_key, make) -> np.ndarray:
        """`make(arr)` cached under (kind, static_key); the cached form never differs from a fresh one."""
        if static_key is None:
            return make(arr)
        key = (kind, static_key)
        shape = tuple(np.shape(arr))
        hit = self._weights.get(key)
        if hit is not None:
            if hit[0] != shape:
                raise ValueError(f"static_key {static_key!r} was cached with shape {hit[0]}, now given {shape}")
            return hit[1]
        value = make(arr)
        self._weights[key] = (shape, value)
        return value

    def _mma_operand(self, x, axis: int) -> np.ndarray:
        """An MMA operand as the matrix unit sees it: BFP16 blocks along the reduction axis (NPU2)."""
        return bfp16_quantize(x, axis=axis) if self.bfp16 else f32(x)

    # --- GEMM / GEMV -------------------------------------------------------------------------------------

    def gemm(self, a, b, *, contract: str = "bf16-out-high", tile=None, static_key=None):
        if contract not in GEMM_CONTRACTS:
            raise ValueError(f"unknown gemm contract {contract!r}; expected one of {', '.join(GEMM_CONTRACTS)}")
        with self.timer.time("gemm"):
            a = f32(a)
            M, K = a.shape
            if np.shape(b)[0] != K:
                raise ValueError(f"gemm: a is {a.shape} but b is {np.shape(b)}")
            N = np.shape(b)[1]
            t = {**self._gemm_default_tile(M, K, N), **(tile or {})} if tile else GEMM_DEFAULT_TILE
            qb = self._static("gemm.b", b, static_key, lambda w: self._mma_operand(w, 0))
            qa = self._rows(lambda x: self._mma_operand(x, 1), [a]) if self.bfp16 else a  # blocks along K
            if tile is not None:
                used = _k_used(K, t)
                if used is not None:  # an illegal K tiling: the loops never reach part of K
                    qa, qb = qa[:, used], qb[used]
            if contract == "bf16-out-low":
                c = self._accumulate_bf16(qa, qb, int(t["tile_k_l1"]))
            else:
                c = np.matmul(qa, qb)
                if contract == "bf16-out-high":
                    c = _round(c, "floor" if self._gemm_method(t, M, K, N) == "fused-cast" else "rne")
            if tile is not None:  # the launch grid floors M/(tile_m*herd_m) and N/(tile_n*herd_n)
                rows = _covered(M, int(t["tile_m"]) * int(t["herd_m"]))
                cols = _covered(N, int(t["tile_n"]) * int(t["herd_n"]))
                c[rows:, :] = 0.0
                c[:, cols:] = 0.0
            return c

    def _gemm_default_tile(self, M: int, K: int, N: int) -> dict:
        """The planner's tile for this shape: fills the keys a partial user tile leaves out."""
        from kernels.tiles import default_tile

        return default_tile("gemm", {"M": M, "K": K, "N": N}, self.target)

    @staticmethod
    def _gemm_method(t: dict, M: int, K: int, N: int) -> str:
        method = t.get("method") or "auto"
        if method == "auto":
            return "fused-cast" if M * K * N >= FUSED_CAST_MIN_MKN else "drain"
        if method not in ("fused-cast", "drain"):
            raise ValueError(f"unknown gemm method {method!r} (auto | fused-cast | drain)")
        return method

    @staticmethod
    def _accumulate_bf16(qa: np.ndarray, qb: np.ndarray, tile_k_l1: int) -> np.ndarray:
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

    def gemv(self, a, x, *, static_key=None):
        with self.timer.time("gemv"):
            A = self._static("gemv.a", a, static_key, f32)
            if self.gemv_order == "blas":
                return to_bf16(A @ f32(x))
            return to_bf16(mv_lane_sum(A, f32(x), self.target))

    # --- row-parallel kernels (each row / element independent) ---------------------------------------

    def _rows(self, fn, split: list, *shared):
        """fn(*split, *shared) on up to `threads` slices of the leading axis of every `split` array, in
        parallel (bit-identical: these kernels treat rows independently)."""
        split = [f32(a) for a in split]
        n = split[0].shape[0] if split[0].ndim else 0
        if self.threads <= 1 or n < 2 or split[0].size < _PARALLEL_MIN_ELEMENTS:
            return fn(*split, *shared)
        parts = min(self.threads, n)
        bounds = [n * i // parts for i in range(parts + 1)]
        results: list = [None] * parts

        def job(i):
            lo, hi = bounds[i], bounds[i + 1]
            results[i] = fn(*[a[lo:hi] for a in split], *shared)

        _run_parallel([lambda i=i: job(i) for i in range(parts)], parts)
        return np.concatenate(results, axis=0)

    # --- normalisations ----------------------------------------------------------------------------------

    def rmsnorm(self, x, w, eps: float = 1e-6):
        with self.timer.time("rmsnorm"):
            return self._rows(_rmsnorm, [x], f32(w), np.float32(eps))

    def layernorm(self, x, w, b, eps: float = 1e-5):
        with self.timer.time("layernorm"):
            return self._rows(_layernorm, [x], f32(w), f32(b), np.float32(eps))

    # --- elementwise -------------------------------------------------------------------------------------

    def rope(self, x, cos, sin):
        with self.timer.time("rope"):
            cos, sin = f32(cos), f32(sin)
            if np.shape(cos)[0] != np.shape(x)[0] or np.ndim(x) != np.ndim(cos):
                return _rope(f32(x), cos, sin)  # broadcast tables: no row split
            return self._rows(_rope, [x, cos, sin])

    def eltwise_add(self, a, b):
        with self.timer.time("eltwise_add"):
            if np.shape(a) != np.shape(b):
                return _add(f32(a), f32(b), "floor")
            return self._rows(lambda x, y: _add(x, y, "floor"), [a, b])

    def silu_mul(self, g, u):
        with self.timer.time("silu_mul"):
            if np.shape(g) != np.shape(u):
                return _silu_mul(f32(g), f32(u))
            return self._rows(_silu_mul, [g, u])

    def gelu(self, x):
        with self.timer.time("gelu"):
            return self._rows(_gelu, [x])

    # --- attention ---------------------------------------------------------------------------------------

    def flash_attention(self, q, k, v, *, causal: bool = True, q_offset: int = 0):
        with self.timer.time("flash_attention"):
            return self._flash_attention(f32(q), f32(k), f32(v), bool(causal), int(q_offset))

    def _flash_attention(self, q, k, v, causal: bool, q_offset: int) -> np.ndarray:
        hq, lq, dk = q.shape  # (Hq, Lq, Dk)
        hkv, lk, _ = k.shape  # (Hkv, Lk, Dk)
        dv = v.shape[2]
        if hq % hkv:
            raise ValueError(f"flash_attention: {hq} query heads do not group over {hkv} kv heads")
        group = hq // hkv
        n_chunks = max(1, -(-lk // FA_LKP))
        stages = min(FA_CASCADE_STAGES, n_chunks)
        per_stage = -(-n_chunks // stages)
        fa = _FlashState(
            # rows of a kv head's query group side by side: (Hkv, Lq, G, Dk), BFP16 blocks along Dk
            q=np.ascontiguousarray(self._mma_operand(q, 2).reshape(hkv, group, lq, dk).transpose(0, 2, 1, 3)),
            kt=np.ascontiguousarray(np.swapaxes(self._mma_operand(k, 2), 1, 2)),  # (Hkv, Dk, Lk)
            v=self._mma_operand(v, 1),  # (Hkv, Lk, Dv), blocks along the keys
            l2e=to_bf16(np.float32(LOG2E / math.sqrt(dk))),  # log2(e)/sqrt(dk) as a bf16 vector constant
            causal=causal,
            q_offset=q_offset,
            bfp16=self.bfp16,
            up=np.full((stages, hkv, lq, group), _BF16_LOWEST, np.float32),  # running max (bf16 lowest)
            sp=np.zeros((stages, hkv, lq, group), np.float32),  # running denominator
            gp=np.zeros((stages, hkv, lq, group, dv), np.float32),  # running output
        )
        work = [
            (s, range(s * per_stage, min(n_chunks, (s + 1) * per_stage))) for s in range(stages)
        ]
        # a decode step (one query row) is too little work to pay for a thread pool
        threads = self.threads if hq * lq * lk >= _PARALLEL_MIN_ELEMENTS else 1
        _run_parallel([lambda s=s, chunks=chunks: fa.run_stage(s, chunks) for s, chunks in work], threads)
        out = fa.merge(stages)  # (Hkv, Lq, G, Dv)
        return np.ascontiguousarray(out.transpose(0, 2, 1, 3)).reshape(hq, lq, dv)


class _FlashState:
    """One flash_attention call: quantised operands and the per-cascade-stage online-softmax state."""

    def __init__(self, **kw) -> None:
        self.__dict__.update(kw)

    def run_stage(self, s: int, chunks: range) -> None:
        """The K chunks of cascade stage s, in order (one stage is one row of AIE tiles)."""
        hkv, lq, group, dk = self.q.shape
        lk = self.kt.shape[2]
        qpos = self.q_offset + np.arange(lq)
        with single_threaded_blas():
            for j in chunks:
                k0, k1 = j * FA_LKP, min(lk, (j + 1) * FA_LKP)
                # rows that see at least one key of this chunk (earlier rows skip it: an exact identity)
                r0 = min(lq, max(0, k0 - self.q_offset)) if self.causal else 0
                if r0 >= lq:
                    continue
                rows = lq - r0
                qs = self.q[:, r0:].reshape(hkv, rows * group, dk)
                g = None  # bf16 scores (Hkv, R*G, w), accumulated over dk chunks
                for d0 in range(0, dk, FA_LKP):
                    part = np.matmul(qs[:, :, d0 : d0 + FA_LKP], self.kt[:, d0 : d0 + FA_LKP, k0:k1])
                    g = rne_bf16_(part) if g is None else rne_bf16_(np.add(g, part, out=g))
                g = g.reshape(hkv, rows, group, k1 - k0)
                if self.causal:
                    band = min(rows, max(0, k1 - 1 - self.q_offset - r0))  # rows that still see a future key
                    if band > 0:
                        future = np.arange(k0, k1)[None, :] > qpos[r0 : r0 + band, None]  # (band, w)
                        np.copyto(g[:, :band], -np.inf, where=future[:, None, :])
                self._chunk(g, self.v[:, k0:k1], self.up[s, :, r0:], self.sp[s, :, r0:], self.gp[s, :, r0:])

    def _chunk(self, g, v_chunk, up, sp, gp) -> None:
        """Online softmax over one chunk: g (Hkv, R, G, w) bf16 scores; up/sp (Hkv, R, G), gp (.., Dv)."""
        hkv, rows, group, w = g.shape
        m = _rowmax(g)
        np.maximum(m, _BF16_LOWEST, out=m)
        u = np.maximum(up, m)  # the new running max
        d = rne_bf16_(np.subtract(g, u[..., None], out=g))  # bf16 (G - max); masked keys stay -inf
        d *= self.l2e  # exact: bf16 x bf16 in FP32
        p = exp2_nlf(d, nonpositive=True)  # bf16 probabilities
        rowsum = _fa_rowsum(p)  # FP32 reduce, bf16 store
        r = exp2_nlf(_add(up, -u, "rne") * self.l2e, nonpositive=True)  # rescale of the carried state
        gp *= r[..., None]
        rne_bf16_(gp)
        pq = bfp16_quantize(p, axis=3, nonneg=True) if self.bfp16 else p
        pv = np.matmul(pq.reshape(hkv, rows * group, w), v_chunk)  # (Hkv, R*G, Dv)
        gp += pv.reshape(gp.shape)
        rne_bf16_(gp)
        sp[...] = _add(sp * r, rowsum, "rne")
        up[...] = u

    def merge(self, stages: int) -> np.ndarray:
        """Cascade merge, last stage first, in the kernel's order; then O * inv(l) (aie::inv)."""
        u_c, s_c, o_c = self.up[stages - 1], self.sp[stages - 1], self.gp[stages - 1]
        for s in range(stages - 2, -1, -1):
            u = np.maximum(u_c, self.up[s])
            rc = exp2_nlf(_add(u_c, -u, "rne") * self.l2e, nonpositive=True)
            rl = exp2_nlf(_add(self.up[s], -u, "rne") * self.l2e, nonpositive=True)
            o_c = _add(_mul(self.gp[s], rl[..., None], "rne"), _mul(o_c, rc[..., None], "rne"), "rne")
            s_c = _add(self.sp[s] * rl, _mul(s_c, rc, "rne"), "rne")
            u_c = u
        inv = _fa_inv(s_c)  # aie::inv
        return _mul(o_c, inv[..., None], "rne")


def _fa_rowsum(p: np.ndarray) -> np.ndarray:
    """sum_g: the FP32 sum of a chunk's bf16 probabilities over the keys, stored as bf16."""
    return to_bf16(p.sum(axis=-1, dtype=np.float32))


_INV_MAGIC = 0x7EB5  # aie_api aie2p bf16 inv: the seed's integer subtrahend
_INV_K1 = to_bf16(np.float32(1.9395974))  # its polynomial step's constants (a bf16 and an accfloat)
_INV_K2 = np.float32(1.436142)


def inv_bf16(v) -> np.ndarray:
    """1/v as aie_api's `aie::inv` computes it for a bf16 vector on aie2p (bf16 result as float32).

    aie_api detail/aie2p/elementary.hpp:196-273 (`ElementaryOp::Inv`, 16-bit bfloat16): no hardware
    reciprocal but a software sequence, every product exact in the FP32 accumulator and every
    `to_vector<bfloat16>` rounded in the core's mode (conv_even in attn_npu2.cc): the seed
    y0 = bits(0x7eb5 - bits(v)) (an int16 subtraction), y = bf16(K1 * bf16(y0 * bf16(K2 - v * y0))),
    one Newton step r = bf16(2 - y * v), result bf16(y * r). Within 1 bf16 ulp of the exact reciprocal;
    on positive normal inputs 18% of the results lie one ulp below it and 5% one ulp above.
    """
    shape = np.shape(v)
    v = np.atleast_1d(np.asarray(v, dtype=np.float32))  # arrays throughout: rne_bf16_ rounds in place
    bits = (v.view(np.uint32) >> np.uint32(16)).astype(np.int32)
    y0 = (((_INV_MAGIC - bits) & 0xFFFF).astype(np.uint32) << np.uint32(16)).view(np.float32)
    t = rne_bf16_(_INV_K2 - v * y0)  # negmul_elem, add k2
    t = rne_bf16_(t * y0)  # mul_elem
    y = rne_bf16_(t * _INV_K1)  # negmul_elem by K1 (the kernel holds -y; the sign is exact)
    r = rne_bf16_(np.float32(2.0) - y * v)  # mac_elem: the Newton residual
    return rne_bf16_(y * r).reshape(shape)


def _fa_inv(s: np.ndarray) -> np.ndarray:
    """div_gp_sp's 1/l (attn_npu2.cc:613, `aie::inv` of the bf16 sums)."""
    return inv_bf16(s)


# --- threads ---------------------------------------------------------------------------------------------


def _openblas_local_threads():
    """numpy's OpenBLAS `openblas_set_num_threads_local` (a per-thread setting), or None when absent."""
    import ctypes
    import glob
    import os

    here = os.path.dirname(np.__file__)
    for lib in glob.glob(os.path.join(here, os.pardir, "numpy.libs", "*openblas*")):
        try:
            fn = ctypes.CDLL(lib).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        return fn
    return None


_SET_LOCAL_THREADS = _openblas_local_threads()


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run this thread's BLAS calls single-threaded (no effect on other threads).

    The attention matmuls are small (64-wide); OpenBLAS's own threads only add wake-up stalls there, and
    stall badly when the cores are shared. The executor parallelises over cascade stages instead.
    """
    if _SET_LOCAL_THREADS is None:
        yield
        return
    old = _SET_LOCAL_THREADS(1)
    try:
        yield
    finally:
        _SET_LOCAL_THREADS(old)


def _default_threads() -> int:
    import os

    return max(1, min(2, os.cpu_count() or 1))


def _run_parallel(jobs: list, threads: int) -> None:
    """Run independent jobs (numpy releases the GIL in its loops) on up to `threads` threads."""
    if threads <= 1 or len(jobs) <= 1:
        for job in jobs:
            job()
        return
    from concurrent.futures import ThreadPoolExecutor

    # pair heavy with light jobs: causal stages shrink with their first key, so deal them out 0, n-1, 1, ...
    order = [jobs[i // 2] if i % 2 == 0 else jobs[-(i // 2) - 1] for i in range(len(jobs))]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for f in [pool.submit(job) for job in order]:
            f.result()
