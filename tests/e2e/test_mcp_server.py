"""`ledger mcp` as an agent meets it: a subprocess spoken to with the `mcp` SDK's own stdio client.

The client validates every structured result against the tool's advertised output schema, so each call here
also checks that the result has the schema `handlers.results` declares. Two servers: the one deployment
advanced from the Phase 3 snapshot through Phase 6 and audited (Phase 7) to `deployed`, with progress, status,
resources and a bad name, and two
clients racing one deployment through Phase 0 (the cheapest gate).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from handlers.mcp.tools import TOOLS
from tests.e2e.cli import ledger_json, read_in_process

CONFIG = Path(__file__).parents[1] / "fixtures" / "configs" / "smollm2-135m-instruct.json"


@asynccontextmanager
async def session(workspace: Path, *allow: Path):
    """An initialized client session on `ledger --workspace WORKSPACE mcp --allow-dir ...` (a fresh interpreter)."""
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_DB"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    allowed = [a for d in allow for a in ("--allow-dir", str(d))]
    params = StdioServerParameters(command=sys.executable, env=env,
                                   args=["-m", "handlers.cli", "--workspace", str(workspace), "mcp", *allowed])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            await s.list_tools()  # the client validates results against the schemas it lists
            yield s


def text_of(result) -> str:
    return result.content[0].text


def test_an_agent_plans_predicts_advances_through_the_gates_to_deployed_with_progress(tiny_at):
    ws = tiny_at(3)
    progress: dict[str, list[tuple[float, str]]] = {"advance": [], "audit": []}

    def on_progress(tool):
        async def record(value, total, message):
            progress[tool].append((value, message))
        return record

    async def agent():
        async with session(ws, CONFIG.parent) as s:
            tools = (await s.list_tools()).tools
            assert {t.name for t in tools} == set(TOOLS)
            for t in tools:
                assert t.input_schema["type"] == "object" and t.output_schema["type"] == "object", t.name
            out = {"plan": await s.call_tool("plan", {"target": str(CONFIG)}),
                   "predict": await s.call_tool("predict", {"target": str(CONFIG), "seq": 512}),
                   "bad": await s.call_tool("advance", {"name": "nope"}),
                   "advance": await s.call_tool("advance", {"name": "tiny", "until": 6},
                                                progress_callback=on_progress("advance"))}
            # at phase7 the audit is the Phase 7 gate: the evaluator in a fresh process, then the state machine
            out["audit"] = await s.call_tool("audit", {"name": "tiny"}, progress_callback=on_progress("audit"))
            out["status"] = await s.call_tool("status", {"name": "tiny"})
            pages = (await s.list_resources()).resources
            report = next(p for p in pages if p.name == "llms/tiny/docs/evaluation_report.md")
            out["report"] = (await s.read_resource(report.uri)).contents[0].text
            return out

    out = anyio.run(agent)
    assert not any(out[k].is_error for k in ("plan", "predict", "advance", "status", "audit")), out

    # plan and predict: the CLI's --json, value for value (text and structured content)
    cli_plan = ledger_json(ws, "plan", str(CONFIG))
    assert out["plan"].structured_content == {"items": cli_plan} and json.loads(text_of(out["plan"])) == cli_plan
    assert out["predict"].structured_content == ledger_json(ws, "predict", str(CONFIG), "--seq", "512")

    # a bad deployment name: a tool error carrying the CLI's one line, no traceback
    cli = read_in_process(ws, "status", "nope")
    assert out["bad"].is_error and text_of(out["bad"]) == cli.stderr.strip().splitlines()[-1]
    assert text_of(out["bad"]).startswith("error: no deployment named 'nope'") and "Traceback" not in text_of(out["bad"])

    # advance: Phases 4-6 through their gates, with the terminal's progress messages as notifications
    ran = out["advance"].structured_content["ran"]
    assert [(r["phase"], r["passed"]) for r in ran] == [(4, True), (5, True), (6, True)]
    assert out["advance"].structured_content["status"] == "phase7"
    messages = [m for _, m in progress["advance"]]
    assert [v for v, _ in progress["advance"]] == list(range(1, len(messages) + 1))
    for phase, title in ((4, "prefill optimisation"), (5, "decode optimisation"), (6, "finalize")):
        assert f"phase {phase} ({title}), attempt 1" in messages
    assert any(m.startswith("[1/2] token gate (phase6)") for m in messages), messages

    # the audit (Phase 7) passes and is recorded; status says deployed, as the CLI's; the report is the projection's
    audit = out["audit"].structured_content
    assert audit["verdict"] in ("PASS", "PASS-with-warnings") and audit["recorded"] and audit["status"] == "deployed"
    audit_messages = [m for _, m in progress["audit"]]
    assert "phase 7 (independent evaluation), attempt 1" in audit_messages
    # the evaluator's own progress, from its fresh process (relayed from its stderr): a message per step and per row
    assert any(m.startswith("verifying the hash chain and replaying") for m in audit_messages), audit_messages
    assert any("re-measuring Phase 1 row seq" in m for m in audit_messages), audit_messages
    assert out["status"].structured_content == ledger_json(ws, "status", "tiny")
    assert out["status"].structured_content["status"] == "deployed"
    assert out["report"] == (ws / "llms" / "tiny" / "docs" / "evaluation_report.md").read_text(encoding="utf-8")


def test_two_agents_advancing_one_deployment_at_once_one_wins_and_the_chain_is_intact(tmp_path, tiny_llama):
    async def race():
        async with session(tmp_path, tiny_llama) as a, session(tmp_path, tiny_llama) as b:
            created = await a.call_tool("init", {"model": str(tiny_llama), "name": "tiny"})
            assert not created.is_error, text_of(created)
            results = [None, None]

            async def advance(i, s):
                results[i] = await s.call_tool("advance", {"name": "tiny", "until": 0})

            async with anyio.create_task_group() as tg:
                tg.start_soon(advance, 0, a)
                tg.start_soon(advance, 1, b)
            return results, await b.call_tool("verify", {})

    results, verified = anyio.run(race)
    won = [r for r in results if not r.is_error and r.structured_content["ran"]]
    assert len(won) == 1 and won[0].structured_content["ran"][0]["passed"], [text_of(r) for r in results]
    lost = [r for r in results if r is not won[0]]
    # the loser raced and was refused, or started after the winner had finished (nothing left to do)
    assert all(r.is_error and text_of(r) == "error: someone else advanced tiny meanwhile; nothing was written"
               or not r.is_error and r.structured_content["ran"] == [] for r in lost), [text_of(r) for r in lost]
    events = ledger_json(tmp_path, "log", "--stream", "deployment:tiny")
    assert [e["type"] for e in events].count("PhaseStarted") == 1
    assert [e["type"] for e in events].count("PhasePassed") == 1
    assert verified.structured_content["ok"] and read_in_process(tmp_path, "verify").returncode == 0


# verbs of the README's CLI block that have no MCP tool, each with why (every other verb has its tool)
NOT_TOOLS = {
    "db setup": "an administrator's one-time act with superuser rights on the database, never an agent's",
    "mcp": "the server itself",
    "skills export": "writes the agent's own registration (.mcp.json) and skills: a person runs it once",
    "worker": "a long-running process, one per NPU host: not a call that returns",
}


def readme_verbs() -> set[str]:
    """The verbs of the README's "## The CLI" sh block: every `ledger VERB` (or `| VERB` continuing a line), a
    group's verb with its sub-command, as click knows them (`handlers.cli.cli`)."""
    import re

    import click

    from handlers.cli import cli

    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    block = text.split("\n## The CLI\n", 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    verbs = set()
    for line in block.splitlines():
        for m in re.finditer(r"(?:\bledger\s+|\|\s+(?:ledger\s+)?)([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?", line.split("#", 1)[0]):
            command = cli.commands.get(m.group(1))
            if isinstance(command, click.Group):
                assert m.group(2) in command.commands, line
                verbs.add(f"{m.group(1)} {m.group(2)}")
            elif command is not None:
                verbs.add(m.group(1))
    return verbs


def test_the_exported_mcp_json_runs_and_lists_a_tool_for_each_readme_verb_and_predict_curve_is_the_cli_s(tmp_path):
    from tests.e2e.cli import in_process

    ws, out = tmp_path / "ws", tmp_path / "agent"
    ws.mkdir()
    assert in_process(ws, "skills", "export", str(out)).returncode == 0
    entry = json.loads((out / ".mcp.json").read_text())["mcpServers"]["npu-ledger"]
    assert Path(entry["command"]).is_absolute() and entry["args"][:2] == ["-m", "handlers.cli"]
    png = str((ws / "curve.png").resolve())
    env = {**{k: v for k, v in os.environ.items() if k != "LEDGER_DB"}, "HF_HUB_OFFLINE": "1"}

    async def agent():
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                tools = {t.name for t in (await s.list_tools()).tools}
                curve = await s.call_tool("predict", {"target": "tiny-config.json", "curve": True, "png": png})
                missing = await s.call_tool("predict", {"target": "/nope/config.json"})
                return tools, curve, missing

    (ws / "tiny-config.json").write_text(CONFIG.read_text())
    tools, curve, missing = anyio.run(agent)
    verbs = readme_verbs()
    assert {"predict", "plan", "quantize", "doctor", "scaffold", "perf import-history", "registry lookup"} <= verbs
    assert set(NOT_TOOLS) <= verbs, set(NOT_TOOLS) - verbs
    assert {v.replace(" ", "_").replace("-", "_") for v in verbs - set(NOT_TOOLS)} <= tools
    assert not curve.is_error, text_of(curve)
    cli = in_process(ws, "predict", str(ws / "tiny-config.json"), "--curve", "--png", png, "--json")
    assert cli.returncode == 0 and curve.structured_content == json.loads(cli.stdout)
    assert missing.is_error and text_of(missing) == (
        "error: /nope/config.json: no such config.json or HF folder (nor a deployment of that name)")
