"""Comparators: measuring apart from judging, NaN as evidence, never a cosine gate."""

import math

import numpy as np
import pytest

from npu_kernels.numerics.compare import judge, measure


def test_identical_outputs_measure_zero_and_pass():
    ref = np.linspace(-1, 1, 101, dtype=np.float32)
    v = judge(ref.copy(), ref, rtol=1.6e-2, atol=1e-3)
    assert v.passed and v.verdict == "PASS"
    assert v.mismatches == 0 and v.metrics.mean_rel_L1 == 0.0 and v.metrics.max_abs == 0.0
    assert v.worst_ratio == 0.0


def test_a_uniformly_doubled_output_fails_although_its_cosine_is_one():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(1000).astype(np.float32)
    out = 2 * ref
    cosine = float(out @ ref / np.linalg.norm(out) / np.linalg.norm(ref))
    assert cosine == pytest.approx(1.0)
    v = judge(out, ref, rtol=1.6e-2, atol=1e-3)
    assert not v.passed
    assert v.metrics.mean_rel_L1 == pytest.approx(1.0)
    assert v.mismatches > 990


def test_mean_rel_l1_is_mean_abs_error_over_mean_abs_reference():
    ref = np.array([1.0, -2.0, 4.0, 0.0], np.float32)
    out = np.array([1.5, -2.0, 3.0, 0.25], np.float32)
    m = measure(out, ref)
    assert m.mean_rel_L1 == pytest.approx((0.5 + 0 + 1 + 0.25) / (1 + 2 + 4 + 0))
    assert m.max_abs == pytest.approx(1.0)
    assert m.max_rel == pytest.approx(0.25 / 1e-30)  # the harness's guarded denominator
    assert m.n_elements == 4 and m.nan_count == 0 and m.ref_max_abs == 4.0


def test_nan_in_the_output_is_counted_and_fails_without_crashing():
    ref = np.ones(10, np.float32)
    out = ref.copy()
    out[3] = np.nan
    m = measure(out, ref)
    assert m.nan_count == 1 and m.nonfinite_count == 1
    assert m.mean_rel_L1 == 0.0  # the statistics cover the finite elements
    v = judge(out, ref, rtol=1.6e-2, atol=1e-3)
    assert not v.passed and v.mismatches == 1 and math.isinf(v.worst_ratio)


def test_an_all_nan_output_measures_nan_and_fails():
    ref = np.ones(4, np.float32)
    v = judge(np.full(4, np.nan, np.float32), ref, 1.6e-2, 1e-3)
    assert not v.passed and v.mismatches == 4 and v.metrics.nan_count == 4
    assert math.isnan(v.metrics.mean_rel_L1)


def test_inf_in_the_output_is_a_mismatch():
    ref = np.ones(4, np.float32)
    out = ref.copy()
    out[0] = np.inf
    v = judge(out, ref, 1.6e-2, 1e-3)
    assert not v.passed and v.mismatches == 1 and v.metrics.nonfinite_count == 1 and v.metrics.nan_count == 0


def test_the_bound_is_atol_plus_rtol_times_the_reference():
    ref = np.array([1.0, 100.0], np.float32)
    rtol, atol = 0.0625, 0.125  # exactly representable, so the boundary is exact
    on_bound = ref + (atol + rtol * np.abs(ref))
    assert judge(on_bound, ref, rtol, atol).passed
    v = judge(on_bound + np.float32(0.125), ref, rtol, atol)
    assert not v.passed and v.mismatches == 2 and v.worst_ratio > 1


def test_a_verdict_re_derives_from_its_own_numbers():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(500).astype(np.float32)
    for noise in (1e-4, 1e-2, 1e-1):
        out = ref + noise * rng.standard_normal(500).astype(np.float32)
        v = judge(out, ref, 1.6e-2, 1e-3)
        assert v.passed == (v.mismatches == 0 and v.metrics.nan_count == 0 and v.worst_ratio <= 1)
        assert (v.mismatches == 0) == (v.worst_ratio <= 1)
        assert v.to_json()["verdict"] == v.verdict


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="shape"):
        measure(np.zeros(3), np.zeros(4))
