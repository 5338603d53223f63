"""The 4-bit (Q4NX) kernels: dequant_q4nx.cc's one rounding and q4_k.h's GEMV order, on hand-chosen codes."""

import numpy as np
import pytest

from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.executors import make_executor
from npu_kernels.numerics.executors.emulated_q4 import dequant_q4nx, gemv_q4nx, reduce_add_32
from npu_kernels.numerics.run import run_kernel
from npu_kernels.numerics.spec import ShapeError

EX = make_executor("emulated")
FP32 = make_executor("fp32")


def one_row(codes, scales, mins):
    """(codes (1, 32 * G), scale (1, G), min (1, G)) from per-group lists of 32 codes."""
    return (np.array([sum(codes, [])], np.float32), np.array([scales], np.float32), np.array([mins], np.float32))


def test_dequant_applies_each_groups_scale_and_min_to_its_own_32_columns():
    g0 = list(range(16)) + list(range(16))  # codes 0..15 twice
    g1 = [15] * 16 + [0] * 16
    q, s, m = one_row([g0, g1], [0.0625, 2.0], [-0.5, 1.0])
    w = EX.dequant_q4nx(q, s, m)[0]
    assert w[:16].tolist() == [c * 0.0625 - 0.5 for c in range(16)]  # all exact in bf16
    assert w[32:48].tolist() == [31.0] * 16 and w[48:].tolist() == [1.0] * 16


def test_dequant_rounds_once_like_the_kernels_accumulator_not_after_the_product():
    # q*scale = 3 * (1 + 2^-7) = 3.0234375 (not a bf16 value); + min (-2^-7) = 3.015625 exactly (one bf16 ulp
    # above 3). dequant_q4nx.cc adds in accfloat and rounds once: 3.015625. Rounding the product to bf16
    # first (3.03125, a tie to even) and then adding gives 3.0234375, another tie, to 3.03125.
    q, s, m = one_row([[3] + [0] * 31], [1.0078125], [-0.0078125])
    assert dequant_q4nx(q, s, m)[0, 0] == 3.015625
    two_roundings = to_bf16(to_bf16(np.float32(3) * np.float32(1.0078125)) + np.float32(-0.0078125))
    assert two_roundings == 3.03125
    assert make_executor("torch").dequant_q4nx(q, s, m)[0, 0] == 3.03125  # the GPU's bf16 op-by-op path


def test_dequant_matches_its_reference_bit_for_bit_at_the_harness_shape():
    spec = get_spec("dequant_q4nx")
    r = run_kernel("dequant_q4nx", spec.registry_shape)
    assert r.verdict == "PASS" and r.max_abs == 0.0 and r.mismatches == 0


def test_gemv_on_exact_codes_equals_the_hand_computed_product():
    # two groups: y = sum_c (q*s + m) x = s0 * sum(q x) + m0 * sum(x) + (group 1 likewise)
    x = np.array([1.0, 2.0, 0.5, -1.0] + [0.0] * 28 + [4.0] * 32, np.float32)
    q, s, m = one_row([[1, 2, 4, 8] + [0] * 28, [1] * 32], [0.25, 0.5], [1.0, -0.125])
    y = EX.gemv_q4nx(q, s, m, x)
    group0 = 0.25 * (1 * 1 + 2 * 2 + 4 * 0.5 + 8 * -1) + 1.0 * (1 + 2 + 0.5 - 1)  # -0.25 + 2.5
    group1 = 0.5 * (1 * 4 * 32) + -0.125 * (4 * 32)  # 64 - 16
    assert y.tolist() == [group0 + group1] == FP32.gemv_q4nx(q, s, m, x).tolist()


def test_gemv_rounds_each_groups_partial_sum_to_bf16_before_the_scale():
    # group 0: q.x = 256 + 1 = 257 -> bf16 256 (tie to even); group 1: q.x = 1. The kernel gets 256 + 1 = 257
    # -> 256; exact FP32 is 258, a bf16 value. The per-group rounding is the kernel's, not the reference's.
    x = np.zeros(64, np.float32)
    x[0], x[1], x[32] = 256.0, 1.0, 1.0
    q, s, m = one_row([[1, 1] + [0] * 30, [1] + [0] * 31], [1.0, 1.0], [0.0, 0.0])
    assert EX.gemv_q4nx(q, s, m, x).tolist() == [256.0]
    assert to_bf16(FP32.gemv_q4nx(q, s, m, x)).tolist() == [258.0]


def test_gemv_takes_the_min_term_from_the_bf16_group_sum_of_x():
    # group 0: codes 0, min 1, sum x = 256 + 1 = 257 -> bf16 256; group 1 subtracts 256 exactly (code 1,
    # scale -1 on x = 256). The kernel's y is 256 - 256 = 0; the exact dequantised product is 1.
    x = np.zeros(64, np.float32)
    x[0], x[1], x[32] = 256.0, 1.0, 256.0
    q, s, m = one_row([[0] * 32, [1] + [0] * 31], [1.0, -1.0], [1.0, 0.0])
    assert reduce_add_32(x[:32]) == 257.0 and to_bf16(reduce_add_32(x[:32])) == 256.0
    assert EX.gemv_q4nx(q, s, m, x).tolist() == [0.0]
    assert FP32.gemv_q4nx(q, s, m, x).tolist() == [1.0]


def test_gemv_passes_its_contract_at_the_harness_inputs_and_is_not_exact():
    r = run_kernel("gemv_q4nx", {"M": 512, "K": 2048})
    assert r.verdict == "PASS" and r.mean_rel_L1 > 0
    assert r.max_abs < get_spec("gemv_q4nx").contract(None).atol


def test_q4_shapes_must_fill_whole_groups_and_blocks():
    with pytest.raises(ShapeError, match="32-column"):
        get_spec("dequant_q4nx").normalize_shape({"M": 4, "K": 48})
    with pytest.raises(ShapeError, match="32x256"):
        get_spec("gemv_q4nx").normalize_shape({"M": 32, "K": 288})
    with pytest.raises(ValueError, match="scale and min of shape"):
        dequant_q4nx(np.zeros((2, 64), np.float32), np.zeros((2, 3), np.float32), np.zeros((2, 2), np.float32))
