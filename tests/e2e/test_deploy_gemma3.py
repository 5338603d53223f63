"""Gemma3's text decoder deploys through its description (issue #36): the tiny Gemma3 (tests.models: a sliding layer
with a 32-position window - shorter than the Phase 0/2 prompt, than one of the two token-gate prompts and than every
gate's context with its 32 decoded tokens, so the window matters - and a global one, head_dim 256,
QK-norm, the four norms with the 1+w fold, GELU-tanh GLU, the embedding scale, dual-theta RoPE) reaches deployed on
the emulated executor with an independent-evaluation PASS, and `ledger verify-model --inject window_ignored` is
caught."""

from __future__ import annotations

import pytest

from tests.e2e.cli import ledger, ledger_json
from tests.e2e.workspaces import deployed_workspace


@pytest.fixture(scope="module")
def gemma3_workspace(tiny_gemma3, tmp_path_factory):
    return deployed_workspace(tmp_path_factory, tiny_gemma3, "tg")


def test_a_tiny_gemma3_reaches_deployed_with_an_independent_evaluation_pass(gemma3_workspace, tiny_gemma3):
    status = ledger_json(gemma3_workspace, "status", "tg")
    assert status["status"] == "deployed" and status["evaluation"] == "PASS", status
    events = ledger_json(gemma3_workspace, "history", "tg")
    described = next(e for e in events if e["type"] == "ConfigResolved")["payload"]["description"]
    assert [x["window"] for x in described["layers"]] == [32, None]
    assert described["mlp"] == "gelu_tanh_glu" and described["norms"] == "sandwich" and described["norm_offset"] == 1.0
    from npu_kernels.model.hf_reference import load_tokenizer

    gates = [e["payload"] for e in events if e["type"] == "TokenGateChecked"]
    tokenizer = load_tokenizer(tiny_gemma3)
    lengths = [len(tokenizer(g["prompt"])["input_ids"]) for g in gates]
    # the window binds: one gate prompt's prefill outruns it, and every gate's context (prompt + decoded tokens)
    assert gates and max(lengths) > 32 and all(n + g["n_tokens"] > 32 for n, g in zip(lengths, gates))


def test_the_gemma3_plan_names_the_window_and_runs_the_gelu_kernel(gemma3_workspace):
    rows = ledger_json(gemma3_workspace, "plan", "tg")
    rows = rows["rows"] if isinstance(rows, dict) else rows
    attention = {r["role"]: r["shape"] for r in rows if r["kernel"] == "flash_attention"}
    assert attention["attention (sliding window 32, 1 layers)"]["window"] == 32
    assert "window" not in attention["attention (global, 1 layers)"]
    assert any(r["kernel"] == "gelu" for r in rows) and not any(r["kernel"] == "silu_mul" for r in rows)
    assert all(r["tile"]["tile"]["lkp"] == 32 for r in rows if r["kernel"] == "flash_attention")


@pytest.mark.parametrize("fault", ["window_ignored"])  # all four new drills at Phase 2: tests/integration/test_family_drills.py
def test_the_gemma3_drills_are_caught_by_the_token_gate(gemma3_workspace, fault):
    proc = ledger(gemma3_workspace, "verify-model", "tg", "--inject", fault)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # 0: the gate failed on every prompt (caught)
    assert f"[drill] {fault}: the gate failed 2/2 prompts" in proc.stdout, proc.stdout
