"""What a gate predicate takes and returns: the `GateContext` a handler supplies, the `GateResult`
(ok + reason), `GateRejected`, and `kernel_key`, the identity of a (kernel, shape) pair the context holds
(npu_kernels.numerics.row.row_key, the identity of a KernelRow).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from npu_kernels.numerics.row import row_key as kernel_key  # a (kernel, shape) pair's identity, a KernelRow's key
from statemachine.phases import Phase
from statemachine.state import DeploymentState


@dataclass(frozen=True)
class GateContext:
    """What a gate needs that the stream does not hold, supplied by the handler.

    `planned_kernels`: the (kernel, shape) pairs the model needs (derived from its config), given as
    `[("GEMM", {"M": 2048, "K": 2048, "N": 2048}), ...]`; stored as `kernel_key`s. Gate 1 refuses to open
    without a plan (None), so a stream cannot pass Phase 1 by verifying fewer kernels than the model needs.
    """

    planned_kernels: frozenset[tuple[str, str]] | None = None  # normalised from any iterable of pairs
    plan_sources: dict[str, Any] | None = None  # where each planned row's tile came from (PhaseStarted records it)

    def __post_init__(self) -> None:
        if self.planned_kernels is not None:
            keys = frozenset(k if isinstance(k[1], str) else kernel_key(*k) for k in self.planned_kernels)
            object.__setattr__(self, "planned_kernels", keys)


class GateResult(NamedTuple):
    """`(ok, reason)`: the reason names the unmet criterion, or summarises the evidence when ok.

    Its truth value is `ok` (a plain non-empty tuple would always be true).
    """

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


Predicate = Callable[[DeploymentState, GateContext], GateResult]


class GateRejected(Exception):
    """Raised when a gate is tried and one of its criteria is unmet; `reason` names it."""

    def __init__(self, phase: Phase, reason: str) -> None:
        self.phase = Phase(phase)
        self.reason = reason
        super().__init__(f"phase {int(phase)} ({self.phase.title}) gate rejected: {reason}")
