"""The MCP tool table: each tool is one CLI verb over the handlers' public functions, returning that verb's
`--json` value (`handlers.results`).

`TOOLS` is the whole surface an agent gets. It is the CLI's verbs minus every way around a gate: there is no
tool that appends an arbitrary event, edits a projection or records a verdict by hand; a tool that writes says
what it appends in `writes` (tests/unit/test_mcp_tools.py holds the reviewed allow-list and its reasons). The
gates decide; a failed gate or a broken chain is a result (its JSON says so, as the CLI's exit status does), not
a tool error. A tool error is what the CLI prints as its one `error: ...` line (`error_line`).

Each tool runs on an `App` of its own (its own database connection) made by the server for the call, inside a
reporter (`handlers.narrate.reporting`) whose messages become MCP progress notifications: the messages the
terminal's bars show (`handlers.narrate.TerminalProgress`). Tools that write refresh the projections afterwards where the CLI does.

`TOOLS` holds the hand-written tool advance (`NOT_MIGRATED` in handlers.verbs says why it is not a row yet)
and the verb table's (`handlers.verbs.VERBS`: their input
schemas generated from the same request as the click command); what a call is made of is `handlers.mcp.call`.

Imports: handlers (deploy, results, doctor, gates), handlers.mcp.call, handlers.verbs.
"""

from __future__ import annotations

from handlers import deploy, results
from handlers.mcp.call import Call, Tool, error_line, log, refresh_if_recorded, tool_of
from handlers.verbs import VERBS
from handlers.doctor import advance_refusal
from handlers.gates import GateOptions

# --- writes: through a gate -------------------------------------------------------------------------------------


def _advance(c: Call):
    a = c.args
    try:
        request = deploy.AdvanceRequest(a["name"], c.app.workspace, until=a.get("until"),
                                        options=GateOptions(full=a["full"], prefill_len=a.get("prefill_len")),
                                        preflight=lambda state: advance_refusal(state, a["name"]))
        report = deploy.advance(c.app.ledger, request)
    finally:
        refresh_if_recorded(c.app, a["name"])
    return results.advance_json(report)


_TOOLS = [
    Tool("advance", "Run the next phase gate(s) of NAME up to `until`; gates cannot be skipped. Progress: one "
         "notification per phase, kernel row and prompt (`ledger advance --json`).", _advance,
         writes="only through the gates: PhaseStarted with the gate's own measured evidence, then the state "
                "machine's PhasePassed / PhaseFailed / PhaseInconclusive (+ BlockerRaised, FailureTriaged)", long=True),
]
TOOLS: dict[str, Tool] = {t.name: t for t in [*_TOOLS, *(tool_of(v) for v in VERBS)]}
