"""The MCP tools of the engineer's workbench verbs (`registry import` / `build`), the runs (`run`, `optimise`)
and re-verification (`reverify`): each the CLI verb over the same handler and the same `--json` producer (`handlers.results_workbench`), as
`handlers.mcp.tools` has them for the deployment verbs (its docstring: reads, writes, errors).

A path argument lies in the workspace or an `--allow-dir` folder (`Call.path`); a checkout argument defaults to
the server's $MLIR_AIR_DIR, as the CLI's does.

Imports: handlers (registry_ops, registry_merge, runs, reverify, results_workbench), handlers.mcp.call, statemachine.
"""

from __future__ import annotations


from handlers import results_workbench as rw
from handlers.mcp.call import Call, Tool, read_only, refresh, refresh_if_recorded
from handlers.registry_merge import merge_into_mlir_air
from handlers.registry_ops import build_projections, import_registry_accounted
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


def _registry_import(c: Call):
    result = import_registry_accounted(c.app.ledger, c.path("directory", "registry folder"),
                                       allow_skip=c.args["allow_skip"])  # SkippedRows: one line, nothing imported
    refresh(c.app)
    return rw.registry_import_json(result.accounts)


def _registry_build(c: Call):
    events = read_only(c).ledger.read_all()
    if c.args.get("into_mlir_air"):
        return rw.registry_merge_json(merge_into_mlir_air(events, c.path("into_mlir_air", "mlir-air checkout")))
    result = build_projections(events, c.app.workspace, check=c.args["check"])
    return rw.registry_build_json(result, c.args["check"])


WORKBENCH = [
    Tool("run", "Generate with the deployment's integrated runner (`ledger run NAME --json`); records the run's "
         "figures.", _run, writes="PerformanceMeasured(phase 6) of the run, measured now (never a verdict)", long=True),
    Tool("optimise", "On hardware: measure an engineer's change to the model directory, re-run the token gate and "
         "record it against the phase's last figure (`ledger optimise NAME --what TEXT --json`).", _optimise,
         writes="the token gate, a PerformanceMeasured and the OptimizationTried, all measured now", long=True),
    Tool("registry_import", "Import an mlir-air kernel_registry/ folder as imported evidence, one account per "
         "table (`ledger registry import DIR --json`); a skipped row refuses all unless allow_skip.",
         _registry_import, writes="KernelVerified rows of registry:import, imported:mlir-air-registry"),
    Tool("registry_build", "Rebuild (or check) the workspace's projections from the ledger, or add the ledger's "
         "new NPU2 rows to an mlir-air checkout (`ledger registry build [--check] --json`).", _registry_build,
         writes="no event: the projections (rebuilt from the ledger) or the checkout's registry tables"),
    Tool("reverify", "Re-run every deployed model's token gate and its Phase 1 rows whose toolchain changed; "
         "regressions are blocked (`ledger reverify --all --json`).", _reverify,
         writes="only through the gates' own measurements: TokenGateChecked, KernelVerified re-runs, "
                "BlockerRaised on a regression", long=True),
]
