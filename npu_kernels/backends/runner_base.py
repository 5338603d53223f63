"""The seam for leaf-kernel work: what Phase 1, its workers, `ledger reverify`, the evaluator's re-measurement
and `ledger kernel run` ask of a kernel executor, whoever runs it.

A `KernelRow` (npu_kernels.numerics.row) is one leaf kernel at one shape as it is run (kernel, shape, contract,
tile) and, for a Phase 1 row, as the planner made it (tile plan, role, phase, warnings). A `KernelRunner`
verifies a row once (`verify` -> `KernelVerification`, the `ledger.events.KernelVerified` fields and the
transcript a harness printed) or measures it bare (`measure` -> `npu_kernels.numerics.run.KernelResult`, `ledger kernel run`); it knows
its evidence `source`, the toolchain its rows record, whether it takes the NPU lock itself, and how a
re-measured row must agree with the recorded one.

Implementations: `npu_kernels.backends.in_process_runner` (emulated / torch / fp32 in this process, through
`npu_kernels.numerics.run.run_kernel`) and `npu_kernels.backends.harness_runner` (mlir-air's harness on an NPU2
machine). `npu_kernels.backends.kernel_runners.make_runner` is the one place that chooses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from npu_kernels.numerics.row import KernelRow
from npu_kernels.numerics.run import KernelResult

__all__ = ["KernelRow", "KernelRunner", "KernelVerification", "relative_difference"]


@dataclass(frozen=True)
class KernelVerification:
    """One verification of a row: exactly the `ledger.events.KernelVerified` fields it determines (every field
    but the model digest the handler binds), and the transcript when a harness ran (None in process)."""

    fields: dict[str, Any]
    transcript: str | None = None

    @property
    def not_measured(self) -> str | None:
        """Why the run produced no measurement (a harness's build error, traceback, timeout, lock timeout), or
        None when it measured."""
        return self.fields.get("not_measured")


def relative_difference(a: float | None, b: float | None) -> float:
    """|a - b| relative to the larger magnitude; 0 for two equal non-finite values (or two None), inf for one."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return 0.0 if a == b else math.inf
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


class KernelRunner(Protocol):
    name: str  # the executor its rows record (KernelVerified.executor) and whose deployments it serves
    target: str  # "npu2" | "npu1"
    source: str  # the evidence kind its rows record: "emulated" | "torch" | "harness"
    # True: the runner takes the host's NPU lock itself, around the harness run alone; False: whoever must keep
    # one row per NPU at a time (a worker) holds the lock around the whole row
    takes_npu_lock: bool

    def verify(self, row: KernelRow, *, attempt: int, when: str, host: str) -> KernelVerification:
        """One verification (no retry). Raises TileRuleViolation (the tile cannot run), EvidenceError (a
        transcript that cannot be this row's evidence) or HarnessConfigError (no command can be built); a harness
        run that measured nothing is a FAIL row saying why, not an exception."""
        ...

    def measure(self, row: KernelRow, *, seed: int = 0, inputs: str = "project") -> KernelResult:
        """The bare measurement `ledger kernel run` prints (npu_kernels.numerics.run's figures and verdict)."""
        ...

    def toolchain(self, row: KernelRow) -> dict[str, Any]:
        """The toolchain a run of `row` records now (npu_kernels.toolchain); what `ledger reverify` compares a
        recorded row's with."""
        ...

    def remeasure_problems(self, recorded: Any, remeasured: Any) -> list[str]:
        """How a re-measured KernelVerified's figures disagree with the recorded one's, beyond what this executor
        reproduces (npu_kernels.thresholds, KERNEL_REMEASURE_*); the verdicts are compared by the caller."""
        ...
