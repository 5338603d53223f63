"""The `ledger` command line: click commands, one module per group of verbs, over the handlers' public API.

  main        the group, error mapping, the small command db setup and the command list
  verbs       the commands made from the verb table (handlers.verbs): resume, lesson, status, history, graph, head,
              log, twin, doctor, quantize (perf calibrate: added to its group by perf)
  common      what several command modules share: the post-commit projection step (handlers.verbs.post_commit)
  deploy      init, advance, audit (and the evaluator's child)
  measure     run, verify-model, diagnose, record harness
  kernels     kernel run, optimise
  registry    registry build / import / lookup
  predict, triage, workers, mlir_air   predict; triage; worker / distributed advance; scaffold, optimise
  agents      mcp (the MCP server, handlers.mcp), skills export
Nothing outside handlers/cli/ imports it (the entry point `ledger` is `handlers.cli:main`).
"""

from handlers.cli.main import cli, main

__all__ = ["cli", "main"]
