"""A plan as PhaseStarted records it, and rebuilt from that record.

`plan_sources(rows)` is what Phase 1's PhaseStarted keeps of its plan (per row: kernel, shape, the source of
its tile - `registry: <cite>` or `heuristic` - contract, method, tier, tile); `replan(config, target,
sources)` rebuilds that plan for whoever runs a row of it later (a Phase 1 worker job, a re-verification):
the registry's rows come back with the recorded tile (`RecordedChoices` answers as a registry would), the
rest by the heuristic, which is pure. Imports: npu_kernels.model.plan, npu_kernels.numerics (row, tiles).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from npu_kernels.model.config import ModelConfig
from npu_kernels.model.plan import HEURISTIC, MeasuredChoice, plan
from npu_kernels.numerics.row import KernelRow, row_key
from npu_kernels.numerics.tiles import plan_tile

REGISTRY_PREFIX = "registry: "


@dataclass
class RecordedChoices:
    """A recorded plan's choices (PhaseStarted.plan_sources["rows"]) answering as a registry would: the rows
    the registry chose come back with the recorded tile; heuristic rows re-derive (the heuristic is pure)."""

    rows: list[dict[str, Any]]

    def row(self, kernel: str, shape: dict[str, Any]) -> dict[str, Any] | None:
        key = row_key(kernel, shape)
        return next((r for r in self.rows if row_key(r["kernel"], r["shape"]) == key), None)

    def best(self, kernel: str, shape: dict[str, Any], tier: str) -> MeasuredChoice | None:
        r = self.row(kernel, shape)
        if r is None or not str(r.get("source", "")).startswith(REGISTRY_PREFIX) or (tier and r.get("tier") != tier):
            return None
        tile = {k: v for k, v in r["tile"].items() if k not in ("herd_m", "herd_n", "method")}
        herd = (r["tile"]["herd_m"], r["tile"]["herd_n"]) if kernel == "gemm" else None
        return MeasuredChoice(tile, r["source"][len(REGISTRY_PREFIX):], r.get("method", ""), r.get("tier", ""), herd)

    def failed_methods(self, kernel: str, shape: dict[str, Any]) -> dict[str, str]:
        return {}


def plan_sources(rows: list[KernelRow]) -> list[dict[str, Any]]:
    """What PhaseStarted records of a plan: per row its key, the source of its tile and what was chosen."""
    return [{"kernel": r.kernel, "shape": dict(r.shape), "source": r.source, "contract": r.contract,
             "method": r.method, "tier": r.tier, "tile": dict(r.plan.tile)} for r in rows]


def replan(config: ModelConfig, target: str, sources: dict[str, Any] | None, weights: str = "bf16") -> list[KernelRow]:
    """The plan a PhaseStarted recorded (`plan_sources`), rebuilt: registry rows as recorded, the rest by the
    heuristic; without recorded sources (ledgers written before them) the heuristic plan."""
    if not sources:
        return plan(config, target=target, weights=weights)
    recorded = RecordedChoices(list(sources.get("rows") or []))
    return [_as_recorded(r, recorded.row(r.kernel, r.shape), target)
            for r in plan(config, target=target, registry=recorded, weights=weights)]


def _as_recorded(row: KernelRow, rec: dict[str, Any] | None, target: str) -> KernelRow:
    """A heuristic row the recorded plan moved off a failing method, replayed on the recorded method."""
    if rec is None or rec.get("source") != HEURISTIC or not rec.get("method") or rec["method"] == row.method:
        return row
    tile = plan_tile(row.kernel, row.shape, target, {"method": rec["method"]} if row.kernel == "gemm" else None)
    return replace(row, contract=rec["contract"], method=rec["method"], tier=rec["tier"]).planned_on(tile)
