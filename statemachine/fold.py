"""State is a fold: `apply(state, recorded_event) -> state` over one deployment stream.

`fold(events)` replays a stream from nothing; it is how every command and the evaluator get state. Each
step checks `version == previous + 1` and that the event is possible at that point; anything else raises
`FoldError` naming the event (type, seq, version). Every status change the fold makes must be a row of
`lifecycle.TRANSITIONS`, so the table, not this module, says which moves exist.

Rules beyond the table:

* Lifecycle: `DeploymentRequested` first and once; `ArchitectureAssessed` (in scope -> phase0, out of
  scope -> rejected); `PhaseStarted(n, attempt)` only while phase n is the next gate, no attempt open, and
  `attempt` one more than the last attempt of n; `PhasePassed` / `PhaseFailed` only for the open attempt.
* Evidence (KernelVerified, BlockValidated, LayerDiagnosed, TokenGateChecked, OptimizationTried,
  PerformanceMeasured, WeightsChecked, ReferenceBaselineRecorded, FailureTriaged, EvaluationRecorded,
  LessonRecorded, and ConfigResolved) is attached to the open attempt when one is open.
* Retries: a gate's first PhaseFailed leaves it the next gate (the next attempt is the retry). A failure
  with no retry left -- the second since the last resume, the first after a `DeploymentResumed`, or a
  Phase 7 failure whose attempt's last EvaluationRecorded says FAIL (an independent FAIL is not retried
  without a human) -- moves the deployment to `needs_human_review` at once. From there only
  `BlockerRaised` (for that phase) and then `DeploymentResumed` (which needs an active blocker) lead back.
* Inconclusive: `PhaseInconclusive` closes the open attempt without passing and without counting as a failure
  (the gate stays the next gate); the INCONCLUSIVE_IN_A_ROW-th in a row of a phase (none of PhasePassed, PhaseFailed
  or DeploymentResumed of it between) moves the deployment to `needs_human_review` at once.
* `PhasePassed(7)` needs the attempt's last EvaluationRecorded to say PASS or PASS-with-warnings.
* `ConfigResolved` and `ModelDigested` are refused once Phase 0 has passed: the later gates' evidence was
  judged against them. The last `ModelDigested` is the deployment's digest (`state.digest`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import reduce

from ledger.events import (
    ArchitectureAssessed,
    BlockerRaised,
    BlockValidated,
    ConfigResolved,
    ConvStateChecked,
    DeploymentRequested,
    DeploymentResumed,
    EvaluationRecorded,
    Event,
    FailureTriaged,
    KernelVerified,
    LayerDiagnosed,
    LessonRecorded,
    ModelDigested,
    OptimizationTried,
    PerformanceMeasured,
    PhaseFailed,
    PhaseInconclusive,
    PhasePassed,
    PhaseStarted,
    QuantisationBudgetMeasured,
    QuantisedBundleRead,
    ReferenceBaselineRecorded,
    SpeculationChecked,
    TokenGateChecked,
    WeightsChecked,
)
from ledger.record import RecordedEvent
from statemachine.lifecycle import edges
from statemachine.phases import Phase, Status
from statemachine.state import EVALUATION_PASSES, Attempt, Blocker, DeploymentState, Evidence, PassedPhase

EVIDENCE_TYPES: tuple[type[Event], ...] = (
    ModelDigested,
    KernelVerified,
    BlockValidated,
    ConvStateChecked,
    LayerDiagnosed,
    TokenGateChecked,
    OptimizationTried,
    PerformanceMeasured,
    SpeculationChecked,
    WeightsChecked,
    ReferenceBaselineRecorded,
    QuantisedBundleRead,
    QuantisationBudgetMeasured,
    FailureTriaged,
    EvaluationRecorded,
    LessonRecorded,
    ConfigResolved,
)

_EDGES = frozenset((e.trigger, e.source, e.dest) for e in edges())
_TRIGGERS_FROM = frozenset((trigger, source) for trigger, source, _ in _EDGES)


class FoldError(ValueError):
    """Raised when a stream cannot be folded: a version gap, or an event impossible at its position.

    The message and the attributes name the offending event (`event_type`, `seq`, `version`).
    """

    def __init__(self, rec: RecordedEvent, why: str) -> None:
        self.event_type, self.seq, self.version = rec.type, rec.seq, rec.version
        super().__init__(f"{_describe(rec)} seq={rec.seq} version={rec.version}: {why}")


def _describe(rec: RecordedEvent) -> str:
    phase = rec.payload.get("phase") if isinstance(rec.payload, dict) else None
    return f"{rec.type}(phase={phase})" if phase is not None else rec.type


def fold(events: Iterable[RecordedEvent]) -> DeploymentState:
    """Replay one deployment stream from nothing; raises `FoldError` on an empty or impossible stream."""
    state = reduce(apply, events, None)
    if state is None:
        raise ValueError("cannot fold an empty stream: a deployment starts with DeploymentRequested")
    return state


def apply(state: DeploymentState | None, rec: RecordedEvent) -> DeploymentState:
    """The state after one more event; `state` None means "before the stream's first event"."""
    try:
        event = rec.event
    except (KeyError, ValueError) as e:
        raise FoldError(rec, f"unreadable event: {e}") from e
    if state is None:
        if not isinstance(event, DeploymentRequested):
            raise FoldError(rec, "a deployment stream must start with DeploymentRequested")
        if rec.version != 1:
            raise FoldError(rec, f"version gap: the first event must have version 1, got {rec.version}")
        return _requested(rec, event)
    if rec.stream_id != state.stream_id:
        raise FoldError(rec, f"belongs to stream {rec.stream_id!r}, not {state.stream_id!r}")
    if rec.version != state.version + 1:
        raise FoldError(rec, f"version gap: expected version {state.version + 1} after {state.version}")
    if rec.seq <= state.last_seq:
        raise FoldError(rec, f"seq does not increase (previous seq {state.last_seq})")
    step = _STEPS.get(type(event))
    if step is None:
        raise FoldError(rec, "not a deployment event")
    return replace(step(state, rec, event), version=rec.version, last_seq=rec.seq)


def _require_row(state: DeploymentState, rec: RecordedEvent, trigger: str) -> None:
    """Refuse an event whose trigger has no row from the current status in TRANSITIONS."""
    if (trigger, state.status.value) not in _TRIGGERS_FROM:
        raise FoldError(rec, f"impossible in status {state.status.value!r} (no {trigger} transition from it)")


def _move(state: DeploymentState, rec: RecordedEvent, trigger: str, dest: Status, **changes) -> DeploymentState:
    """Change status along a row of TRANSITIONS, or refuse naming the missing row."""
    if (trigger, state.status.value, dest.value) not in _EDGES:
        raise FoldError(rec, f"impossible in status {state.status.value!r} (no {trigger} transition to {dest.value})")
    return replace(state, status=dest, **changes)


def _requested(rec: RecordedEvent, e: DeploymentRequested) -> DeploymentState:
    return DeploymentState(
        name=e.name, stream_id=rec.stream_id, version=rec.version, last_seq=rec.seq, status=Status.REQUESTED,
        next_phase=None, model_path=e.model_path, hf_model_id=e.hf_model_id, target=e.target, dtype=e.dtype,
        executor=e.executor, pipeline=dict(e.pipeline), quantisation=dict(e.quantisation),
        drafter=dict(e.drafter),
    )


def _requested_again(state: DeploymentState, rec: RecordedEvent, e: DeploymentRequested) -> DeploymentState:
    raise FoldError(rec, f"deployment {state.name!r} was already requested")


def _assessed(state: DeploymentState, rec: RecordedEvent, e: ArchitectureAssessed) -> DeploymentState:
    if e.in_scope:
        return _move(state, rec, "assess", Status.PHASE0, architecture=e, next_phase=Phase.REFERENCE,
                     last_verdict=f"architecture {e.architecture} in scope")
    return _move(state, rec, "reject", Status.REJECTED, architecture=e,
                 last_verdict=f"architecture {e.architecture} out of scope: {'; '.join(e.reasons)}")


def _started(state: DeploymentState, rec: RecordedEvent, e: PhaseStarted) -> DeploymentState:
    phase = Phase(e.phase)
    if state.status is Status.NEEDS_HUMAN_REVIEW:
        raise FoldError(rec, f"the deployment needs human review at phase {state.next_phase}: resume it first")
    if state.status is not phase.status:
        raise FoldError(rec, f"phase {int(phase)} is not the next gate in status {state.status.value!r}")
    if state.open_attempt is not None:
        raise FoldError(rec, f"attempt {state.open_attempt.number} of phase {int(phase)} is still open "
                             f"(started at seq {state.open_attempt.started_seq})")
    expected = state.attempt_number(phase)
    if e.attempt != expected:
        raise FoldError(rec, f"attempt {e.attempt} of phase {int(phase)}: expected attempt {expected}")
    return replace(state, attempts={**state.attempts, phase: e.attempt},
                   open_attempt=Attempt(phase=phase, number=e.attempt, started_seq=rec.seq,
                                        plan=None if e.plan is None else
                                        tuple((row["kernel"], dict(row["shape"])) for row in e.plan)))


def _open_attempt(state: DeploymentState, rec: RecordedEvent, phase: Phase, attempt: int) -> Attempt:
    open_ = state.open_attempt
    if open_ is None or open_.phase != phase:
        raise FoldError(rec, f"no open attempt of phase {int(phase)} (PhaseStarted missing)")
    if open_.number != attempt:
        raise FoldError(rec, f"attempt {attempt} is not the open attempt {open_.number} of phase {int(phase)}")
    return open_


def _passed(state: DeploymentState, rec: RecordedEvent, e: PhasePassed) -> DeploymentState:
    phase = Phase(e.phase)
    _require_row(state, rec, phase.pass_trigger)
    attempt = _open_attempt(state, rec, phase, e.attempt)
    if phase is Phase.EVALUATION:
        evaluations = attempt.of_type(EvaluationRecorded)
        said = evaluations[-1].event.verdict if evaluations else "nothing"
        if said not in EVALUATION_PASSES:
            raise FoldError(rec, f"Phase 7 passes only on an EvaluationRecorded PASS; the attempt's says {said}")
    dest = Status.DEPLOYED if phase is Phase.EVALUATION else Phase(phase + 1).status
    record = PassedPhase(phase=phase, attempt=e.attempt, seq=rec.seq, evidence_seqs=tuple(e.evidence_seqs),
                         summary=e.summary, evidence=attempt.evidence)
    verdict = f"phase {int(phase)} ({phase.title}) passed, attempt {e.attempt}"
    return _move(state, rec, phase.pass_trigger, dest, open_attempt=None, passed={**state.passed, phase: record},
                 inconclusive={**state.inconclusive, phase: 0},
                 next_phase=dest.phase, last_verdict=f"{verdict}: {e.summary}" if e.summary else verdict)


def _failed(state: DeploymentState, rec: RecordedEvent, e: PhaseFailed) -> DeploymentState:
    phase = Phase(e.phase)
    _require_row(state, rec, phase.fail_trigger)
    closed = _open_attempt(state, rec, phase, e.attempt)
    dest = Status.NEEDS_HUMAN_REVIEW if state.escalates_on_failure() else phase.status
    return _move(state, rec, phase.fail_trigger, dest, open_attempt=None,
                 failed_attempts={**state.failed_attempts, phase: (*state.failed_attempts.get(phase, ()), closed)},
                 failures={**state.failures, phase: state.failures.get(phase, 0) + 1},
                 inconclusive={**state.inconclusive, phase: 0},
                 last_verdict=f"phase {int(phase)} ({phase.title}) failed, attempt {e.attempt}: "
                              f"{'; '.join(e.reasons)}")


def _inconclusive(state: DeploymentState, rec: RecordedEvent, e: PhaseInconclusive) -> DeploymentState:
    phase = Phase(e.phase)
    _require_row(state, rec, phase.inconclusive_trigger)
    _open_attempt(state, rec, phase, e.attempt)
    dest = Status.NEEDS_HUMAN_REVIEW if state.escalates_on_inconclusive() else phase.status
    in_a_row = state.inconclusive.get(phase, 0) + 1
    return _move(state, rec, phase.inconclusive_trigger, dest, open_attempt=None,
                 inconclusive={**state.inconclusive, phase: in_a_row},
                 last_inconclusive={"seq": rec.seq, "phase": int(phase), "attempt": e.attempt, "tries": e.tries,
                                    "in_a_row": in_a_row, "reasons": list(e.reasons)},
                 last_verdict=f"phase {int(phase)} ({phase.title}) INCONCLUSIVE, attempt {e.attempt} (no verdict: "
                              f"neither a pass nor a failure; {in_a_row} in a row): {'; '.join(e.reasons)}")


def _blocker(state: DeploymentState, rec: RecordedEvent, e: BlockerRaised) -> DeploymentState:
    _require_row(state, rec, "raise_blocker")
    if state.open_attempt is not None:
        raise FoldError(rec, f"attempt {state.open_attempt.number} of phase {int(state.open_attempt.phase)} is "
                             "open: close it with PhaseFailed before raising a blocker")
    deployed = state.status is Status.DEPLOYED
    if deployed and e.phase != Phase.EVALUATION:
        raise FoldError(rec, "a deployed model can only be blocked by its evaluation (phase 7)")
    if not deployed and e.phase != state.next_phase:
        raise FoldError(rec, f"the deployment is at phase {state.next_phase}, not phase {e.phase}")
    blocker = Blocker(seq=rec.seq, phase=Phase(e.phase), reason=e.reason)
    extra = {"next_phase": Phase.EVALUATION} if deployed else {}
    return _move(state, rec, "raise_blocker", Status.NEEDS_HUMAN_REVIEW, blockers=(*state.blockers, blocker), **extra,
                 last_verdict=f"blocked at phase {e.phase}: {e.reason}")


def _resumed(state: DeploymentState, rec: RecordedEvent, e: DeploymentResumed) -> DeploymentState:
    phase = Phase(e.phase)
    if not state.blockers:
        raise FoldError(rec, "no active blocker to resume from (BlockerRaised missing)")
    if phase != state.next_phase:
        raise FoldError(rec, f"the blocker is at phase {state.next_phase}, not phase {int(phase)}")
    return _move(state, rec, "resume", phase.status, blockers=(), failures={**state.failures, phase: 0},
                 inconclusive={**state.inconclusive, phase: 0},
                 resumes={**state.resumes, phase: state.resumes.get(phase, 0) + 1},
                 last_verdict=f"resumed at phase {int(phase)}: {e.note}")


def _evidence(state: DeploymentState, rec: RecordedEvent, e: Event) -> DeploymentState:
    if isinstance(e, ConfigResolved) and Phase.REFERENCE in state.passed:
        raise FoldError(rec, "the config cannot change after Phase 0 passed")
    if isinstance(e, ModelDigested) and Phase.REFERENCE in state.passed:
        raise FoldError(rec, "the model digest cannot change after Phase 0 passed")
    if state.open_attempt is not None:
        attempt = state.open_attempt
        state = replace(state, open_attempt=replace(attempt, evidence=(*attempt.evidence, Evidence(rec.seq, e))))
    if isinstance(e, ConfigResolved):
        return replace(state, config=e.to_payload())
    if isinstance(e, ModelDigested):
        return replace(state, digest=Evidence(rec.seq, e))
    if isinstance(e, OptimizationTried) and e.outcome != "skipped":
        applied = {k: v for k, v in state.applied_optimisations.items() if k != e.optimisation}
        if e.outcome == "applied":
            applied[e.optimisation] = rec.seq
        return replace(state, applied_optimisations=applied,
                       pipeline={**state.pipeline, e.optimisation: e.outcome == "applied"})
    if isinstance(e, FailureTriaged):
        return replace(state, last_triage=e)
    if isinstance(e, EvaluationRecorded):
        return replace(state, evaluation=e.verdict)
    return state


_Step = Callable[[DeploymentState, RecordedEvent, Event], DeploymentState]
_STEPS: dict[type[Event], _Step] = {
    DeploymentRequested: _requested_again,
    ArchitectureAssessed: _assessed,
    PhaseStarted: _started,
    PhasePassed: _passed,
    PhaseFailed: _failed,
    PhaseInconclusive: _inconclusive,
    BlockerRaised: _blocker,
    DeploymentResumed: _resumed,
    **{t: _evidence for t in EVIDENCE_TYPES},
}
