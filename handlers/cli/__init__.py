"""The `ledger` command line: click commands, one module per group of verbs, over the handlers' public API.

  main        the group, error mapping, the small command db setup and the command list
  verbs       the commands made from the verb table (handlers.verbs): every verb with an MCP tool (a group's rows
              are added by its module: perf, registry, kernel, record)
  common      what several command modules share: the post-commit projection step (handlers.verbs.post_commit)
  deploy      the evaluator's hidden child, evaluate
  measure     the record group (record harness: a row of handlers.verbs)
  kernels     the kernel group: kernel list (kernel run: a row)
  registry    the registry group (lookup / import / build: rows of handlers.verbs)
  workers     worker
  agents      mcp (the MCP server, handlers.mcp), skills export
Nothing outside handlers/cli/ imports it (the entry point `ledger` is `handlers.cli:main`).
"""

from handlers.cli.main import cli, main

__all__ = ["cli", "main"]
