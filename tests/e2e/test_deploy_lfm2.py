"""LFM2, the hybrid (issue #37): the tiny LFM2 (tests.models: layers conv, attention, conv) reaches deployed on the
emulated executor with an independent-evaluation PASS; its plan runs the conv1d and eltwise_mul rows in Phase 1,
Phase 2's block gate runs a short-convolution block (layer 0) and an attention block (layer 1) and checks the carried
convolution state against HF's conv cache (ConvStateChecked), and a state that is not carried into the decode -
invisible to the block gate - is caught by the token gate. One deployment serves
every assertion (tests/integration/test_lfm2_drills.py: which check catches each drill)."""

from __future__ import annotations

import pytest

from tests.e2e.cli import ledger, ledger_json
from tests.e2e.workspaces import deployed_workspace


@pytest.fixture(scope="module")
def lfm2_workspace(tiny_lfm2, tmp_path_factory):
    return deployed_workspace(tmp_path_factory, tiny_lfm2, "lf")


def test_a_tiny_lfm2_reaches_deployed_with_an_independent_evaluation_pass(lfm2_workspace):
    status = ledger_json(lfm2_workspace, "status", "lf")
    assert status["status"] == "deployed" and status["evaluation"] == "PASS", status
    events = ledger_json(lfm2_workspace, "history", "lf")
    described = next(e for e in events if e["type"] == "ConfigResolved")["payload"]["description"]
    assert [x["mixer"] for x in described["layers"]] == ["conv", "full", "conv"]
    assert described["conv_taps"] == 3 and described["final_norm"] == "embedding_norm.weight"
    rows = [e["payload"] for e in events if e["type"] == "KernelVerified"]
    for kernel in ("conv1d", "eltwise_mul"):
        mine = [r for r in rows if r["kernel"] == kernel]
        assert len(mine) >= 2 and all(r["verdict"] == "PASS" for r in mine), kernel  # a prefill and a decode row
    assert any(r["shape"]["seq"] > 1 for r in rows if r["kernel"] == "conv1d")
    blocks = [e["payload"] for e in events if e["type"] == "BlockValidated"]
    assert [(b["layer"], b["passed"]) for b in blocks] == [(1, True), (0, True)]
    state = [e["payload"] for e in events if e["type"] == "ConvStateChecked"]
    assert len(state) == 1 and state[0]["passed"] and [x["layer"] for x in state[0]["layers"]] == [0, 2]


def test_the_lfm2_plan_lists_the_short_convolution_rows(lfm2_workspace):
    rows = ledger_json(lfm2_workspace, "plan", "lf")
    rows = rows["rows"] if isinstance(rows, dict) else rows
    conv = {(r["phase"], r["kernel"]): r["shape"] for r in rows if r["kernel"] in ("conv1d", "eltwise_mul")}
    assert conv[("decode", "conv1d")] == {"seq": 1, "C": 512}
    assert conv[("prefill", "conv1d")]["C"] == 512 and ("decode", "eltwise_mul") in conv
    assert any(r["kernel"] == "gemm" and r["shape"]["N"] == 3 * 512 and "conv in" in r["role"] for r in rows)


def test_a_state_not_carried_into_the_decode_is_caught_by_the_token_gate(lfm2_workspace):
    proc = ledger(lfm2_workspace, "verify-model", "lf", "--inject", "conv_state_dropped")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # 0: the gate failed on every prompt (caught)
    assert "[drill] conv_state_dropped: the gate failed 2/2 prompts" in proc.stdout, proc.stdout
