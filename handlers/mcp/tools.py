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

`TOOLS` holds these hand-written tools (init, advance, audit: `NOT_MIGRATED`
in handlers.verbs says why each is not a row yet) and the verb table's (`handlers.verbs.VERBS`: their input
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


def _init(c: Call):
    a = c.args
    dtype = "q4nx" if a.get("base") else a["dtype"]
    model, base = c.path("model", "model"), c.path("base", "base folder") if a.get("base") else None
    created = deploy.init(c.app.ledger, model, name=a.get("name"), target=a["target"], dtype=dtype,
                          executor=a["executor"], workspace=c.app.workspace, base=base,
                          q4nx_style=a.get("q4nx_style", "host"))
    refresh_if_recorded(c.app, created)  # the registry and the new deployment's docs
    return results.init_json(created, a["executor"], a["target"], dtype)


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


def _audit(c: Call):
    try:
        report = deploy.audit(c.app.ledger, c.args["name"], workspace=c.app.workspace, checkpoint=c.args.get("against"))
    finally:
        if not c.app.opened_read_only:
            refresh_if_recorded(c.app, c.args["name"])
    return results.audit_json(c.args["name"], report)


_TOOLS = [
    Tool("init", "Start a deployment of a local HF folder / config.json: records the request and the "
         "architecture assessment (`ledger init`).", _init,
         writes="DeploymentRequested, ArchitectureAssessed and ConfigResolved, all derived from the model's config.json"),
    Tool("advance", "Run the next phase gate(s) of NAME up to `until`; gates cannot be skipped. Progress: one "
         "notification per phase, kernel row and prompt (`ledger advance --json`).", _advance,
         writes="only through the gates: PhaseStarted with the gate's own measured evidence, then the state "
                "machine's PhasePassed / PhaseFailed / PhaseInconclusive (+ BlockerRaised, FailureTriaged)", long=True),
    Tool("audit", "Phase 7: the independent evaluator in a fresh process (`ledger audit --json`); at phase7 it "
         "runs the gate, on a deployed model it re-audits.", _audit,
         writes="Phase 7 through its gate, or a re-audit's measured EvaluationRecorded (+ BlockerRaised on FAIL)",
         long=True),
]
TOOLS: dict[str, Tool] = {t.name: t for t in [*_TOOLS, *(tool_of(v) for v in VERBS)]}
