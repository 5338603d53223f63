"""mlir-air's formats and commands: the harness table, the parsers of what its harnesses and model
directories print (harness transcript, verify report, diagnosis report), the NPU lock, and the executor that
runs them on an NPU2 machine."""
