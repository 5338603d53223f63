"""`InProcessRunner`: the `KernelRunner` (npu_kernels.backends.runner_base) of the in-process executors (emulated, torch,
fp32), through `npu_kernels.numerics.run.run_kernel`; and `StandinFaultRunner`, the test wrapper that fails the rows
of a declared stand-in fault (npu_kernels.numerics.executors.standin)."""

from __future__ import annotations

from typing import Any, Callable

from npu_kernels.backends.runner_base import KernelRow, KernelVerification, relative_difference
from npu_kernels.numerics.executors import make_executor
from npu_kernels.numerics.executors.base import Executor
from npu_kernels.numerics.executors.standin import FaultyEmulated, StandinFault
from npu_kernels.numerics.run import KernelResult, blas_threads, run_kernel
from npu_kernels.perf import modelled_kernel_figures
from npu_kernels.thresholds import KERNEL_REMEASURE_MAX_ABS_RTOL, KERNEL_REMEASURE_RTOL
from npu_kernels.provenance import CPU_EMULATOR
from npu_kernels.toolchain import current_toolchain

__all__ = ["InProcessRunner", "StandinFaultRunner"]


class InProcessRunner:
    """A leaf kernel on an in-process executor, judged against its FP32 reference in this process. Each run gets a
    fresh executor (`make`: npu_kernels.numerics.executors.make_executor by `name` unless given)."""

    takes_npu_lock = False  # nothing here touches an NPU: a worker holds its host's lock around the row

    def __init__(self, name: str, target: str = "npu2", *, source: str,
                 make: Callable[[], Executor] | None = None, toolchain: dict[str, Any] | None = None) -> None:
        self.name, self.target, self.source = name, target, source
        self._make = make or (lambda: make_executor(name, target))
        self._toolchain = toolchain

    def toolchain(self, row: KernelRow) -> dict[str, Any]:
        return dict(self._toolchain) if self._toolchain is not None else current_toolchain(self.name)

    def measure(self, row: KernelRow, *, seed: int = 0, inputs: str = "project") -> KernelResult:
        return run_kernel(row.kernel, row.shape, executor=self._make(), target=self.target, contract=row.contract,
                          tile=row.tile, seed=seed, force_tile=row.force_tile, inputs=inputs)

    def verify(self, row: KernelRow, *, attempt: int, when: str, host: str) -> KernelVerification:
        """run_kernel's figures, with the command that reproduces them, the host, the BLAS thread count (fp32
        accumulation order depends on it), the toolchain and the NPU2 performance model's figures (npu2)."""
        result = self.measure(row)
        command = (f"ledger kernel run {row.kernel} --shape {row.shape_text} --executor {self.name} "
                   f"--target {self.target}")
        return KernelVerification({
            **result.event_fields(), "source": self.source, **row.labels(),
            "measured_at": when, "provenance_class": CPU_EMULATOR,
            "provenance": {"command": command, "host": host, "attempt": attempt, "seed": 0,
                           "blas_threads": blas_threads(), "toolchain": self.toolchain(row)},
            "modelled_npu2": modelled_kernel_figures(row.kernel, row.shape, row.tile) if self.target == "npu2" else {},
        })

    def remeasure_problems(self, recorded: Any, remeasured: Any) -> list[str]:
        """In process the same kernel on the same inputs at the same BLAS thread count reproduces its figures:
        the mismatch count exactly, mean_rel_L1 within KERNEL_REMEASURE_RTOL, max_abs within
        KERNEL_REMEASURE_MAX_ABS_RTOL (relative)."""
        old, new = recorded, remeasured
        problems = []
        if (old.mismatches or 0) != (new.mismatches or 0):
            problems.append(f"{old.mismatches} mismatches recorded, {new.mismatches} re-measured")
        rel = relative_difference(old.mean_rel_L1, new.mean_rel_L1)
        if rel > KERNEL_REMEASURE_RTOL:
            problems.append(f"mean_rel_L1 {old.mean_rel_L1!r} recorded, {new.mean_rel_L1!r} re-measured "
                            f"(relative difference {rel:.2e} > {KERNEL_REMEASURE_RTOL:g})")
        if relative_difference(old.max_abs, new.max_abs) > KERNEL_REMEASURE_MAX_ABS_RTOL:
            problems.append(f"max_abs {old.max_abs!r} recorded, {new.max_abs!r} re-measured")
        return problems


class StandinFaultRunner:
    """The emulated runner with a declared stand-in fault (`ledger reverify --standin-fault`): a matching row runs
    on `FaultyEmulated` (its kernel's output scaled past every rtol) and records the fault in its toolchain, so
    the ledger never passes it off as the emulated numerics; every other row is the wrapped runner's."""

    def __init__(self, runner: InProcessRunner, fault: StandinFault) -> None:
        self.runner, self.fault = runner, fault
        self.name, self.target, self.source = runner.name, runner.target, runner.source
        self.takes_npu_lock = runner.takes_npu_lock

    def _for(self, row: KernelRow) -> InProcessRunner:
        if not self.fault.matches(row.kernel, row.shape):
            return self.runner
        return InProcessRunner(self.name, self.target, source=self.source,
                               make=lambda: FaultyEmulated(row.kernel, self.target),
                               toolchain={**self.runner.toolchain(row), "standin_fault": str(self.fault)})

    def toolchain(self, row: KernelRow) -> dict[str, Any]:
        return self._for(row).toolchain(row)

    def measure(self, row: KernelRow, *, seed: int = 0, inputs: str = "project") -> KernelResult:
        return self._for(row).measure(row, seed=seed, inputs=inputs)

    def verify(self, row: KernelRow, *, attempt: int, when: str, host: str) -> KernelVerification:
        return self._for(row).verify(row, attempt=attempt, when=when, host=host)

    def remeasure_problems(self, recorded: Any, remeasured: Any) -> list[str]:
        return self.runner.remeasure_problems(recorded, remeasured)
