"""Leaf-kernel executors and their factory: `make_executor(name, target)` for the in-process ones.

emulated  the NPU2 datapath modelled on the CPU (numpy + ml_dtypes)     npu_kernels.numerics.executors.emulated
torch     torch bf16, the GPU / vLLM standard (CPU, or CUDA)            npu_kernels.numerics.executors.torch_exec
fp32      the FP32 references (also the bisect's known-good swap-in)    npu_kernels.numerics.executors.base
mlir-air  mlir-air's harnesses on an NPU2 machine                       npu_kernels.mlir_air.executor
torch is imported only when asked for (slow to import); mlir-air's executor too, because it imports
`npu_kernels.numerics.executors.base` (a package cycle the layout test allow-lists until this factory leaves the package).
"""

from __future__ import annotations

from npu_kernels.numerics.executors.base import Executor, Fp32Executor
from npu_kernels.numerics.executors.emulated import EmulatedExecutor

EXECUTOR_NAMES = ("emulated", "torch", "fp32")  # in process; "mlir-air" is npu_kernels.backends.kernel_runners'
TARGETS = ("npu2", "npu1")


def make_executor(name: str, target: str = "npu2", **options) -> Executor:
    """A fresh in-process executor `name` ("emulated" | "torch" | "fp32") for `target` ("npu2" | "npu1").
    `options` go to the emulated executor (threads, gemv_order); the others take none."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if options and name != "emulated":
        raise ValueError(f"executor {name!r} takes no options ({', '.join(sorted(options))})")
    if name == "emulated":
        return EmulatedExecutor(target, **options)
    if name == "torch":
        from npu_kernels.numerics.executors.torch_exec import TorchExecutor  # here, not at the top: torch is slow to import

        return TorchExecutor(target)
    if name == "fp32":
        return Fp32Executor(target)
    raise ValueError(f"unknown executor {name!r}; expected one of {', '.join(EXECUTOR_NAMES)}")
