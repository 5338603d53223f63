"""The MCP face of the ledger, for coding agents: `ledger mcp` (a stdio MCP server) and `ledger skills export`.

  call        one tool call (its App, arguments, progress, allowed folders), the tool row, the CLI's error line
  tools       the tool table: every tool a row of the verb table (handlers.verbs) made a tool by `call.tool_of`,
              returning its verb's --json
  schemas     the tools' input schemas (the rows' `input_schema`); output schemas derived from handlers.results
  resources   the projections (registry, each deployment's docs and evaluation report) as MCP resources
  server      the `mcp` SDK's low-level server over the two (the only module that imports the SDK)
  skills      SKILL.md files generated from the lifecycle table and npu_kernels.thresholds, and a .mcp.json entry

Only `handlers.cli.agents` imports this package (the server lazily: the SDK is heavy at CLI start-up).
"""
