"""`ledger skills export`: SKILL.md files generated from the lifecycle and npu_kernels/thresholds.py."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from click.testing import CliRunner

from handlers.bootstrap import configure_logging
from handlers.cli import cli
from npu_kernels import thresholds
from statemachine.phases import Phase


def _front_matter(text: str) -> tuple[dict, str]:
    """(front matter, body) of a SKILL.md as mlir-air writes them: `---`, YAML, `---`, markdown."""
    assert text.startswith("---\n"), text[:40]
    head, sep, body = text[4:].partition("\n---\n")
    assert sep, "no closing --- line"
    return yaml.safe_load(head), body


def export(tmp_path, out):
    """`ledger --workspace TMP/ws skills export OUT` through the click CLI in this process."""
    try:
        return CliRunner().invoke(cli, ["--workspace", str(tmp_path / "ws"), "skills", "export", str(out)],
                                  env={"LEDGER_DB": None, "LEDGER_HOME": None})
    finally:
        configure_logging(0)  # the command pointed structlog at the runner's stderr, which is closed now


@pytest.fixture
def exported(tmp_path):
    result = export(tmp_path, tmp_path / "out")
    assert result.exit_code == 0, result.output
    return tmp_path / "out"


def test_every_generated_skill_parses_as_front_matter_and_body(exported):
    folders = sorted(p.name for p in (exported / ".claude" / "skills").iterdir())
    assert "deploy-new-llm" in folders and len(folders) == 1 + len(Phase)
    for name in folders:
        front, body = _front_matter((exported / ".claude" / "skills" / name / "SKILL.md").read_text(encoding="utf-8"))
        assert set(front) == {"name", "description"} and front["name"] == name
        assert isinstance(front["description"], str) and "\n" not in front["description"].strip()
        assert "## Purpose" in body and "## Workflow" in body
    for phase in Phase:
        skill = next(f for f in folders if f.startswith(f"phase-{int(phase)}-"))
        body = (exported / ".claude" / "skills" / skill / "SKILL.md").read_text(encoding="utf-8")
        assert f"## Phase {int(phase)} PASS criteria (HARD GATES)" in body and f"pass_phase_{int(phase)}" in body


def test_phase_3_states_the_token_gate_thresholds_of_kernels_thresholds(exported):
    (skill,) = (exported / ".claude" / "skills").glob("phase-3-*/SKILL.md")
    text = skill.read_text(encoding="utf-8")
    for name in ("TOKEN_GATE_TOP_K", "TOKEN_GATE_STEPS", "TF_KL_MAX", "TF_KL_MEAN", "TF_PPL_RATIO_MAX"):
        assert f"`{name}` = {getattr(thresholds, name)!r}" in text, name
    assert f"top-{thresholds.TOKEN_GATE_TOP_K}" in text and "gate_3_token_gate_ok" in text


def test_the_mcp_json_registers_the_server_for_the_workspace_and_keeps_other_servers(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    result = export(tmp_path, out)
    assert result.exit_code == 0, result.output
    servers = json.loads((out / ".mcp.json").read_text())["mcpServers"]
    assert servers["other"] == {"command": "x"}
    # the interpreter that exported (a bare `ledger` is not on an agent's PATH: it lives in the venv's bin/)
    assert servers["npu-ledger"] == {"command": sys.executable,
                                     "args": ["-m", "handlers.cli", "--workspace", str(tmp_path / "ws"), "mcp"]}


def test_a_skill_the_export_did_not_write_is_refused_and_nothing_is_written(tmp_path):
    theirs = tmp_path / "out" / ".claude" / "skills" / "deploy-new-llm" / "SKILL.md"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("---\nname: deploy-new-llm\ndescription: mlir-air's own\n---\n\n## Purpose\n")
    result = export(tmp_path, tmp_path / "out")
    assert result.exit_code == 1 and "was not written by `ledger skills export`" in result.output
    assert theirs.read_text().endswith("## Purpose\n")
    assert sorted(p.name for p in theirs.parents[1].iterdir()) == ["deploy-new-llm"]
    assert not (tmp_path / "out" / ".mcp.json").exists()
