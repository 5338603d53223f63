"""One leaf kernel at one shape, from the plan to the runner: `KernelRow`, and `row_key`, the one identity of a
(kernel, shape) pair (statemachine.gate.kernel_key is this function).

The planner (npu_kernels.model.plan) builds a row with its role, phase, contract, tile plan, warnings and
workarounds, and where its tile came from; a Phase 1 run hands that same row to its `KernelRunner`
(npu_kernels.backends.runner_base), a test fault only forcing a tile over it. `ledger kernel run` builds an
ad-hoc row from a kernel, a shape and what the user asked (contract, tile), with no plan.

Imports: npu_kernels.numerics.tiles (for the type of a row's tile plan).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from npu_kernels.numerics.tiles import TilePlan

__all__ = ["KernelRow", "row_key"]


def row_key(kernel: str, shape: Mapping[str, Any]) -> tuple[str, str]:
    """The identity of a (kernel, shape) pair: the shape as canonical JSON, so key order never matters."""
    return kernel, json.dumps(dict(shape), sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class KernelRow:
    """One leaf kernel at one shape: as planned for a model, and as a runner runs it."""

    kernel: str
    shape: dict[str, Any]  # as planned (the plan's shapes are the catalog's normalised ones) or as given
    contract: str | None = None  # None: the kernel's default contract; a planned row names it
    tile: dict[str, Any] | None = None  # the tile asked for (the planner's, or overrides); None: the planner's
    force_tile: bool = False  # fault injection only: run `tile` even where it breaks a tile rule
    plan: TilePlan | None = None  # a planned row's tile plan: the tiles target, herd and justification it records
    role: str = ""  # a planned row's role ("Q/O proj")
    phase: str = ""  # a planned row's phase: "prefill" | "decode" | "load"
    warnings: tuple[str, ...] = ()  # the plan's warnings, the row's and its tile plan's
    workarounds: dict[str, Any] = field(default_factory=dict)  # e.g. {"k_split": 2}, {"pad_vocab_to": ...}
    method: str = ""  # the registry's method name for the contract (GEMM only): direct, fused-cast, drain, external
    tier: str = ""  # the contract's precision tier: high / low (GEMM), "" for single-contract kernels
    source: str = ""  # a planned row's: "registry: <row cite>" when a measured row chose the tile, else "heuristic"

    @property
    def key(self) -> tuple[str, str]:
        """The row's identity (`row_key`): the same for every spelling of its shape."""
        return row_key(self.kernel, self.shape)

    @property
    def note(self) -> str:
        """The plan's warnings, "; "-joined, as the row's KernelVerified records them."""
        return "; ".join(self.warnings)

    @property
    def shape_text(self) -> str:
        """`M=2048,K=2048,N=2048`: the shape as `ledger kernel run --shape` takes it."""
        return ",".join(f"{k}={v}" for k, v in self.shape.items())

    def labels(self) -> dict[str, Any]:
        """What the plan says of this row that its KernelVerified records, whichever runner ran it: its role, its
        stage (the plan's phase) and its note (the plan's warnings)."""
        return {"role": self.role, "stage": self.phase, "note": self.note}

    def plan_labels(self) -> dict[str, Any]:
        """The tile plan's own account a harness row records (an in-process run reports the plan it ran): the tiles
        target and the justification, None and "" for a row without a plan."""
        plan = self.plan
        return {"tiles_target": plan.tiles_target if plan else None,
                "tile_justification": plan.justification if plan else ""}

    def planned_on(self, plan: TilePlan) -> KernelRow:
        """This row on the tile plan `plan`: the tile it asks for is the plan's (None when the plan has none)."""
        return replace(self, plan=plan, tile=dict(plan.tile) or None)

    def to_json(self) -> dict:
        """A planned row as `ledger plan --json` prints it and the plan's record keeps it."""
        return {
            "kernel": self.kernel,
            "shape": dict(self.shape),
            "role": self.role,
            "phase": self.phase,
            "contract": self.contract,
            "method": self.method,
            "tier": self.tier,
            "source": self.source,
            "tile": self.plan.to_json(),
            "warnings": list(self.warnings),
            "workarounds": dict(self.workarounds),
        }
