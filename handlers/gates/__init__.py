"""The phase gates: each runs its phase's work and returns the evidence events to record.

A gate never appends: it returns a `GateOutcome` (evidence events, the gate context the state machine
needs, failure detail and triage evidence). `handlers.deploy.advance` records `PhaseStarted` + evidence in
one atomic batch, folds, asks the state machine (`DeploymentMachine.try_pass`) and records `PhasePassed`
or `PhaseFailed`. So a gate can never pass itself, and a crash mid-gate leaves the ledger as it was.

This module holds what every gate shares (`GateRun`, `GateOutcome`); `handlers.gates.table.GATES` says which
function runs which phase. The gates are imported by `handlers` only (deploy, the evaluator, the CLI).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from npu_kernels.model.config import ModelConfig
from ledger import Ledger
from ledger.events import Event
from statemachine.gate import GateContext
from statemachine.state import DeploymentState



@dataclass(frozen=True)
class GateOptions:
    """What the person asked of the gates beyond the deployment itself (`ledger advance` / `audit` flags)."""

    full: bool = False  # the token gate on all 8 prompts of a set, not 2
    prefill_len: int | None = None  # Phases 4-6 time this prefill length, not the canonical prompt's
    checkpoint: str | None = None  # Phase 7 checks the chain against this SIZE:HASH as well


@dataclass
class GateRun:
    """Everything a gate may use: the folded deployment, its resolved config, the workspace, the ledger (Phase 7)
    and the person's options. A gate reports its progress through handlers.narrate.report."""

    state: DeploymentState
    workspace: Path
    ledger: Ledger | None = None  # only Phase 7 reads the ledger itself (to replay it)
    options: GateOptions = field(default_factory=GateOptions)

    @property
    def model_path(self) -> Path:
        return Path(self.state.model_path)

    @property
    def config(self) -> ModelConfig:
        fields = {k: v for k, v in (self.state.config or {}).items() if k in ModelConfig.__dataclass_fields__}
        return ModelConfig(**fields)


@dataclass
class GateOutcome:
    events: list[Event]
    context: GateContext = field(default_factory=GateContext)
    reasons: list[str] = field(default_factory=list)  # failure detail beyond the machine's unmet criterion
    triage: list[dict[str, Any]] = field(default_factory=list)  # evidence dicts for handlers.triage
    summary: str = ""


Gate = Callable[[GateRun], GateOutcome]

