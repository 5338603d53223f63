"""The emulator against NPU2's published `[precision]` lines, on mlir-air's own harness inputs."""

import math

import numpy as np
import pytest
from ml_dtypes import bfloat16

from benchmarks.bench_precision_lines import emulate_line, load_lines, reproducible
from npu_kernels.numerics.executors.emulated import EmulatedExecutor
from npu_kernels.numerics.harness_inputs import (
    HarnessNotReproduced,
    digits_agreeing,
    harness_case,
    precision_stats,
    sequential_matmul_f32,
)
from npu_kernels.numerics.run import run_kernel

EX = EmulatedExecutor("npu2")
LINES = load_lines()
# Emulated lines the model does NOT yet reproduce in every printed digit, with the gap (issue #17's closing
# note has the experiments). Every other emulated line must match to the printed digit.
UNMATCHED = {
    "gelu-65536-ab": "mean 7.94e-3 vs 8.425e-3: the hardware tanh (__builtin_aie2p_tanh) is undocumented",
    "gelu-3145728": "mean 7.92e-3 vs 8.41e-3: hardware tanh",
    "gelu-1048576": "mean 7.91e-3 vs 8.4e-3: hardware tanh",
    "silu-mul-16777216": "mean 1.048e-2 vs 1.02e-2: hardware tanh",
    "silu-mul-16777216-registry": "mean 1.048e-2 vs 1.024e-2, rel max 0.234 vs 0.411: hardware tanh",
    "silu-mul-655360": "abs max 6.25e-2 vs 0.125: hardware tanh",
    "fa-512-12-6": "abs max 3.52e-2 vs 3.9e-2 (one output; scripts/fa_hypotheses.py)",
    "fa-512-64-8": "abs max 5.27e-2 vs 5.9e-2",
    "fa-512-dk128-28-4": "abs max 3.52e-2 vs 3.6e-2",
    "fa-1024-12-12": "abs max 2.93e-2 vs 3.0e-2",
}
EMULATED = [ln for ln in LINES if not reproducible(ln)]
MATCHED = [ln for ln in EMULATED if ln["id"] not in UNMATCHED]


def test_every_published_line_names_its_source_and_keeps_the_printed_digits():
    assert len(LINES) >= 55
    for ln in LINES:
        assert ln["source"] and ln["kernel"] and ln["shape"]
        assert any(isinstance(ln.get(s), str) for s in ("mean_rel_L1", "rel_err_max", "abs_err_max"))


@pytest.mark.parametrize("line", MATCHED, ids=[ln["id"] for ln in MATCHED])
def test_the_emulator_prints_npu2s_precision_line_to_every_printed_digit(line):
    row = emulate_line(line, EX)
    assert row["digits"] == row["printed_digits"], (row["ours"], row["npu2"])


def test_the_unmatched_list_names_only_emulated_lines_and_every_kernel_has_a_matched_line():
    assert set(UNMATCHED) <= {ln["id"] for ln in EMULATED}
    assert {"gemm", "eltwise_add", "rope", "gemv", "flash_attention"} <= {ln["kernel"] for ln in MATCHED}


def test_registry_wide_fidelity_still_holds_on_every_kernel_row():
    from benchmarks.bench_kernels import fidelity_rows

    rows = fidelity_rows(EmulatedExecutor("npu2"), quick=True)
    assert len(rows) >= 12
    assert all(r["within_band"] for r in rows), [(r["kernel"], r["contract"], r["ratio"]) for r in rows if not r["within_band"]]


def test_the_six_bf16_to_f32_lines_publish_all_three_statistics_and_are_all_matched():
    f32 = [ln for ln in MATCHED if ln["contract"] == "f32-out"]
    assert len(f32) == 6
    assert all(all(isinstance(ln[s], str) for s in ("mean_rel_L1", "rel_err_max", "abs_err_max")) for ln in f32)


def test_gemm_harness_inputs_are_seed_42_float64_draws_cast_to_bf16_a_before_b():
    case = harness_case("gemm", {"M": 4, "K": 16, "N": 3}, "f32-out")
    rs = np.random.RandomState(42)
    a = (rs.randn(4, 16) * (1 / math.sqrt(16))).astype(np.float32).astype(bfloat16).astype(np.float32)
    b = (rs.randn(16, 3) * (1 / math.sqrt(16))).astype(np.float32).astype(bfloat16).astype(np.float32)
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


def test_the_norm_and_gemv_harnesses_draw_from_the_legacy_generator_in_order():
    rs = np.random.RandomState(0)
    x, w = rs.randn(4, 32).astype(np.float32).astype(bfloat16), rs.randn(32).astype(np.float32).astype(bfloat16)
    case = harness_case("rmsnorm", {"M": 4, "N": 32})
    assert np.array_equal(case.inputs["x"], x.astype(np.float32)) and np.array_equal(case.inputs["w"], w.astype(np.float32))
    b = np.random.RandomState(0)
    ln = harness_case("layernorm", {"M": 4, "N": 32})
    bias = [b.randn(4, 32), b.randn(32), b.randn(32)][2]
    assert np.array_equal(ln.inputs["b"], bias.astype(np.float32).astype(bfloat16).astype(np.float32))
    g = np.random.RandomState(42)
    gv = harness_case("gemv", {"M": 8, "K": 16})
    assert np.array_equal(gv.inputs["a"], (g.randn(8, 16) * 4).astype(np.float32).astype(bfloat16).astype(np.float32))


def test_rope_harness_positions_are_row_indices_and_flash_attention_draws_float64_q_then_k_then_v():
    rope = harness_case("rope", {"rows": 3, "head_dim": 8})
    assert np.all(rope.inputs["cos"][0] == 1.0) and np.all(rope.inputs["sin"][0] == 0.0)  # row 0 = position 0
    assert rope.inputs["sin"][2, 0] == np.float32(np.sin(2.0)).astype(bfloat16)  # freq_0 = 1, position 2
    shape = {"lq": 4, "lk": 4, "dk": 8, "dv": 8, "heads_q": 2, "heads_kv": 1, "causal": True}
    fa = harness_case("flash_attention", shape)
    rng = np.random.default_rng(42)
    shapes = ((2, 4, 8), (1, 4, 8), (1, 4, 8))
    q, k, v = (rng.standard_normal(s).astype(np.float32).astype(bfloat16).astype(np.float32) for s in shapes)
    assert all(np.array_equal(fa.inputs[n], a) for n, a in (("q", q), ("k", k), ("v", v)))


def test_a_kernel_without_a_harness_builder_raises_naming_those_that_have_one():
    with pytest.raises(HarnessNotReproduced, match="gemm, .*eltwise_add"):
        harness_case("softmax", {"N": 64})
    with pytest.raises(ValueError, match="unknown inputs"):
        run_kernel("gemm", {"M": 64, "K": 2048, "N": 64}, inputs="random")
