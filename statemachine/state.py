"""What a deployment is, as the fold of its events says: `DeploymentState` and its small records.

Every value here is built by `statemachine.fold` and never stored. The dataclasses are frozen; their dict
fields are fresh copies made by `apply` and are to be read, not mutated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger.events import (
    ArchitectureAssessed,
    EvaluationRecorded,
    Event,
    FailureTriaged,
)
from statemachine.phases import Phase, Status

ATTEMPTS_PER_GATE = 2  # each gate gets one retry ...
ATTEMPTS_AFTER_RESUME = 1  # ... and a human fix (DeploymentResumed) buys exactly one more attempt
EVALUATION_PASSES = ("PASS", "PASS-with-warnings")
# Inconclusive attempts (PhaseInconclusive: the device run timed out on each of its DEVICE_RUN_TRIES = 3 fresh
# processes, npu_kernels.mlir_air.lock) in a row that go to a human. Never counted toward ATTEMPTS_PER_GATE: no verdict
# is not a failure. Two: mlir-air sees a TDR on "a few percent of NPU2 dispatches" (gemma4_e2b_q4nx/Makefile@15135e8),
# so at 5% one inconclusive attempt (3 timeouts in a row) is 1.3e-4 - rare, worth one more automatic attempt - and two
# (6 in a row) 1.6e-8: not chance but a hung device or build, which only a person at the machine can clear.
INCONCLUSIVE_IN_A_ROW = 2


@dataclass(frozen=True)
class Evidence:
    """One evidence event of an attempt: its global seq and the typed event."""

    seq: int
    event: Event


@dataclass(frozen=True)
class Attempt:
    """An attempt at a gate: opened by PhaseStarted, closed by PhasePassed, PhaseFailed or PhaseInconclusive."""

    phase: Phase
    number: int
    started_seq: int
    evidence: tuple[Evidence, ...] = ()
    plan: tuple[tuple[str, dict[str, Any]], ...] | None = None  # PhaseStarted's (kernel, shape) rows, if any

    def of_type(self, event_type: type[Event]) -> list[Evidence]:
        """The evidence of one event type, in stream order."""
        return [e for e in self.evidence if isinstance(e.event, event_type)]


@dataclass(frozen=True)
class PassedPhase:
    """A gate that opened: the PhasePassed seq, the evidence it cites and the evidence its attempt holds."""

    phase: Phase
    attempt: int
    seq: int
    evidence_seqs: tuple[int, ...]
    summary: str
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class Blocker:
    seq: int
    phase: Phase
    reason: str


@dataclass(frozen=True)
class DeploymentState:
    """A deployment as of its last folded event.

    `status` is `phaseN` while phase N is the next gate (`next_phase` = N); in `needs_human_review`
    `next_phase` keeps the phase that stopped. `attempts` holds the last attempt number started per phase,
    `open_attempt` the attempt in progress (at most one: only the next gate can be attempted) with its
    evidence. `failures` counts PhaseFailed per phase since the last DeploymentResumed of that phase,
    `resumes` the DeploymentResumed per phase, `inconclusive` the PhaseInconclusive in a row per phase (an attempt
    that gave no verdict: neither a pass nor a failure). `blockers` are the BlockerRaised not yet followed by a
    DeploymentResumed.
    """

    name: str
    stream_id: str
    version: int
    last_seq: int
    status: Status
    next_phase: Phase | None
    model_path: str
    hf_model_id: str | None
    target: str
    dtype: str
    executor: str
    pipeline: dict[str, Any] = field(default_factory=dict)  # requested options + applied optimisations
    quantisation: dict[str, Any] = field(default_factory=dict)  # DeploymentRequested.quantisation (4-bit)
    drafter: dict[str, Any] = field(default_factory=dict)  # DeploymentRequested.drafter (speculative decoding)
    applied_optimisations: dict[str, int] = field(default_factory=dict)  # name -> seq of OptimizationTried
    architecture: ArchitectureAssessed | None = None
    config: dict[str, Any] | None = None  # the ConfigResolved payload
    attempts: dict[Phase, int] = field(default_factory=dict)
    open_attempt: Attempt | None = None
    failures: dict[Phase, int] = field(default_factory=dict)
    # the closed attempts that failed, per phase, with their evidence (Phase 1 carries rows that passed there)
    failed_attempts: dict[Phase, tuple[Attempt, ...]] = field(default_factory=dict)
    resumes: dict[Phase, int] = field(default_factory=dict)
    # PhaseInconclusive per phase since its last PhasePassed / PhaseFailed / DeploymentResumed (in a row), and the
    # last one's reasons and tries (shown by `ledger status`)
    inconclusive: dict[Phase, int] = field(default_factory=dict)
    last_inconclusive: dict[str, Any] | None = None
    passed: dict[Phase, PassedPhase] = field(default_factory=dict)
    blockers: tuple[Blocker, ...] = ()
    last_verdict: str = ""
    last_triage: FailureTriaged | None = None
    evaluation: str | None = None  # verdict of the last EvaluationRecorded
    digest: Evidence | None = None  # the last ModelDigested: what the deployment's evidence must be bound to

    @property
    def model_digest(self) -> str | None:
        """The deployment's model digest (None before Phase 0 recorded one)."""
        return self.digest.event.digest if self.digest else None

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        """The evidence of the open attempt (empty when none is open)."""
        return self.open_attempt.evidence if self.open_attempt else ()

    def attempt_number(self, phase: int) -> int:
        """The number a PhaseStarted of `phase` must carry now: one more than its last attempt."""
        return self.attempts.get(Phase(phase), 0) + 1

    def attempt_open(self, phase: int) -> bool:
        return self.open_attempt is not None and self.open_attempt.phase == phase

    def escalates_on_inconclusive(self) -> bool:
        """True when a PhaseInconclusive of the open attempt moves the deployment to `needs_human_review`: it would be
        the INCONCLUSIVE_IN_A_ROW-th of its phase in a row. The handler appends BlockerRaised in the same batch."""
        attempt = self.open_attempt
        return attempt is not None and self.inconclusive.get(attempt.phase, 0) + 1 >= INCONCLUSIVE_IN_A_ROW

    def escalates_on_failure(self) -> bool:
        """True when a PhaseFailed of the open attempt moves the deployment to `needs_human_review`.

        That is the case when the gate's retry is spent (second failure, or first failure after a
        DeploymentResumed), or when the open attempt is Phase 7's and its last EvaluationRecorded says FAIL:
        an independent evaluation's FAIL is never retried without a human. A handler recording such a
        failure appends BlockerRaised in the same batch; a resume needs an active blocker.
        """
        attempt = self.open_attempt
        if attempt is None:
            return False
        allowed = ATTEMPTS_AFTER_RESUME if self.resumes.get(attempt.phase) else ATTEMPTS_PER_GATE
        if self.failures.get(attempt.phase, 0) + 1 >= allowed:
            return True
        evaluations = attempt.of_type(EvaluationRecorded)
        return attempt.phase == Phase.EVALUATION and bool(evaluations) and evaluations[-1].event.verdict == "FAIL"
