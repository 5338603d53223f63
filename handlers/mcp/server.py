"""`ledger mcp`: the tool table (`handlers.mcp.tools`) and the projections (`handlers.mcp.resources`) served
over MCP on stdio, with the `mcp` SDK's low-level server (mcp>=2.3: `mcp.server.Server` with `on_*` handlers).

A call: the arguments are checked against the tool's input schema (a bad one is a tool error naming the
argument), defaults filled in, and the tool runs in a worker thread on an `App` of its own (its own database
connection; the workspace and ledger URL are `ledger mcp`'s). Its progress messages become
`notifications/progress` for the call (progress = the number of messages so far, message = the text the
terminal shows). A long tool (`advance`, `audit`, `verify_model`, `diagnose`, `kernel_run`) waits for the one
before it in this server; two servers (two agents) on one deployment race as two CLIs do: the ledger's
expected-version append lets one win, and the other's tool error is "someone else advanced ...".

The result: the CLI's `--json` text as text content and the same value as structured content (an array wrapped
as `{"items": ...}`). Any exception is a tool error carrying the CLI's one line (`tools.error_line`); its
traceback goes to stderr only with `ledger -v mcp`, never to the client.

Imports the `mcp` SDK (heavy: `handlers.cli.agents` imports this module only when `ledger mcp` starts).
"""

from __future__ import annotations

import json
import traceback
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import jsonschema
import mcp.types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from handlers.bootstrap import App
from handlers.mcp import resources
from handlers.mcp.schemas import INPUTS, output_schema, structured, with_defaults
from handlers.mcp.tools import TOOLS, Call, error_line, log
from handlers.narrate import reporting

INSTRUCTIONS = (
    "npu-ledger deploys decoder-only LLMs onto AMD NPU2 through recorded phase gates 0-7. Start with `status`; "
    "move a deployment on only with `advance` (the gates decide, nothing records a verdict by hand); after a "
    "blocker a human fixes the cause and you `resume` with a note. Results are the CLI's --json; the "
    "projections (registry, each deployment's docs and evaluation report) are resources."
)


def tool_list() -> list[types.Tool]:
    """Every tool with its input and output schema and its read-only / idempotence hints."""
    return [types.Tool(name=t.name, description=t.description, input_schema=INPUTS[t.name],
                       output_schema=output_schema(t.name),
                       annotations=types.ToolAnnotations(read_only_hint=not t.writes, destructive_hint=False,
                                                         idempotent_hint=not t.writes))
            for t in TOOLS.values()]


def _failure(line: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=line)], is_error=True)


class LedgerServer:
    """The MCP server of one workspace and ledger URL."""

    def __init__(self, workspace: Path, db_url: str, verbosity: int = 0, allowed: tuple[Path, ...] = ()) -> None:
        self.workspace, self.db_url, self.verbosity = workspace, db_url, verbosity
        self.allowed = tuple(allowed)  # folders besides the workspace a path argument may lie in (--allow-dir)
        self.long_lock = anyio.Lock()
        self.server = Server("npu-ledger", instructions=INSTRUCTIONS, on_list_tools=self._list_tools,
                             on_call_tool=self._call_tool, on_list_resources=self._list_resources,
                             on_read_resource=self._read_resource)

    def _app(self) -> App:
        return App(workspace=self.workspace, db_url=self.db_url, verbosity=self.verbosity)

    async def _list_tools(self, ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def _call_tool(self, ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        sent = 0

        def progress(message: str) -> None:  # called from the worker thread
            nonlocal sent
            sent += 1
            try:
                anyio.from_thread.run(partial(ctx.session.report_progress, sent, None, message))
            except Exception as e:  # noqa: BLE001 - a client gone away must not fail the gate under way
                log.info("progress not sent", tool=params.name, error=error_line(e))

        tool = TOOLS.get(params.name)
        async with self.long_lock if tool is not None and tool.long else nullcontext():
            return await anyio.to_thread.run_sync(self.call, params.name, params.arguments, progress)

    def call(self, name: str, arguments: dict[str, Any] | None, progress=lambda message: None) -> types.CallToolResult:
        """One tool call, in this thread: the arguments checked against the input schema and completed with its
        defaults, the tool run on an App of its own, the result or the CLI's one-line error."""
        tool = TOOLS.get(name)
        if tool is None:
            return _failure(f"error: no tool named {name!r}; tools: {', '.join(TOOLS)}")
        try:
            jsonschema.validate(arguments or {}, INPUTS[name])
        except jsonschema.ValidationError as e:
            where = "/".join(map(str, e.absolute_path))
            return _failure(f"error: {name}: bad argument{' ' + where if where else ''}: {e.message}")
        app = self._app()
        try:
            with reporting(progress):
                value = tool.run(Call(app, with_defaults(name, arguments), self.allowed))
        except Exception as e:  # noqa: BLE001 - the tool boundary: one line, as the CLI's
            if self.verbosity:
                traceback.print_exc()
            log.info("tool failed", tool=name, error=error_line(e))
            return _failure(error_line(e))
        finally:
            app.close()
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(value, default=str))],
                                    structured_content=structured(value))

    async def _list_resources(self, ctx, params) -> types.ListResourcesResult:
        pages = await anyio.to_thread.run_sync(self._with_app, resources.pages)
        return types.ListResourcesResult(resources=[
            types.Resource(uri=p.uri, name=p.path, description=p.description, mime_type=p.mime_type) for p in pages])

    async def _read_resource(self, ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            text, mime = await anyio.to_thread.run_sync(self._with_app, partial(resources.read, uri=uri))
        except Exception as e:  # noqa: BLE001 - one line to the client
            raise MCPError(code=types.INVALID_PARAMS, message=error_line(e)) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)])

    def _with_app(self, fn):
        app = self._app()
        try:
            return fn(app)
        finally:
            app.close()

    async def serve(self) -> None:
        async with stdio_server() as (read_stream, write_stream):
            await self.server.run(read_stream, write_stream, self.server.create_initialization_options())


def serve(workspace: Path, db_url: str, verbosity: int = 0, allowed: tuple[Path, ...] = ()) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes it."""
    anyio.run(LedgerServer(workspace, db_url, verbosity, allowed).serve)
