"""One row type from the plan to the runner (npu_kernels.numerics.row.KernelRow) with one identity: a row's `key`
is the state machine's `kernel_key`, whatever order its shape's keys were written in."""

from __future__ import annotations

import itertools

import pytest

from npu_kernels.model.plan import plan
from npu_kernels.numerics.row import KernelRow, row_key
from statemachine.gate import GateContext, kernel_key
from tests.small_configs import MODELS, model_config

SHAPES = [
    ("gemm", {"M": 2048, "K": 576, "N": 1536}),
    ("gemv", {"M": 16384, "K": 2048}),
    ("rope", {"rows": 18432, "head_dim": 64, "rotary_dim": 32}),
    ("flash_attention", {"lq": 512, "lk": 512, "dk": 64, "dv": 64, "heads_q": 9, "heads_kv": 3, "causal": True,
                         "window": 128}),
]


def test_the_state_machines_kernel_key_is_the_rows_identity_function():
    assert kernel_key is row_key


@pytest.mark.parametrize("kernel,shape", SHAPES)
def test_a_rows_key_is_its_kernel_key_in_every_order_of_its_shape(kernel, shape):
    want = kernel_key(kernel, shape)
    for order in itertools.permutations(shape.items()):
        assert KernelRow(kernel, dict(order)).key == want == kernel_key(kernel, dict(order))
    assert KernelRow(kernel, {**shape, "extra": 1}).key != want and KernelRow("other", shape).key != want


def test_every_planned_row_is_a_kernel_row_keyed_as_the_gate_context_keys_its_plan():
    rows = plan(model_config(*MODELS[0]), "npu2")
    assert all(isinstance(r, KernelRow) for r in rows)
    assert [r.key for r in rows] == [kernel_key(r.kernel, r.shape) for r in rows]
    assert GateContext(planned_kernels=[r.key for r in rows]) == GateContext(
        planned_kernels=[(r.kernel, dict(reversed(list(r.shape.items())))) for r in rows])


def test_an_ad_hoc_row_has_no_plan_and_a_planned_row_notes_its_warnings():
    adhoc = KernelRow("gemm", {"M": 64, "K": 64, "N": 64}, contract="bf16-out-low", tile={"tile_m": 32})
    assert (adhoc.plan, adhoc.role, adhoc.phase, adhoc.note, adhoc.warnings, adhoc.workarounds, adhoc.force_tile) == (
        None, "", "", "", (), {}, False)
    assert adhoc.shape_text == "M=64,K=64,N=64"
    warned = next(r for r in plan(model_config(*MODELS[0]), "npu2") if r.warnings)
    assert warned.note == "; ".join(warned.warnings)
    assert list(warned.to_json()) == ["kernel", "shape", "role", "phase", "contract", "method", "tier", "source",
                                      "tile", "warnings", "workarounds"]


def test_a_planned_rows_labels_reach_its_kernel_verified_on_the_in_process_runner():
    from npu_kernels.backends.kernel_runners import make_runner

    row = next(r for r in plan(model_config(*MODELS[0]), "npu2") if r.kernel == "rmsnorm")
    fields = make_runner("emulated", "npu2").verify(row, attempt=1, when="2026-12-03T00:00:00Z", host="h").fields
    assert {k: fields[k] for k in ("role", "stage", "note")} == row.labels() == {
        "role": row.role, "stage": row.phase, "note": row.note}
    assert row.role and row.phase
    assert row.plan_labels() == {"tiles_target": row.plan.tiles_target, "tile_justification": row.plan.justification}
    assert KernelRow("gemm", {"M": 64, "K": 64, "N": 64}).plan_labels() == {"tiles_target": None,
                                                                           "tile_justification": ""}
