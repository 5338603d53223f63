"""The MCP tool table: each tool is one CLI verb over the handlers' public functions, returning that verb's
`--json` value (`handlers.results`).

`TOOLS` is the whole surface an agent gets. It is the CLI's verbs minus every way around a gate: there is no
tool that appends an arbitrary event, edits a projection or records a verdict by hand; a tool that writes says
what it appends in `writes` (tests/unit/test_mcp_tools.py holds the reviewed allow-list and its reasons). The
gates decide; a failed gate or a broken chain is a result (its JSON says so, as the CLI's exit status does), not
a tool error. A tool error is what the CLI prints as its one `error: ...` line (`error_line`).

Each tool runs on an `App` of its own (its own database connection) made by the server for the call, inside a
reporter (`handlers.narrate.reporting`) whose messages become MCP progress notifications: the messages the
terminal's bars show (`handlers.narrate.TerminalProgress`). Tools that write refresh the projections afterwards
where the CLI does.

Every tool is a row of the verb table (`handlers.verbs.VERBS`): its input schema generated from the same request
as the click command (`handlers.verbs.input_schema`), its call `handlers.mcp.call.tool_of`.

Imports: handlers.mcp.call, handlers.verbs.
"""

from __future__ import annotations

from handlers.mcp.call import Call, Tool, error_line, log, tool_of
from handlers.verbs import VERBS

TOOLS: dict[str, Tool] = {t.name: t for t in (tool_of(v) for v in VERBS)}

__all__ = ["TOOLS", "Call", "Tool", "error_line", "log"]
