"""LFM2's two short-convolution kernels (issue #37 item 1): conv1d (causal depthwise, 3 taps) and eltwise_mul.

The emulated numerics reproduce the measured rows of mlir-air's pages on the harness's own inputs
(kernel_registry/details/Conv1D_bf16.md at ff1efdb0, EltwiseMul_bf16.md at e0eee76d); the tile rules refuse the
placements the pages call silently wrong; a wrong tap order and a look-ahead convolution fail."""

import numpy as np
import pytest

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.executors.emulated import EmulatedExecutor
from npu_kernels.numerics.harness_inputs import harness_case, precision_stats
from npu_kernels.numerics.run import run_kernel
from npu_kernels.numerics.tiles import TileRuleViolation, plan_tile

# (kernel, shape, pad) -> the page's printed mean_rel_L1 (the facts of the two pages, cited above)
PAGE_ROWS = [
    ("conv1d", {"seq": 2048, "C": 2048}, "zero", "2.816e-3"),
    ("conv1d", {"seq": 2048, "C": 2048}, "nonzero", "2.813e-3"),
    ("conv1d", {"seq": 8, "C": 2048}, "zero", "2.775e-3"),
    ("conv1d", {"seq": 8, "C": 2048}, "nonzero", "2.836e-3"),
    ("eltwise_mul", {"N": 1048576}, None, "2.728e-3"),
    ("eltwise_mul", {"N": 4194304}, None, "2.736e-3"),
]


@pytest.mark.parametrize("kernel,shape,pad,printed", PAGE_ROWS)
def test_the_emulator_reproduces_the_pages_rows_on_the_harness_inputs(kernel, shape, pad, printed):
    r = run_kernel(kernel, shape, tile={"pad": pad} if pad else None, inputs="harness")
    assert r.verdict == "PASS" and r.mismatches == 0
    assert f"{r.mean_rel_L1:.3e}" == f"{float(printed):.3e}"


def test_tolerances_are_the_pages():
    for kernel in ("conv1d", "eltwise_mul"):
        c = get_spec(kernel).contract(None)
        assert (c.rtol, c.atol, c.out_dtype) == (1.6e-2, 5e-2, "bf16")


@pytest.mark.parametrize("tile,rule", [
    ({"herd_x": 4, "tile_s": 32}, "conv1d.l1_budget"),  # 70.6 KB: compiles, silently wrong (the page)
    ({"herd_x": 2, "tile_s": 8}, "conv1d.herd_x_not_2"),  # conv1d_depthwise.py@09ca164: silently wrong
    ({"herd_y": 2, "tile_s": 16}, "conv1d.herd_y_eq_1"),  # the second invocation deadlocks
    ({"pad": "sideways"}, "conv1d.pad_zero_or_nonzero"),
])
def test_the_silently_wrong_placements_stay_refused(tile, rule):
    with pytest.raises(TileRuleViolation) as err:
        plan_tile("conv1d", {"seq": 2048, "C": 2048}, "npu2", tile)
    assert err.value.rule == rule


def test_the_planner_takes_the_shipped_placement():
    p = plan_tile("conv1d", {"seq": 2048, "C": 2048})
    assert (p.tile["herd_x"], p.tile["herd_y"], p.tile["pad"]) == (8, 1, "nonzero") and p.legal
    assert plan_tile("conv1d", {"seq": 1, "C": 2048}).legal  # decode: one row against the carried state
    assert plan_tile("eltwise_mul", {"N": 2048 * 2048}).herd == [8, 1]


def test_a_wrong_tap_order_fails_its_row():
    """Newest-first taps (HF's channel-major (C, 1, 3) read as if reversed) against the harness's nonzero-pad
    reference: far outside the band, on every row."""
    spec = get_spec("conv1d")
    s = spec.normalize_shape({"seq": 64, "C": 256})
    case = harness_case("conv1d", s, tile={"pad": "nonzero"})
    flipped = EmulatedExecutor().conv1d(case.inputs["x"], case.inputs["w"][::-1].copy())
    assert precision_stats(flipped, case.reference, "bf16").mean_rel_L1 > 0.3
    assert run_kernel("conv1d", s, inputs="harness").mean_rel_L1 < 5e-3


def test_a_non_causal_conv_fails_its_row():
    """A convolution that looks one step ahead reads x[t + 3]: judged against the causal reference it fails."""
    spec = get_spec("conv1d")
    s = spec.normalize_shape({"seq": 64, "C": 256})
    i = spec.make_inputs(s)
    ahead = np.zeros_like(i["x"])
    ahead[:-1] = i["x"][1:]  # shifted one position into the future
    out = EmulatedExecutor().conv1d(ahead, i["w"])
    ref = spec.reference(i, s)
    assert np.mean(np.abs(out - ref)) / np.mean(np.abs(ref)) > 0.3


def test_the_torch_executor_runs_both():
    for kernel in ("conv1d", "eltwise_mul"):
        r = run_kernel(kernel, get_spec(kernel).small_shape, executor="torch")
        assert r.verdict == "PASS"
