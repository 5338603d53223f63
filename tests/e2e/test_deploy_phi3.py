"""A new family is a description, not a fork (issue #36; tests/e2e/test_deploy_gemma3.py for Gemma3): the tiny Phi-3 (tests.models: one layer, fused qkv_proj /
gate_up_proj, partial rotary 0.75, LongRoPE short factors) deploys through Phases 0-7 on the emulated executor with
an independent-evaluation PASS, through the real CLI, and its drills are caught."""

from __future__ import annotations

import pytest

from tests.e2e.cli import ledger, ledger_json
from tests.e2e.workspaces import deployed_workspace


@pytest.fixture(scope="module")
def phi3_workspace(tiny_phi3, tmp_path_factory):
    return deployed_workspace(tmp_path_factory, tiny_phi3, "tphi")


def test_a_tiny_phi3_reaches_deployed_with_an_independent_evaluation_pass(phi3_workspace):
    status = ledger_json(phi3_workspace, "status", "tphi")
    assert status["status"] == "deployed" and status["evaluation"] == "PASS", status
    resolved = [e for e in ledger_json(phi3_workspace, "history", "tphi") if e["type"] == "ConfigResolved"][0]["payload"]
    described = resolved["description"]
    assert resolved["architecture"] == "Phi3ForCausalLM" and described["family"] == "phi3"
    assert described["rotary_dim"] == 48 and described["rope_max_positions"] == 4096
    assert [part for _, part in described["fused"]] == [["wq", "wk", "wv"], ["w_gate", "w_up"]]


def test_the_phi3_plan_rope_rows_carry_the_rotary_width(phi3_workspace):
    rows = ledger_json(phi3_workspace, "plan", "tphi")
    rows = rows["rows"] if isinstance(rows, dict) else rows
    ropes = [r for r in rows if r["kernel"] == "rope"]
    assert ropes and all(r["shape"]["rotary_dim"] == 48 and r["shape"]["head_dim"] == 64 for r in ropes)


@pytest.mark.parametrize("fault", ["rotary_full_width"])  # all four new drills at Phase 2: tests/integration/test_family_drills.py
def test_the_phi3_drills_are_caught_by_the_token_gate(phi3_workspace, fault):
    proc = ledger(phi3_workspace, "verify-model", "tphi", "--inject", fault)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # 0: the gate failed on every prompt (caught)
    assert f"[drill] {fault}: the gate failed 2/2 prompts" in proc.stdout, proc.stdout


def test_a_phi3_whose_longrope_short_range_is_shorter_than_the_compiled_sequence_is_refused_at_init(tmp_path):
    import json
    from pathlib import Path

    raw = json.loads((Path(__file__).parents[1] / "fixtures" / "configs" / "phi-4-mini-instruct.json").read_text())
    raw.update(original_max_position_embeddings=1024)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(raw))
    proc = ledger(tmp_path / "ws", "init", str(tmp_path / "cfg"), "--name", "short")
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "original_max_position_embeddings 1024" in proc.stderr and "long factors" in proc.stderr
    assert "nothing was recorded" in proc.stderr
