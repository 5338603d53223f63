"""The executors Phase 1 and `ledger kernel run` choose among, by name: the in-process ones
(kernels.numerics.executors: emulated, torch, fp32) and mlir-air's harnesses on an NPU2 machine
(kernels.mlir_air.executor)."""

from __future__ import annotations

from kernels.mlir_air.executor import MlirAirExecutor
from kernels.numerics.executors import EXECUTOR_NAMES as IN_PROCESS
from kernels.numerics.executors import Executor
from kernels.numerics.executors import make_executor as make_in_process

EXECUTOR_NAMES = (*IN_PROCESS, "mlir-air")


def make_executor(name: str, target: str = "npu2", **options) -> Executor:
    """A fresh executor `name` (one of EXECUTOR_NAMES) for `target`; `options` as kernels.numerics.executors'."""
    if name == "mlir-air":
        if options:
            raise ValueError(f"executor {name!r} takes no options ({', '.join(sorted(options))})")
        return MlirAirExecutor(target)
    return make_in_process(name, target, **options)
