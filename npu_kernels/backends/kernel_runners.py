"""The one place a leaf-kernel executor is chosen by name: `make_runner` (the `KernelRunner` seam of Phase 1, its
workers, `ledger reverify`, the evaluator's re-measurement and `ledger kernel run`) and `make_executor` (a bare
executor instance).

  emulated  the NPU2 datapath modelled on the CPU     InProcessRunner, source "emulated"
  torch     torch bf16 (CPU, or CUDA)                  InProcessRunner, source "torch"
  fp32      the FP32 references                        InProcessRunner, source "emulated" (`ledger kernel run` only)
  mlir-air  mlir-air's harnesses on an NPU2 machine    HarnessRunner, source "harness"
  sleep     a worker's test/bench stand-in: the emulated rows, then NPU_LEDGER_STANDIN_SLEEP_S seconds
            (`worker_kind`; npu_kernels.numerics.executors.standin)
"""

from __future__ import annotations

from dataclasses import dataclass

from npu_kernels.backends.harness_runner import HarnessRunner
from npu_kernels.backends.in_process_runner import InProcessRunner, StandinFaultRunner
from npu_kernels.backends.runner_base import KernelRunner
from npu_kernels.mlir_air.executor import MlirAirExecutor
from npu_kernels.mlir_air.lock import probe_device
from npu_kernels.numerics.executors import EXECUTOR_NAMES as IN_PROCESS
from npu_kernels.numerics.executors import Executor
from npu_kernels.numerics.executors import make_executor as make_in_process
from npu_kernels.numerics.executors.standin import StandinError, StandinFault, standin_sleep_s
from npu_kernels.provenance import CPU_EMULATOR, LABELS, harness_provenance
from npu_kernels.toolchain import current_toolchain
from npu_kernels.settings import env_get

__all__ = ["DEPLOYMENT_EXECUTORS", "EXECUTOR_NAMES", "WORKER_EXECUTORS", "WorkerKind", "make_executor",
           "make_runner", "worker_kind"]

HARNESS = "mlir-air"
EXECUTOR_NAMES = (*IN_PROCESS, HARNESS)  # `ledger kernel run --executor`
DEPLOYMENT_EXECUTORS = ("emulated", "torch", HARNESS)  # `ledger init --executor`: what Phases 1-7 run on
SLEEP_STANDIN = "sleep"
WORKER_EXECUTORS = (*DEPLOYMENT_EXECUTORS, SLEEP_STANDIN)  # `ledger worker --executor`


def make_executor(name: str, target: str = "npu2", **options) -> Executor:
    """A fresh executor `name` (one of EXECUTOR_NAMES) for `target`; `options` as npu_kernels.numerics.executors'."""
    if name == HARNESS:
        if options:
            raise ValueError(f"executor {name!r} takes no options ({', '.join(sorted(options))})")
        return MlirAirExecutor(target)
    return make_in_process(name, target, **options)


def make_runner(name: str, target: str = "npu2", *, lock_path: str | None = None,
                standin_fault: StandinFault | None = None, inconclusive_up: bool = False) -> KernelRunner:
    """The kernel runner of executor `name` (one of EXECUTOR_NAMES) for `target`. `lock_path`: the NPU lock a
    runner that takes it itself holds (mlir-air; None: LEDGER_NPU_LOCK or the default). `standin_fault`: a declared
    stand-in fault (`ledger reverify --standin-fault`), which only the emulated runner can carry (StandinError
    otherwise). `inconclusive_up`: a harness run with no verdict on any fresh-process try raises HarnessInconclusive
    (the Phase 1 gate records the attempt as inconclusive) instead of being a FAIL row of kind "timeout" (what the
    evaluator's re-measurement, `reverify` and `kernel run` record)."""
    if name == HARNESS:
        runner: KernelRunner = HarnessRunner(target, lock_path=lock_path, inconclusive_up=inconclusive_up)
    elif name in IN_PROCESS:
        runner = InProcessRunner(name, target, source="torch" if name == "torch" else "emulated")
    else:
        raise ValueError(f"unknown executor {name!r}; expected one of {', '.join(EXECUTOR_NAMES)}")
    if standin_fault is None:
        return runner
    if name != "emulated":
        raise StandinError(f"a stand-in fault ({standin_fault}) is a stand-in of the emulated executor, not of {name}")
    return StandinFaultRunner(runner, standin_fault)


@dataclass(frozen=True)
class WorkerKind:
    """What a `ledger worker --executor NAME` host is: the deployment executor whose Phase 1 rows it serves, and
    the sleep stand-in's seconds per row (None on a real executor)."""

    name: str
    serves: str
    sleep_s: float | None = None


def worker_kind(name: str) -> WorkerKind:
    """The worker of `name` (one of WORKER_EXECUTORS); the sleep stand-in reads NPU_LEDGER_STANDIN_SLEEP_S here and
    refuses to start without it (StandinError)."""
    if name == SLEEP_STANDIN:
        return WorkerKind(name, "emulated", standin_sleep_s())
    if name not in DEPLOYMENT_EXECUTORS:
        raise ValueError(f"unknown worker executor {name!r}; expected one of {', '.join(WORKER_EXECUTORS)}")
    return WorkerKind(name, name)


def figure_class(executor: str, mlir_air_dir: str | None = None) -> str:
    """The npu_kernels.provenance class of a figure `executor` produces here: on mlir-air what the checkout and the
    machine say (a stand-in's marker; a device with a probed toolchain), else the CPU emulator."""
    if executor == "mlir-air":
        directory = mlir_air_dir or env_get("MLIR_AIR_DIR")
        return harness_provenance(current_toolchain("mlir-air", mlir_air_dir=directory), probe_device())
    return CPU_EMULATOR


def figure_source(executor: str, mlir_air_dir: str | None = None) -> str:
    """Where a timed figure of `executor` comes from, as every output labels it (npu_kernels.provenance.LABELS; the
    emulated / torch / fp32 executors name themselves)."""
    cls = figure_class(executor, mlir_air_dir)
    return LABELS[cls] if executor == "mlir-air" else f"CPU emulator ({executor}, not NPU2)"
