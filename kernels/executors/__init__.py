"""Leaf-kernel executors and the one factory callers use: `make_executor(name, target)`.

emulated  the NPU2 datapath modelled on the CPU (numpy + ml_dtypes)     kernels.executors.emulated
torch     torch bf16, the GPU / vLLM standard (CPU, or CUDA)            kernels.executors.torch_exec
fp32      the FP32 references (also the bisect's known-good swap-in)    kernels.executors.base
mlir-air  mlir-air's harnesses on an NPU2 machine                       kernels.mlir_air.executor
Each backend is imported only when asked for (torch and the harness machinery are heavy).
"""

from __future__ import annotations

from kernels.executors.base import Executor

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
        from kernels.executors.emulated import EmulatedExecutor

        return EmulatedExecutor(target, **options)
    if name == "torch":
        from kernels.executors.torch_exec import TorchExecutor

        return TorchExecutor(target)
    if name == "fp32":
        from kernels.executors.base import Fp32Executor

        return Fp32Executor(target)
    if name == "mlir-air":
        from kernels.mlir_air.executor import MlirAirExecutor

        return MlirAirExecutor(target)
    raise ValueError(f"unknown executor {name!r}; expected one of {', '.join(EXECUTOR_NAMES)}")
