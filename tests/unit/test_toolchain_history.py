"""Toolchain provenance (npu_kernels.toolchain), the stand-ins (npu_kernels.numerics.executors.standin) and the per-toolchain
history projection (registry.perf_history)."""

from __future__ import annotations

import pytest

from npu_kernels.numerics.executors.standin import FAULT_GAIN, FaultyEmulated, StandinError, StandinFault
from npu_kernels.numerics.run import run_kernel
from npu_kernels.toolchain import current_toolchain, toolchain_changes, toolchain_label
from ledger.events import BlockerRaised, KernelVerified, PerformanceMeasured, TokenGateChecked
from registry.perf_history import FILE_MD, FILE_PNG, fold_history, project_history
from registry.synthetic import record

OLD = {"npu_ledger": "0.1.0", "executor": "emulated", "emulated_numerics": "emulated-npu2/0", "perf_model": "npu2-perf/1"}
NEW = {**OLD, "emulated_numerics": "emulated-npu2/1"}
S = "deployment:m"


def _row(tc, verdict="PASS", kernel="rope", shape=None):
    return KernelVerified(kernel=kernel, shape=shape or {"rows": 8, "head_dim": 64}, contract="bf16", executor="emulated",
                          verdict=verdict, rtol=1e-2, atol=1e-2, provenance={"toolchain": tc})


def _perf(tc, ttft, tps):
    return PerformanceMeasured(phase=6, executor="emulated", ttft_s=ttft, tokens_per_s=tps, toolchain=tc,
                               profile={"source": "modelled NPU2"})


def _gate(passed):
    return TokenGateChecked(prompt_index=0, prompt="p", executor="emulated", n_tokens=32, passed=passed, agreed_prefix=3)


def test_the_emulated_toolchain_names_the_package_the_numerics_and_the_perf_model():
    tc = current_toolchain("emulated")
    assert set(tc) == {"npu_ledger", "executor", "emulated_numerics", "perf_model"}
    assert toolchain_label(tc).startswith("emulated: npu-ledger ")
    assert toolchain_label(None) == "unrecorded"


def test_toolchain_changes_name_each_key_that_moved_and_an_unrecorded_row_counts_as_changed():
    assert toolchain_changes(OLD, NEW) == ["emulated_numerics: emulated-npu2/0 -> emulated-npu2/1"]
    assert toolchain_changes(NEW, NEW) == []
    assert toolchain_changes({}, NEW)[0].startswith("no toolchain recorded")


def test_a_declared_stand_in_fault_fails_only_its_kernel_and_shape():
    fault = StandinFault.parse("rope:head_dim=128")
    assert fault.matches("rope", {"rows": 4, "head_dim": 128}) and not fault.matches("rope", {"rows": 4, "head_dim": 64})
    bad = run_kernel("rope", {"rows": 64, "head_dim": 128}, executor=FaultyEmulated("rope"))
    good = run_kernel("rope", {"rows": 64, "head_dim": 128})
    assert good.verdict == "PASS" and bad.verdict == "FAIL" and FAULT_GAIN > 1
    with pytest.raises(StandinError, match="expected KERNEL"):
        StandinFault.parse("rope:head_dim")


def test_the_history_has_one_row_per_toolchain_with_figures_phase1_and_verify_status():
    events = record([(S, _row(OLD)), (S, _perf(OLD, 0.120, 40.0)), (S, _gate(True)),
                     (S, _row(NEW, "FAIL")), (S, _gate(False)),
                     (S, BlockerRaised(phase=7, reason="reverify regression: Phase 1 rope"))])
    rows = fold_history(events)
    assert [r.label for r in rows] == [toolchain_label(OLD), toolchain_label(NEW)]
    assert rows[0].ttft_s == 0.120 and rows[0].gates_passed == rows[0].gates == 1 and not rows[0].blockers
    assert rows[1].kernels and not any(rows[1].kernels.values()) and rows[1].blockers
    files = project_history(events, "m")
    text = files[FILE_MD].decode()
    assert "emulated-npu2/0" in text and "120.00" in text and "reverify regression" in text
    assert files[FILE_PNG][:8] == b"\x89PNG\r\n\x1a\n"
    assert project_history(events, "m") == files  # rebuilt: the same bytes
