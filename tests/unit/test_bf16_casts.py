"""The bf16 casts pinned on crafted values, whatever ml_dtypes is installed.

The expected bit patterns are written out here, not computed with ml_dtypes: ml_dtypes 0.7.0 changed its
float64 -> bf16 cast (one rounding instead of two), and these tests are what says the project's casts did
not change with it.
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.harness_inputs import _bf16 as harness_bf16
from npu_kernels.numerics.harness_inputs import harness_case


def _f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


def _bits(x: np.ndarray) -> list[int]:
    return [int(b) for b in np.asarray(x, np.float32).view(np.uint32)]


def _single_rounding_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> nearest bf16 (ties to even) in one rounding, for normal values: the cast ml_dtypes 0.7 does."""
    x = np.asarray(x, np.float64)
    _, e = np.frexp(x)  # x = m * 2**e, m in [0.5, 1): bf16 keeps 8 significant bits -> step 2**(e - 8)
    step = np.ldexp(1.0, e - 8)
    return (np.rint(x / step) * step).astype(np.float32)  # exact: 8 significant bits


def test_float32_ties_round_to_the_even_bf16_in_both_directions():
    x = _f32([0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000, 0x3F808001, 0x3F817FFF])
    # 1 + 2^-8 -> 1; 1 + 3*2^-8 -> 1 + 2^-6 (up, to the even mantissa); the same negated; off-tie neighbours
    assert _bits(to_bf16(x)) == [0x3F800000, 0x3F820000, 0xBF800000, 0xBF820000, 0x3F810000, 0x3F810000]


def test_float32_overflow_goes_to_inf_and_the_largest_bf16_stays():
    x = _f32([0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7F8000])
    assert _bits(to_bf16(x)) == [0x7F7F0000, 0x7F800000, 0x7F800000, 0xFF800000]


def test_float32_subnormals_round_to_nearest_even_without_flushing():
    x = _f32([0x00008000, 0x00018000, 0x00008001, 0x80018000, 0x007FFFFF])
    # half of the smallest bf16 subnormal -> 0; 1.5 of it -> 2 of it; just over half -> it; the largest
    # float32 subnormal rounds up to the smallest normal
    assert _bits(to_bf16(x)) == [0x00000000, 0x00020000, 0x00010000, 0x80020000, 0x00800000]


def test_nan_stays_nan_with_its_sign_and_inf_stays_inf():
    x = _f32([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0x7F800000, 0xFF800000])
    with np.errstate(invalid="ignore"):  # the signalling NaN 0x7f800001 raises numpy's invalid flag
        y = to_bf16(x)
    assert np.isnan(y[:4]).all() and list(np.signbit(y[:4])) == [False, True, False, False]
    assert _bits(y[4:]) == [0x7F800000, 0xFF800000]


def test_a_float64_value_is_rounded_to_float32_first_then_to_bf16():
    one_ulp32 = 2.0**-23
    x = np.array([
        1 + 2**-8 + 2**-30,  # float32: exactly the tie 1 + 2^-8 -> 1 (one rounding: 1 + 2^-7)
        1 + 3 * 2**-8 - 2**-30,  # float32: the tie 1 + 3*2^-8 -> 1 + 2^-6 (one rounding: 1 + 2^-7)
        -(1 + 2**-8 + 2**-30),
        1 + 2**-8 + one_ulp32,  # off the tie in float32 too: both ways give 1 + 2^-7
    ])
    want = [1.0, 1.015625, -1.0, 1.0078125]
    assert list(to_bf16(x)) == want
    assert list(harness_bf16(x)) == want  # the harness inputs' cast is the same one
    assert list(_single_rounding_bf16(x)) == [1.0078125, 1.0078125, -1.0078125, 1.0078125]


def test_python_floats_take_the_same_two_roundings():
    assert to_bf16(1 + 2**-8 + 2**-30)[()] == np.float32(1.0)
    assert to_bf16([1 + 3 * 2**-8 - 2**-30])[0] == np.float32(1.015625)


def test_the_64x720_gemm_harness_draws_that_land_on_a_tie_take_the_float32_first_value():
    # seed 42, randn(64, 720) / sqrt(720): two draws of A land exactly on a bf16 tie once rounded to
    # float32; their bf16 value under one rounding is a bf16 ulp away, and that ulp moves the published
    # drain lines 64x720x32 (0.00901) and 64x720x2048 (0.00943) in their third digit
    case = harness_case("gemm", {"M": 64, "K": 720, "N": 32}, "bf16-out-high")
    draws = np.random.RandomState(42).randn(64, 720) / math.sqrt(720)
    two_step = to_bf16(draws.astype(np.float32))
    one_step = _single_rounding_bf16(draws)
    differ = np.argwhere(two_step != one_step)
    assert differ.tolist() == [[2, 335], [50, 134]]
    assert np.array_equal(case.inputs["a"], two_step)
