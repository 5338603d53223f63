"""The MCP tools of the runs (`run`, `optimise`) and re-verification (`reverify`): each the CLI verb over the
same handler and the same `--json` producer (`handlers.results_workbench`), as `handlers.mcp.tools` has them for
the deployment verbs (its docstring: reads, writes, errors). The other workbench verbs (quantize, scaffold, perf
import / export-history, registry import / build) are rows of the verb table (handlers.verbs).

Imports: handlers (runs, reverify, results_workbench), handlers.mcp.call, statemachine.
"""

from __future__ import annotations


from handlers import results_workbench as rw
from handlers.mcp.call import Call, Tool, refresh, refresh_if_recorded
from handlers.runs import generate, optimise
from handlers.reverify import reverify_all


def _reverify(c: Call):
    try:
        found = reverify_all(c.app.ledger, workspace=c.app.workspace, executor=c.args.get("executor"))
    finally:
        refresh(c.app)
    return rw.reverify_json(found)


def _run(c: Call):
    a = c.args
    try:
        out = generate(c.app.ledger, c.app.workspace, a["name"], a["prompt"], a["n_tokens"], profile=a["profile"])
    finally:
        refresh_if_recorded(c.app, a["name"])
    return rw.run_json(out)


def _optimise(c: Call):
    a = c.args
    return rw.optimise_json(optimise(c.app.ledger, c.app.workspace, a["name"], a["what"], a["phase"]))


WORKBENCH = [
    Tool("run", "Generate with the deployment's integrated runner (`ledger run NAME --json`); records the run's "
         "figures.", _run, writes="PerformanceMeasured(phase 6) of the run, measured now (never a verdict)", long=True),
    Tool("optimise", "On hardware: measure an engineer's change to the model directory, re-run the token gate and "
         "record it against the phase's last figure (`ledger optimise NAME --what TEXT --json`).", _optimise,
         writes="the token gate, a PerformanceMeasured and the OptimizationTried, all measured now", long=True),
    Tool("reverify", "Re-run every deployed model's token gate and its Phase 1 rows whose toolchain changed; "
         "regressions are blocked (`ledger reverify --all --json`).", _reverify,
         writes="only through the gates' own measurements: TokenGateChecked, KernelVerified re-runs, "
                "BlockerRaised on a regression", long=True),
]
