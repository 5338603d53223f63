"""Registry-first planning for the handlers: the plan `ledger plan` prints and Phase 1 runs, and that plan's
record.

* `planning_registry(ledger)` is the registry the planner asks (registry.lookup.PlanningRegistry): the
  ledger's KernelVerified rows as they stand, and `$MLIR_AIR_DIR`'s kernel_registry/ when the variable is set;
* `deployment_plan(config, target, ledger)` -> (rows, plan_sources): the plan (npu_kernels.model.plan, each row
  saying `registry: <cite>` or `heuristic`) and what Phase 1's PhaseStarted records of it: the registry it
  was made from (`ledger_seq`, the mlir-air files read with their sha256) and per row its source and choice;
* `recorded_sources(events, attempt)`: the plan_sources a Phase 1 attempt's PhaseStarted recorded (None in
  ledgers written before them); `npu_kernels.model.plan_record.replan` rebuilds the plan from it, so a worker
  job or a re-verification runs a row exactly as the attempt planned it.

The evaluator re-derives the sources from the same registry (handlers.evaluator.replay.plan_source_findings).
"""

from __future__ import annotations

from typing import Any, Iterable

from npu_kernels.model.config import ModelConfig
from npu_kernels.model.plan import DEFAULT_SEQ, plan
from npu_kernels.model.plan_record import plan_sources
from npu_kernels.numerics.row import KernelRow
from ledger.record import RecordedEvent
from registry.lookup import PlanningRegistry
from npu_kernels.settings import env_get
from ledger.streams import deployment_stream

ENV_MLIR_AIR = "MLIR_AIR_DIR"  # npu_kernels.mlir_air.table.ENV_MLIR_AIR


def planning_registry(ledger, mlir_air_dir: str | None = None, deployment: str | None = None) -> PlanningRegistry:
    """The ledger's registry now, plus MLIR_AIR_DIR's kernel_registry/ (or `mlir_air_dir`) when set. Without the
    rows of `deployment` itself: a deployment is planned from evidence other than its own Phase 1 (a retry of
    Phase 1 plans what its first attempt planned, so the rows that attempt passed are carried, not re-run)."""
    own = deployment_stream(deployment) if deployment else None
    events = [e for e in ledger.all_events() if e.type == "KernelVerified" and e.stream_id != own]
    return PlanningRegistry(events, mlir_air_dir or env_get(ENV_MLIR_AIR) or None)


def workspace_registry(app) -> PlanningRegistry:
    """`planning_registry` for a command run in a workspace (`kernel run`'s comparison line, `triage`'s fix check):
    its ledger read-only when it has one (a SQLite workspace without a `.ledger/` has none: nothing is created),
    plus MLIR_AIR_DIR's kernel_registry/."""
    if app is not None and (not app.db_url.startswith("sqlite") or (app.workspace / ".ledger").is_dir()):
        app.read_only = True
        return planning_registry(app.ledger)
    return PlanningRegistry([], env_get(ENV_MLIR_AIR) or None)


def deployment_weights(state) -> str:
    """The weight format a deployment declared at init (npu_kernels.model.plan.PLAN_WEIGHTS, npu_kernels.perf.q4nx.WEIGHTS):
    "q4nx-device" for an on-device 4-bit deployment, "bf16" otherwise (a host-dequantised bundle runs the bf16
    pipeline). Phase 1 plans with it, its model backend runs and prices it, the evaluator re-derives with it."""
    return "q4nx-device" if (state.quantisation or {}).get("style") == "device" else "bf16"


def deployment_plan(config: ModelConfig, target: str, ledger=None, deployment: str | None = None,
                    weights: str = "bf16", seq: int = DEFAULT_SEQ) -> tuple[list[KernelRow], dict[str, Any]]:
    """The registry-first plan of `config` on `target` and its record (see the module docstring); without a
    ledger, the registry is MLIR_AIR_DIR's alone (or none); `deployment`: the one planned (its own rows left out);
    `weights`: npu_kernels.model.plan's weight format (bf16, q4nx-host: the bf16 rows; q4nx-device: the 4-bit ones);
    `seq`: the padded prefill length (`ledger plan --seq`; Phase 1 plans at the default)."""
    registry = planning_registry(ledger, deployment=deployment) if ledger is not None else PlanningRegistry(
        (), env_get(ENV_MLIR_AIR) or None)
    rows = plan(config, target=target, seq=seq, registry=registry, weights=weights)
    return rows, {**registry.record(), "rows": plan_sources(rows)}


def recorded_sources(events: Iterable[RecordedEvent], attempt: int) -> dict[str, Any] | None:
    """PhaseStarted(phase 1, attempt).plan_sources from a deployment's stream (None: not recorded)."""
    found = None
    for e in events:
        if e.type == "PhaseStarted" and e.payload.get("phase") == 1 and e.payload.get("attempt") == attempt:
            found = e.payload.get("plan_sources")
    return found
