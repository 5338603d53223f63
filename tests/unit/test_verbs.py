"""The verb table (handlers.verbs): every CLI verb has its MCP tool or a stated exclusion, and a row's two faces
are made from one request: the click command's parameters and the tool's input schema name the same fields, and
the same call through both gives the same result."""

from __future__ import annotations

import json
import uuid

import click

from handlers.cli import cli
from handlers.mcp.schemas import INPUTS
from handlers.mcp.server import LedgerServer
from handlers.mcp.tools import TOOLS
from handlers.verbs import NOT_MIGRATED, NOT_TOOLS, VERBS, input_schema
from ledger.memory import forget_store
from tests.e2e.cli import in_process


def cli_verbs(group: click.Group = cli, prefix: str = "") -> dict[str, click.Command]:
    """Every command of the CLI by its words ("registry lookup"), hidden ones too."""
    out = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out.update(cli_verbs(command, f"{prefix}{name} "))
        else:
            out[prefix + name] = command
    return out


def tool_name(verb: str) -> str:
    return verb.replace(" ", "_").replace("-", "_")


def test_every_cli_verb_has_its_tool_or_a_stated_exclusion_and_every_tool_its_verb():
    verbs = cli_verbs()
    without = {v for v in verbs if tool_name(v) not in TOOLS}
    assert without == set(NOT_TOOLS), (without - set(NOT_TOOLS), set(NOT_TOOLS) - without)
    assert all(reason.strip() for reason in NOT_TOOLS.values())
    assert set(TOOLS) == {tool_name(v) for v in verbs} - {tool_name(v) for v in NOT_TOOLS}


def test_every_verb_is_a_row_or_says_why_not():
    rows = {v.name for v in VERBS}
    by_hand = set(cli_verbs()) - rows - (set(NOT_TOOLS) - set(NOT_MIGRATED))
    assert by_hand == set(NOT_MIGRATED), (by_hand - set(NOT_MIGRATED), set(NOT_MIGRATED) - by_hand)
    assert all(why.strip() for why in NOT_MIGRATED.values())


def test_a_rows_click_parameters_and_tool_schema_are_one_request():
    verbs = cli_verbs()
    for verb in VERBS:
        command = verbs[verb.name]
        fields = {f.name for f in verb.fields()}
        cli_fields = {f.name for f in verb.fields() if not f.metadata["tool_only"]}
        tool_fields = {f.name for f in verb.fields() if not f.metadata["cli_only"]}
        assert {p.name for p in command.params} == cli_fields | {"as_json"}, verb.name
        assert set(INPUTS[verb.tool]["properties"]) == tool_fields and INPUTS[verb.tool] == input_schema(verb)
        assert TOOLS[verb.tool].writes == verb.writes and TOOLS[verb.tool].description == verb.description
        required = {p.name for p in command.params if p.required}
        differing = {f.name for f in verb.fields() if f.metadata["required"] is not None}  # stated per field
        assert required - differing == (set(INPUTS[verb.tool]["required"]) & cli_fields) - differing, verb.name
        assert fields == cli_fields | tool_fields, verb.name


def test_a_rows_required_option_is_required_by_click_and_its_bounds_are_the_tools(tmp_path):
    missing = in_process(tmp_path, "resume", "n")
    assert missing.returncode == 2 and missing.stderr.splitlines()[-1] == "error: Missing option '--note'."
    assert "--note TEXT  what the human fixed  [required]" in in_process(tmp_path, "resume", "--help").stdout
    out_of_range = in_process(tmp_path, "lesson", "n", "x", "--phase", "8")
    assert out_of_range.returncode == 2 and "8 is not in the range 0<=x<=7" in out_of_range.stderr


def test_the_same_lesson_through_the_cli_and_the_tool_is_the_same_result_and_refreshes_the_same_way(
        tiny_llama, tmp_path):
    db = f"memory://{uuid.uuid4().hex}"
    try:
        assert in_process(tmp_path, "init", str(tiny_llama), "--name", "t", db=db).returncode == 0
        by_cli = in_process(tmp_path, "lesson", "t", "tiles of 64 fit", "--phase", "1", "--json", db=db)
        assert by_cli.returncode == 0, by_cli.stderr
        by_tool = LedgerServer(tmp_path, db).call("lesson", {"name": "t", "text": "tiles of 64 fit", "phase": 1})
        assert not by_tool.is_error
        first, second = json.loads(by_cli.stdout), by_tool.structured_content
        assert (first["name"], second["name"], second["seq"]) == ("t", "t", first["seq"] + 1)
        lessons = (tmp_path / "llms" / "t" / "docs" / "development_progress" / "LESSONS.md").read_text()
        assert lessons.count("tiles of 64 fit") == 2  # both faces took the post-commit projection step
        text = in_process(tmp_path, "lesson", "t", "third", db=db)
        assert text.stdout == f"lesson recorded at seq {second['seq'] + 1}\n"
        bad = in_process(tmp_path, "lesson", "t", "x", "--phase", "9", db=db)
        refused = LedgerServer(tmp_path, db).call("lesson", {"name": "t", "text": "x", "phase": 9})
        assert bad.returncode == 2 and "--phase" in bad.stderr and refused.is_error
        missing = in_process(tmp_path, "lesson", "nope", "x", db=db)
        by_tool = LedgerServer(tmp_path, db).call("lesson", {"name": "nope", "text": "x"})
        assert missing.returncode == 1 and missing.stderr.splitlines()[-1] == by_tool.content[0].text
    finally:
        forget_store(db)


def test_a_path_argument_is_confined_for_the_tool_and_taken_as_given_by_the_cli(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    db = f"memory://{uuid.uuid4().hex}"
    try:
        server = LedgerServer(ws, db)
        outside = server.call("twin", {"directory": str(tmp_path / "out")})
        assert outside.is_error and outside.content[0].text.startswith("error: ") and not (tmp_path / "out").exists()
        inside = server.call("twin", {"directory": "t"})  # relative: in the workspace
        assert not inside.is_error and (ws / "t" / "programming_examples").is_dir(), inside.content[0].text
        by_cli = in_process(ws, "twin", str(tmp_path / "out"), "--json", db=db)
        assert by_cli.returncode == 0 and json.loads(by_cli.stdout)["dir"] == str(tmp_path / "out")
    finally:
        forget_store(db)
