"""The emulator against NPU2's published `[precision]` lines, on mlir-air's own harness inputs."""

import math

import numpy as np
import pytest
from ml_dtypes import bfloat16

from benchmarks.bench_precision_lines import emulate_line, load_lines, reproducible
from kernels.executors.emulated import EmulatedExecutor
from kernels.harness_inputs import (
    HarnessNotReproduced,
    digits_agreeing,
    harness_case,
    precision_stats,
    sequential_matmul_f32,
)
from kernels.run import run_kernel

EX = EmulatedExecutor("npu2")
LINES = load_lines()
# the lines the emulator reproduces in every printed digit (see the closing note of issue #17 for the rest)
MATCHED = [ln for ln in LINES if not reproducible(ln) and ln["kernel"] in ("gemm", "eltwise_add")]


def test_every_published_line_names_its_source_and_keeps_the_printed_digits():
    assert len(LINES) >= 30
    for ln in LINES:
        assert ln["source"] and ln["kernel"] and ln["shape"]
        assert any(isinstance(ln.get(s), str) for s in ("mean_rel_L1", "rel_err_max", "abs_err_max"))


@pytest.mark.parametrize("line", MATCHED, ids=[ln["id"] for ln in MATCHED])
def test_the_emulator_prints_npu2s_precision_line_to_every_printed_digit(line):
    row = emulate_line(line, EX)
    assert row["digits"] == row["printed_digits"], (row["ours"], row["npu2"])


def test_the_six_bf16_to_f32_lines_publish_all_three_statistics_and_are_all_matched():
    f32 = [ln for ln in MATCHED if ln["contract"] == "f32-out"]
    assert len(f32) == 6
    assert all(all(isinstance(ln[s], str) for s in ("mean_rel_L1", "rel_err_max", "abs_err_max")) for ln in f32)


def test_gemm_harness_inputs_are_seed_42_float64_draws_cast_to_bf16_a_before_b():
    case = harness_case("gemm", {"M": 4, "K": 16, "N": 3}, "f32-out")
    rs = np.random.RandomState(42)
    a = (rs.randn(4, 16) * (1 / math.sqrt(16))).astype(bfloat16).astype(np.float32)
    b = (rs.randn(16, 3) * (1 / math.sqrt(16))).astype(bfloat16).astype(np.float32)
    assert np.array_equal(case.inputs["a"], a) and np.array_equal(case.inputs["b"], b)
    assert case.out_dtype == "f32" and np.array_equal(case.reference, sequential_matmul_f32(a, b))
    bf = harness_case("gemm", {"M": 4, "K": 16, "N": 3}, "bf16-out-high")
    assert bf.out_dtype == "bf16" and np.array_equal(bf.reference, case.reference.astype(bfloat16).astype(np.float32))


def test_the_harness_reference_accumulates_k_in_order_in_float32():
    a = np.array([[1.0, 1e-8, -1.0]], np.float32)
    b = np.ones((3, 1), np.float32)
    assert sequential_matmul_f32(a, b)[0, 0] == np.float32(0.0)  # (1 + 1e-8) rounds to 1 before the -1


def test_precision_stats_use_float32_for_an_f32_output_and_float64_for_bf16():
    ref = np.array([1.0, 3.0], np.float32)
    out = np.array([1.5, 3.0], np.float32)
    s = precision_stats(out, ref, "bf16")
    assert (s.mean_rel_L1, s.rel_err_max, s.abs_err_max) == (0.125, 0.5, 0.5)
    assert s.line() == "1.250e-01 | 5.000e-01 | 5.000e-01"
    assert precision_stats(out, ref, "f32").rel_err_max == 0.5


def test_digits_agreeing_counts_leading_significant_digits_as_printed():
    assert digits_agreeing(9.2731e-3, "9.273e-03") == 4
    assert digits_agreeing(9.261e-3, "9.273e-03") == 2
    assert digits_agreeing(9.263e-3, "0.00926") == 3
    assert digits_agreeing(1.0e-3, "9.9e-3") == 0  # another decade


def test_run_kernel_with_harness_inputs_judges_against_the_harness_reference():
    r = run_kernel("gemm", {"M": 128, "K": 512, "N": 128}, contract="f32-out", inputs="harness")
    assert r.verdict == "PASS" and 8e-3 < r.mean_rel_L1 < 1.1e-2
    assert run_kernel("eltwise_add", {"N": 65536}, inputs="harness").mean_rel_L1 > 0


def test_a_kernel_whose_harness_is_not_transcribed_raises_naming_those_that_are():
    with pytest.raises(HarnessNotReproduced, match="gemm, eltwise_add"):
        run_kernel("rmsnorm", {"M": 64, "N": 256}, inputs="harness")
    with pytest.raises(ValueError, match="unknown inputs"):
        run_kernel("gemm", {"M": 64, "K": 2048, "N": 64}, inputs="random")
