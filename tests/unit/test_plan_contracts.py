"""One plan for every executor: Phase 1's plan decides each row's contract (tier, method) once, and the
emulated, torch, fp32 and mlir-air executors run that plan; small-K GEMMs on bf16-out-low, the tier mlir-air's
registry takes where the high-precision atol trips on near-zero references (npu_kernels.thresholds cites the rows)."""

from __future__ import annotations

import pytest

from npu_kernels.model.plan import plan
from npu_kernels.thresholds import GEMM_HIGH_PRECISION_MIN_K
from tests.small_configs import MODELS, model_config, phase1_rows

@pytest.mark.parametrize("model", MODELS, ids=[f"{m[0]}-E{m[1]}-D{m[4]}-V{m[6]}" for m in MODELS])
def test_the_plan_gives_each_row_its_contract_and_the_hardware_path_runs_it(model, monkeypatch, tmp_path):
    """Every runner is handed the planned row itself (its contract included), so no executor can choose another;
    tests/integration/test_phase1_small_models.py checks what the emulated executor records against this plan."""
    config = model_config(*model)
    hardware = phase1_rows(config)
    for kernel, shape, contract, method, tier, _ in hardware:
        if kernel == "gemm":
            small = shape["K"] < GEMM_HIGH_PRECISION_MIN_K
            assert (contract, tier) == (("bf16-out-low", "low") if small else ("bf16-out-high", "high")), shape
            assert method == ("direct" if small else ("fused-cast" if shape["M"] * shape["K"] * shape["N"] >= 4e9
                                                      else "drain"))
        else:
            assert (method, tier) == ("", "") and contract
    assert all(r.plan.legal for r in plan(config, "npu2")), "a legal NPU2 model: every planned tile is legal"
    # what the hardware path runs for each GEMM row: mlir-air's bf16_in_bf16_out harness at the plan's tier
    from npu_kernels.mlir_air.executor import MlirAirExecutor

    monkeypatch.setenv("MLIR_AIR_DIR", str(tmp_path))
    ex = MlirAirExecutor("npu2", lock_path=str(tmp_path / "lock"))
    for kernel, shape, contract, method, tier, tile in hardware:
        if kernel == "gemm":
            _, command, _ = ex.harness_command(kernel, shape, tile, contract)
            if tier == "low":
                assert "HIGH_PRECISION=false" in command and "METHOD=" not in command
            else:
                assert "HIGH_PRECISION=true" in command and f"METHOD={method}" in command


def test_the_small_k_rows_fail_the_high_tier_beyond_the_artifact_and_pass_the_planned_one():
    """The issue's two shapes on the emulated NPU2: high precision trips the atol on near-zero references beyond
    the atol-artifact rule (triage offers the low tier); the plan's tier passes, naming mlir-air's method."""
    from handlers.triage import triage_evidence
    from npu_kernels.numerics.run import run_kernel
    from ledger.events import KernelVerified
    from statemachine.checks import atol_artifact

    for shape, mismatches in (({"M": 2048, "K": 448, "N": 448}, 104), ({"M": 2048, "K": 256, "N": 512}, 1854)):
        high = run_kernel("gemm", shape, contract="bf16-out-high")
        assert high.verdict == "FAIL" and high.mismatches == mismatches
        event = KernelVerified(**high.event_fields(), source="emulated", provenance={"command": "test"})
        assert atol_artifact(event) is None  # beyond the documented artifact: the row cannot pass high
        best = triage_evidence({"kind": "kernel", **event.to_payload()})[0]
        assert best.rule_id == "gemm-small-k-near-zero-atol" and "bf16-out-low" in best.remedy
        row = next(r for r in plan(model_config("qwen2", 448, 7, 1, 64, 896, 1001) if shape["K"] == 448 else
                                   model_config("qwen3", 256, 2, 1, 128, 512, 387)) if r.shape == shape)
        low = run_kernel("gemm", shape, contract=row.contract, tile=dict(row.plan.tile))
        assert (low.verdict, low.mismatches, low.contract, low.method, low.tier) == ("PASS", 0, "bf16-out-low",
                                                                                    row.method, row.tier)


def test_a_real_datapath_fault_at_small_k_is_not_offered_the_low_tier():
    from handlers.triage import triage_evidence

    fault = {"kind": "kernel", "kernel": "gemm", "shape": {"M": 2048, "K": 448, "N": 448}, "contract": "bf16-out-high",
             "mismatches": 90000, "n_elements": 917504, "mismatch_ref_max": 0.9, "mismatch_err_max": 0.4,
             "mean_rel_L1": 0.31, "atol": 1.5e-3, "rtol": 1.6e-2}
    assert "gemm-small-k-near-zero-atol" not in [m.rule_id for m in triage_evidence(fault)]
    big_k = {**fault, "shape": {"M": 2048, "K": 2048, "N": 448}, "mismatches": 3, "mismatch_ref_max": 0.02,
             "mismatch_err_max": 2e-3, "mean_rel_L1": 9.4e-3}
    assert "gemm-small-k-near-zero-atol" not in [m.rule_id for m in triage_evidence(big_k)]
