"""The KernelRunner seam (npu_kernels.backends.kernel_runners): one runner per executor name, chosen once, each knowing
its evidence source, its lock duty, the toolchain it records and how a re-measurement must agree."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from handlers.gates.kernel_rows import kernel_row
from npu_kernels.backends.kernel_runners import WORKER_EXECUTORS, make_runner, worker_kind
from npu_kernels.backends.runner_base import KernelRow
from npu_kernels.model.plan import plan
from npu_kernels.numerics.executors.standin import FAULT_GAIN, StandinError, StandinFault
from ledger.events import KernelVerified
from tests.small_configs import MODELS, model_config


def test_each_executor_name_gets_its_runner_with_its_source_and_lock_duty():
    got = {name: (make_runner(name).name, make_runner(name).source, make_runner(name).takes_npu_lock)
           for name in ("emulated", "torch", "fp32", "mlir-air")}
    assert got == {"emulated": ("emulated", "emulated", False), "torch": ("torch", "torch", False),
                   "fp32": ("fp32", "emulated", False), "mlir-air": ("mlir-air", "harness", True)}
    with pytest.raises(ValueError, match="unknown executor 'tpu'"):
        make_runner("tpu")


def test_the_planners_row_is_the_row_a_runner_verifies_into_its_kernel_verified_fields():
    config = model_config(*MODELS[0])
    row = next(r for r in plan(config, "npu2") if r.kernel == "rope")
    assert isinstance(row, KernelRow) and row.contract and row.tile == dict(row.plan.tile) and not row.force_tile
    run = make_runner("emulated").verify(row, attempt=2, when="2026-06-14", host="h")
    event = KernelVerified(**run.fields)
    assert run.transcript is None and run.not_measured is None and event.verdict == "PASS"
    assert (event.executor, event.source, event.role, event.stage, event.measured_at, event.contract) == (
        "emulated", "emulated", row.role, row.phase, "2026-06-14", row.contract)
    assert event.provenance["command"] == f"ledger kernel run rope --shape {row.shape_text} --executor emulated --target npu2"
    assert event.provenance["attempt"] == 2 and event.provenance["toolchain"]["executor"] == "emulated"
    assert event.modelled_npu2["modelled"] is True


def test_a_forced_tile_is_merged_over_the_planners_and_forced_past_the_rules():
    planned = next(r for r in plan(model_config(*MODELS[1]), "npu2") if r.kernel == "gemm")
    row = kernel_row(SimpleNamespace(pipeline={"forced_tiles": {"gemm": {"tile_n": 48}}}), planned)
    assert row.force_tile and row.tile == {**planned.plan.tile, "tile_n": 48}
    assert (row.key, row.plan, row.role, row.contract) == (planned.key, planned.plan, planned.role, planned.contract)
    assert kernel_row(SimpleNamespace(pipeline=None), planned) is planned and not planned.force_tile


def test_a_stand_in_fault_fails_only_its_rows_and_names_itself_in_their_toolchain():
    fault = StandinFault.parse("rope:head_dim=128")
    runner = make_runner("emulated", standin_fault=fault)
    hit, miss = KernelRow("rope", {"rows": 64, "head_dim": 128}), KernelRow("rope", {"rows": 64, "head_dim": 64})
    bad = runner.verify(hit, attempt=1, when="", host="")
    good = runner.verify(miss, attempt=1, when="", host="")
    assert bad.fields["verdict"] == "FAIL" and bad.fields["provenance"]["toolchain"]["standin_fault"] == str(fault)
    assert bad.fields["mean_rel_L1"] == pytest.approx(FAULT_GAIN - 1, rel=0.05)
    assert good.fields["verdict"] == "PASS" and "standin_fault" not in good.fields["provenance"]["toolchain"]
    assert runner.toolchain(hit)["standin_fault"] == str(fault) and "standin_fault" not in runner.toolchain(miss)
    for name in ("torch", "mlir-air"):
        with pytest.raises(StandinError, match="stand-in of the emulated executor"):
            make_runner(name, standin_fault=fault)


def _row(**figures):
    return SimpleNamespace(**{"mismatches": 0, "mean_rel_L1": 1e-3, "max_abs": 0.5, "rtol": 0.04, **figures})


def test_in_process_a_re_measurement_reproduces_the_figures_and_on_hardware_sits_in_the_band():
    in_process, harness = make_runner("emulated"), make_runner("mlir-air")
    old = _row()
    assert in_process.remeasure_problems(old, _row(mean_rel_L1=1e-3 * (1 + 5e-6))) == []
    drift = in_process.remeasure_problems(old, _row(mean_rel_L1=1.1e-3, mismatches=3))
    assert drift[0] == "0 mismatches recorded, 3 re-measured" and "relative difference 9.09e-02 > 1e-05" in drift[1]
    # a device run is not bit-reproducible: the same 10% drift is inside the kernel's rtol band
    assert harness.remeasure_problems(old, _row(mean_rel_L1=1.1e-3, mismatches=3)) == []
    assert harness.remeasure_problems(old, _row(mean_rel_L1=0.05)) == [
        "mean_rel_L1 0.001 recorded, 0.05 re-measured (band 0.04)"]


def test_a_worker_serves_its_deployments_rows_and_the_sleep_stand_in_needs_its_seconds(monkeypatch):
    monkeypatch.delenv("NPU_LEDGER_STANDIN_SLEEP_S", raising=False)
    with pytest.raises(StandinError, match="needs NPU_LEDGER_STANDIN_SLEEP_S"):
        worker_kind("sleep")
    monkeypatch.setenv("NPU_LEDGER_STANDIN_SLEEP_S", "0")
    assert [worker_kind(n).serves for n in WORKER_EXECUTORS] == ["emulated", "torch", "mlir-air", "emulated"]
    assert worker_kind("mlir-air").sleep_s is None
    assert worker_kind("sleep").sleep_s == 0.0  # zero seconds is still the stand-in: its rows say so
