"""mlir-air's formats and commands: the harness table, the parsers of what its harnesses and model
directories print (harness transcript, verify report, diagnosis report), the NPU lock, the executor that
runs them on an NPU2 machine, and npu-ledger's own target in a model directory: `make verify-walk`, the
teacher-forced walk on the runner the model's verify adapter builds (walk.py), and its reader (walk_report.py)."""
