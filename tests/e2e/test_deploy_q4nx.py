"""A 4-bit deployment end to end (issue #26): `ledger quantize` a tiny model, `ledger init BUNDLE --base`,
`ledger advance` 0 -> 7 on the emulated executor, audit PASS; the evaluation report shows the implementation
(vs the dequantised reference) and the quantisation (vs bf16) apart. One from-scratch deployment for the
whole file (`q4nx_snapshot`, shared by the xdist workers); the drill runs on a copy of it. Not `slow` (that mark is
for the real SmolLM2): `make test-fast` deploys the tiny 4-bit model too (issue #26, "a tiny model in the fast
suite")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.cli import ledger, ledger_json
from tests.e2e.workspaces import copy_workspace, workspace_ledger
from tests import prebuilt


@pytest.fixture(scope="session")
def q4nx_bundle(tmp_path_factory, tiny_llama) -> Path:
    return prebuilt.q4nx_bundle(tmp_path_factory)


@pytest.fixture(scope="session")
def q4nx_snapshot(tmp_path_factory, tiny_llama, q4nx_bundle) -> Path:
    """A workspace where `tq` (the tiny Llama's Q4NX bundle on its bf16 base) is deployed (never hand it out)."""
    return prebuilt.q4nx_snapshot(tmp_path_factory)


def _events(ws: Path, type_: str) -> list[dict]:
    return [e.payload for e in workspace_ledger(ws).read_stream("deployment:tq") if e.type == type_]


def test_a_quantized_tiny_model_deploys_to_deployed_and_the_audit_passes(q4nx_snapshot, tmp_path):
    ws = copy_workspace(q4nx_snapshot, tmp_path / "ws")
    assert ledger_json(ws, "status", "tq")["status"] == "deployed"
    [read] = _events(ws, "QuantisedBundleRead")
    assert read["layout"] == "llama" and read["padded"] == [] and len(read["dequantised_sha256"]) == 64
    [budget] = _events(ws, "QuantisationBudgetMeasured")
    assert budget["passed"] and budget["n_prompts"] == 16 and budget["kl_mean"] > 0  # 4 bits do move the model
    [evaluation] = _events(ws, "EvaluationRecorded")
    assert evaluation["verdict"] == "PASS", evaluation["findings"]
    report = (ws / "llms" / "tq" / "docs" / "evaluation_report.md").read_text()
    assert "vs dequantised; quantisation: KL mean" in report and "| implementation |" in report
    assert f"{budget['kl_mean']:.4f} vs bf16" in report


def test_the_wrong_group_drill_fails_every_instruct_prompt_while_the_budget_stays_green(q4nx_snapshot, tmp_path):
    ws = copy_workspace(q4nx_snapshot, tmp_path / "ws")
    proc = ledger(ws, "verify-model", "tq", "--full", "--inject", "q4nx_group_scale_shift", "--json")
    drill = json.loads(proc.stdout)
    prompts = drill["prompts"]
    assert len(prompts) == 8 and all(p["prompt"] for p in prompts)
    assert drill["caught"] == 8 and not any(p["passed"] for p in prompts)  # the Phase 3 gate, every instruct prompt
    assert all(p["pipeline"]["faults"] == ["q4nx_group_scale_shift"] for p in prompts)
    [budget] = _events(ws, "QuantisationBudgetMeasured")
    assert budget["passed"] and not budget["problems"]  # the quantisation itself is fine: the implementation is not


def test_init_refuses_a_bundle_the_config_disagrees_with_a_wrong_scale_dtype_and_fp16(tiny_llama, q4nx_bundle, tmp_path):
    base = tmp_path / "wider"
    shutil.copytree(tiny_llama, base)
    cfg = json.loads((base / "config.json").read_text())
    cfg["intermediate_size"] *= 2
    (base / "config.json").write_text(json.dumps(cfg))
    ws = tmp_path / "ws"
    cases = {"shapes": ("init", str(q4nx_bundle), "--base", str(base), "--name", "a"),
             "fp16": ("init", str(tiny_llama), "--dtype", "fp16", "--name", "b"),
             "no base": ("init", str(q4nx_bundle), "--dtype", "q4nx", "--name", "c")}
    said = {}
    for what, args in cases.items():
        proc = ledger(ws, *args)
        assert proc.returncode == 1, what
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: "), (what, proc.stderr)
        said[what] = proc.stderr
    assert "gate_proj" in said["shapes"] and "fp16 is not implemented" in said["fp16"] and "--base" in said["no base"]
    assert not (ws / ".ledger" / "ledger.db").exists() or not workspace_ledger(ws).streams("deployment:")
