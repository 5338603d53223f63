"""The one place the tool reads its environment. Everything else asks here, by the variable's name.

Variables the tool honours (each module that asks says what for): MLIR_AIR_DIR (an mlir-air checkout), LEDGER_DB
and LEDGER_HOME (the ledger's URL and the workspace), NPU_LEDGER_MODELS (where SmolLM2's converted folder is kept),
NPU_LEDGER_REFERENCE_CACHE (HF reference walks kept by content), NPU_LEDGER_HARNESSES (a harness table in place of a
checkout's), LEDGER_NPU_LOCK (the NPU lock file), PEANO_INSTALL_DIR (the Peano toolchain recorded with hardware
rows), NPU_LEDGER_STANDIN_SLEEP_S (the sleep worker's test seam), the BLAS thread counts recorded with fp32 rows, and
the twin's own (NPU_LEDGER_TWIN_ROOT, NPU_LEDGER_TWIN_FAULTS, NPU_LEDGER_FAULTS, NPU_LEDGER_MODEL,
NPU_LEDGER_VERIFY_DIR, RUNNER_NAME, NPU_LEDGER_STAND_IN_PYTHON): the stand-in checkout's programs are separate
processes whose interface is their environment, as mlir-air's are; NPU_LEDGER_EVALUATOR_PYTHON (the interpreter of
the independent evaluator's fresh process).

`env_get` is `os.environ.get` (an empty value stays empty: a caller decides what empty means); `env_copy` is the
environment a child process gets; `env_default` sets a variable this process and its children must see
(Hugging Face's offline switches, the twin's root). Imports nothing of the product, so every room may use it.
"""

from __future__ import annotations

import os


def env_get(name: str, default: str | None = None) -> str | None:
    """The variable `name` as the process has it, else `default`."""
    return os.environ.get(name, default)


def env_copy() -> dict[str, str]:
    """A copy of the whole environment, for a child process the tool starts."""
    return dict(os.environ)


def env_default(name: str, value: str) -> None:
    """Set `name` for this process and its children unless it is set already."""
    os.environ.setdefault(name, value)


def stand_in_python() -> str:
    """The interpreter the stand-in's programs run under (the twin's harness and bench scripts, a stand-in model
    directory's make targets): $NPU_LEDGER_STAND_IN_PYTHON, else this interpreter. The test suite points it at a
    launcher that forks each program from an interpreter which has already imported the stand-in's modules
    (tests/stand_in_server.py); what a program computes and prints does not depend on it."""
    import sys

    return os.environ.get("NPU_LEDGER_STAND_IN_PYTHON") or sys.executable


def evaluator_python() -> str:
    """The interpreter the independent evaluator's fresh process runs under (handlers.gates.evaluation):
    $NPU_LEDGER_EVALUATOR_PYTHON, else this interpreter. The test suite points it at the launcher of
    tests/stand_in_server.py (a process forked from an interpreter that has only imported the tool, which keeps the
    evaluator's lifeline: it still dies with the process that started it)."""
    import sys

    return os.environ.get("NPU_LEDGER_EVALUATOR_PYTHON") or sys.executable
