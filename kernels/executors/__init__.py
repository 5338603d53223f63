"""Leaf-kernel executors and the one factory callers use: `make_executor(name, target)`.

emulated  the NPU2 datapath modelled on the CPU (numpy + ml_dtypes)     kernels.executors.emulated
torch     torch bf16, the GPU / vLLM standard (CPU, or CUDA)            kernels.executors.torch_exec
fp32      the FP32 references (also the bisect's known-good swap-in)    kernels.executors.base
mlir-air  mlir-air's harnesses on an NPU2 machine                       kernels.mlir_air.executor
torch is imported only when asked for (slow to import); mlir-air's executor too, because it imports
`kernels.executors.base` (a package cycle the layout test allow-lists until this factory leaves the package).
"""

from __future__ import annotations

from kernels.executors.base import Executor, Fp32Executor
from kernels.executors.emulated import EmulatedExecutor

EXECUTOR_NAMES = ("emulated", "torch", "fp32", "mlir-air")
TARGETS = ("npu2", "npu1")


def make_executor(name: str, target: str = "npu2", **options) -> Executor:
    """A fresh executor `name` ("emulated" | "torch" | "fp32" | "mlir-air") for `target` ("npu2" | "npu1").
    `options` go to the emulated executor (threads, gemv_order); the others take none."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if options and name != "emulated":
        raise ValueError(f"executor {name!r} takes no options ({', '.join(sorted(options))})")
    if name == "emulated":
        return EmulatedExecutor(target, **options)
    if name == "torch":
        from kernels.executors.torch_exec import TorchExecutor  # here, not at the top: torch is slow to import

        return TorchExecutor(target)
    if name == "fp32":
        return Fp32Executor(target)
    if name == "mlir-air":
        from kernels.mlir_air.executor import MlirAirExecutor  # here: it imports kernels.executors (see above)

        return MlirAirExecutor(target)
    raise ValueError(f"unknown executor {name!r}; expected one of {', '.join(EXECUTOR_NAMES)}")
