"""What every MCP tool is made of: one call (`Call`: its App, its arguments, the folders a path
may lie in), the tool's row (`Tool`), the CLI's one error line (`error_line`), the call's VerbCall (`mcp_call`, whose
post-commit step the CLI's commands take too) and the read-only ledger of a read. `handlers.mcp.tools` builds the tools, one per verb-table row (`tool_of`).

Imports: handlers (bootstrap, deploy, inputs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import structlog

from handlers import deploy
from handlers.bootstrap import App
from handlers.inputs import confined
from handlers.narrate import report
from handlers.verbs import Verb, VerbCall

log = structlog.get_logger("npu_ledger.mcp")


@dataclass
class Call:
    """One tool call: its own App (workspace + ledger), the arguments (defaults filled in) and the folders a path
    argument may lie in besides the workspace (`ledger mcp --allow-dir`). Its progress goes to the reporter the
    server installs around the call (handlers.narrate.reporting)."""

    app: App
    args: dict[str, Any]
    allowed: tuple[Path, ...] = ()

    def located(self, key: str) -> Path:
        """Argument `key` as a path: a relative one lies in the workspace (the server's cwd is the client's)."""
        p = Path(self.args[key]).expanduser()
        return p if p.is_absolute() else self.app.workspace / p

    def path(self, key: str, what: str) -> str:
        """Argument `key` as a path inside the workspace or an allowed folder (handlers.inputs.confined)."""
        return str(confined(self.located(key), (self.app.workspace, *self.allowed), what))

    def target(self) -> str:
        """A plan / predict target: a deployment name as it is, an existing path only when confined."""
        return self.path("target", "config") if self.located("target").exists() else self.args["target"]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    run: Callable[[Call], Any]
    writes: str = ""  # what it appends to the ledger, and through what ("" = it reads only)
    long: bool = False  # reports progress; one long tool at a time per server (the gates are one-process work)


def tool_of(verb: Verb) -> Tool:
    """The MCP tool of a verb-table row: its arguments (the schema's defaults filled in) as the row's request."""
    def run(c: Call) -> Any:
        request = verb.request_from(c.args)
        return verb.result(verb.call(mcp_call(c.app, c.allowed), request), request)

    return Tool(verb.tool, verb.description, run, writes=verb.writes, long=verb.long)


def error_line(exc: BaseException) -> str:
    """The one line the CLI prints for `exc` (handlers.cli.main.LedgerGroup): `error: <first line>`, or
    `rejected: ...` for an out-of-scope `init` (exit 3 there)."""
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    text = str(text).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return f"rejected: {line}" if isinstance(exc, deploy.OutOfScope) else f"error: {line}"


def mcp_call(app: App, allowed: tuple[Path, ...] = ()) -> VerbCall:
    """The call's App with its warnings going to the server's log (stderr), a path argument inside the workspace
    or an allowed folder (`Call.path`)."""
    return VerbCall(app, warn=log.warning,
                    place=lambda value, what: Call(app, {"p": value}, allowed).path("p", what),
                    place_target=lambda value, what: Call(app, {"target": value}, allowed).target(),
                    here=app.workspace, face="mcp",
                    tell=lambda line, err=False: report(line))


def read_only(c: Call) -> App:
    """The call's App with its ledger opened read-only (a read tool)."""
    c.app.read_only = True  # a SQLite ledger opened so that nothing can write to it
    return c.app
