"""Measurements are checked against the kernel, shape, contract and NPU2's physical ceilings on the way in."""

import json
from datetime import date

import pytest

from npu_kernels.numerics.catalog import CATALOG, KERNELS
from npu_kernels.perf.evidence import EvidenceError, check_measurement, check_stored_row, output_elements
from npu_kernels.perf.constants import NPU2_PEAK_BF16_FLOPS
from registry.importer import UpstreamFormatError, events_from_upstream

GOOD = dict(verdict="PASS", rtol=1.6e-2, atol=1.5e-3, n_elements=2048 * 2048, mean_rel_L1=9.3e-3, max_abs=6e-4,
            max_rel=0.39, latency_us=2017.3, gflops=8516.27)  # 2*2048**3 FLOP / 2017.3 us
GEMM = {"M": 2048, "K": 2048, "N": 2048}


def test_a_real_npu2_gemm_measurement_is_accepted():
    assert check_measurement("gemm", GEMM, "bf16-out-high", **GOOD)["shape"] == GEMM


@pytest.mark.parametrize("change, says", [
    ({"n_elements": 10}, "checked 10 elements but the output has 4194304"),
    ({"rtol": 0.5}, "printed rtol=0.5 is not the contract's rtol=0.016"),
    ({"atol": 0.5}, "printed atol=0.5 is not the contract's atol=0.0015"),
    ({"gflops": 9.9e12}, "exceeds npu2's peak of 4.915e+04 GFLOP/s"),
    ({"latency_us": 1.0}, "latency 1 us is impossible"),
    ({"mean_rel_L1": -0.1}, "mean_rel_L1=-0.1 is negative"),
    ({"max_abs": float("nan")}, "max_abs is NaN but the verdict is PASS"),
    ({"n_elements": None}, "does not say how many elements"),
])
def test_an_impossible_or_mismatched_figure_is_refused_naming_it(change, says):
    with pytest.raises(EvidenceError, match=says.replace("(", r"\(").replace("+", r"\+")):
        check_measurement("gemm", GEMM, "bf16-out-high", **{**GOOD, **change})


@pytest.mark.parametrize("shape, says", [
    ({"M": -5, "K": 0, "N": "abc"}, "M=-5 must be positive"),
    ({"M": 2048, "K": 2048}, "missing N"),
    ({"rows": 8, "head_dim": 64}, "unknown head_dim, rows"),
])
def test_a_shape_the_kernel_does_not_know_is_refused(shape, says):
    with pytest.raises(EvidenceError, match=says):
        check_measurement("gemm", shape, "bf16-out-high", **GOOD)


def test_a_nan_figure_is_evidence_of_a_fail():
    check_measurement("gemm", GEMM, "bf16-out-high", **{**GOOD, "verdict": "FAIL", "mean_rel_L1": float("nan")})


def test_output_sizes_follow_each_kernels_shape():
    assert output_elements("gemv", {"M": 512, "K": 2048}) == 512
    assert output_elements("rope", {"rows": 65536, "head_dim": 64}) == 65536 * 64
    assert output_elements("flash_attention", {"lq": 2048, "lk": 2048, "dk": 64, "dv": 64, "heads_q": 32,
                                                "heads_kv": 8, "causal": True}) == 32 * 2048 * 64


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_catalog_kernels_output_size_is_the_size_of_its_reference_output(kernel):
    """The count a transcript must have checked comes from the catalog entry (issue #48: a hand table in this module
    had no eltwise_mul or conv1d, so LFM2's first harness row stopped Phase 1 with a bare KeyError)."""
    spec = CATALOG[kernel]
    shape = spec.small_shape
    assert output_elements(kernel, shape) == spec.reference(spec.make_inputs(shape), shape).size


@pytest.mark.parametrize("kernel, shape, n", [("eltwise_mul", {"N": 65536}, 65536),
                                              ("conv1d", {"seq": 64, "C": 256}, 64 * 256)])
def test_a_short_convolution_transcript_is_checked_for_its_element_count(kernel, shape, n):
    rtol, atol = CATALOG[kernel].contract(None).rtol, CATALOG[kernel].contract(None).atol
    fields = dict(verdict="PASS", rtol=rtol, atol=atol, mean_rel_L1=2.7e-3, max_abs=1e-2, max_rel=0.01)
    assert check_measurement(kernel, shape, "bf16-out", n_elements=n, **fields)["shape"] == shape
    with pytest.raises(EvidenceError, match=f"checked {n - 1} elements but the output has {n}"):
        check_measurement(kernel, shape, "bf16-out", n_elements=n - 1, **fields)
    row = {"kernel": kernel, "shape": shape, "contract": "bf16-out", "verdict": "PASS", "n_elements": n - 1,
           "executor": "mlir-air", "source": "harness"}
    assert [f"{kernel} " in p and f"the output has {n}" in p for p in check_stored_row(row)] == [True]


def test_the_peak_is_above_every_row_mlir_air_measured_on_npu2():
    from pathlib import Path

    folder = Path(__file__).parents[1] / "fixtures" / "upstream_registry"
    best = max(m.get("gflops") or 0 for f in folder.glob("*.json")
               for s in json.loads(f.read_text())["shapes"] for m in s["methods"].values())
    assert 8500 < best < NPU2_PEAK_BF16_FLOPS / 1e9


def _upstream(tmp_path, shape=None, gflops=25, measured="2026-06"):
    doc = {"kernel": "GEMM", "output_dtype": "bf16", "target": "npu2", "measured": measured, "herd": [8, 4],
           "shapes": [{"M": 64, "K": 32, "N": 720, **(shape or {}), "methods": {
               "drain": {"tile": {"tile_m": 16}, "gflops": gflops, "mean_rel_L1": 0.00926, "tier": "high"}}}]}
    path = tmp_path / "GEMM_bf16_in_bf16_out.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("kwargs, says", [
    ({"shape": {"M": -64}}, "M=-64 must be positive"),
    ({"gflops": 1e15}, "exceeds npu2's peak"),
    ({"measured": "2099-01"}, "measured '2099-01' is in the future"),
    ({"measured": "last june"}, "is not a date"),
])
def test_registry_import_refuses_what_a_harness_transcript_would_be_refused_for(tmp_path, kwargs, says):
    with pytest.raises(UpstreamFormatError, match=says):
        events_from_upstream(_upstream(tmp_path, **kwargs), today=date(2026, 12, 1))


def test_registry_import_accepts_a_month_already_begun(tmp_path):
    assert len(events_from_upstream(_upstream(tmp_path, measured="2026-12"), today=date(2026, 12, 1))) == 1
