"""CLI commands for coding agents: `ledger mcp` (the MCP server on stdio) and `ledger skills export DIR`."""

from __future__ import annotations

from pathlib import Path

import click

from handlers.bootstrap import App
from handlers.mcp.skills import export


@click.command("mcp")
@click.option("--allow-dir", "allow_dirs", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="a folder besides the workspace whose files the tools may read (model folders, transcripts); "
                   "repeatable")
@click.pass_obj
def mcp_cmd(app: App, allow_dirs: tuple[str, ...]) -> None:
    """Serve the ledger to a coding agent over MCP on stdin/stdout (tools, progress, resources).

    A tool that takes a path reads it only inside the workspace or an --allow-dir folder. Register it in the
    agent's .mcp.json (`ledger skills export DIR` writes the entry); README "For agents"."""
    # here, not at the top: the mcp SDK (starlette, pydantic models, ...) adds ~1 s to every CLI start-up
    from handlers.mcp.server import serve

    serve(app.workspace, app.db_url, app.verbosity, tuple(Path(d) for d in allow_dirs))


@click.group("skills")
def skills_group() -> None:
    """Agent skills (SKILL.md) generated from the lifecycle table and npu_kernels/thresholds.py."""


@skills_group.command("export")
@click.argument("directory", type=click.Path(file_okay=False))
@click.pass_obj
def export_cmd(app: App, directory: str) -> None:
    """Write DIRECTORY/.claude/skills/<skill>/SKILL.md (deploy-new-llm and one per phase) and register
    `ledger mcp` for this workspace in DIRECTORY/.mcp.json (other servers there are kept)."""
    try:
        written = export(Path(directory), app.workspace, app.db_url)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    for path in written:
        click.echo(path)


commands = [mcp_cmd, skills_group]
