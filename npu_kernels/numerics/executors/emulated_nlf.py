"""The AIE2P vector non-linear-function (NLF) unit and aie_api's software bf16 reciprocal, as the emulated
executor models them: `exp2_nlf` (VEXP2), `tanh_nlf` (on that exp2) and `inv_bf16` (`aie::inv`). The
evidence for each step: docs/emulated_numerics.md (NLF unit, FlashAttention).
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import rne_bf16_, to_bf16

EXP2_INPUT_FRAC_BITS = 11  # VEXP2: "11 fractional bits ... the remaining bits are truncated"
BF16_MANTISSA_BITS = 7
LOG2E = 1.4426950408889634
_TWO_LOG2E = np.float32(2.0 * LOG2E)
_EXP2_ARG_LIMIT = np.float32(200.0)  # 2**±200 is 0 / inf in bf16: keeps the fixed-point conversion in range


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
