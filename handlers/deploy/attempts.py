"""`ledger advance`: the gates run in order, each attempt opened, then judged by the state machine.

`advance` loops over the next phases; its two steps are public because the workers' coordinator
(handlers.workers.coordinator) runs Phase 1 between them: `open_attempt` records PhaseStarted with the
attempt's evidence in one batch, `judge_attempt` asks the state machine and records PhasePassed, or
PhaseFailed (+ BlockerRaised, + FailureTriaged). `stop_if_model_changed` re-hashes the model folder before
an attempt; `bind` stamps evidence with the model digest it was measured against. Imported through
`handlers.deploy`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from handlers import narrate
from handlers.gates import GateOptions, GateOutcome, GateRun
from handlers.gates.table import GATES
from handlers.planning import planning_registry
from handlers.provenance import stamp_toolchain
from handlers.triage.engine import triage_evidence
from handlers.triage.registry_check import check_fixes
from handlers.uow import DeploymentError, DeploymentUnit
from npu_kernels.inconclusive import Inconclusive
from npu_kernels.numerics.kernels import piece
from npu_kernels.model.digest import changed_files, invalidated_phases, model_digest
from ledger import Ledger, LedgerWriteError
from ledger.events import (
    BlockerRaised,
    Event,
    FailureTriaged,
    Measured,
    ModelDigested,
    PhaseFailed,
    PhaseInconclusive,
    PhasePassed,
    PhaseStarted,
)
from registry.text import ledger_command, shown
from statemachine.gate import GateContext, GateRejected
from statemachine.machine import DeploymentMachine
from statemachine.phases import Phase, Status
from statemachine.state import INCONCLUSIVE_IN_A_ROW, DeploymentState

log = structlog.get_logger("npu_ledger.deploy")


@dataclass
class AdvanceReport:
    name: str
    ran: list[dict[str, Any]] = field(default_factory=list)  # {phase, attempt, passed, reasons, summary}
    stopped: str = ""
    status: str = ""

    @property
    def failed(self) -> bool:
        return any(not r["passed"] for r in self.ran)


@dataclass(frozen=True)
class AdvanceRequest:
    """`ledger advance NAME`, typed: how far, with which gate options, and the check that may refuse it on the
    folded deployment before any attempt is opened (the CLI's: an mlir-air deployment without a usable checkout);
    `on_verdict` gets each phase's verdict (the dict `AdvanceReport.ran` holds) as soon as it is recorded."""

    name: str
    workspace: Path
    until: int | None = None
    options: GateOptions = field(default_factory=GateOptions)
    preflight: Callable[[DeploymentState], str | None] | None = None
    on_verdict: Callable[[dict[str, Any]], None] | None = None


def advance(ledger: Ledger, request: AdvanceRequest, unit: DeploymentUnit | None = None) -> AdvanceReport:
    """Run the next gate(s) up to `request.until` (default: as far as the gates go), stopping at the first
    failure. The deployment's stream is read and folded once; each append extends that fold (DeploymentUnit).
    `unit`: the caller's unit of work on `request.name` (fresh, nothing appended through it yet), which it then
    hands to the post-commit step (handlers.verbs.post_commit), whatever `advance` raised: the docs are rendered
    from the view it folded. Without it `advance` opens its own."""
    name, until, workspace, options = request.name, request.until, request.workspace, request.options
    unit = unit if unit is not None else DeploymentUnit(ledger, name)
    refusal = request.preflight(unit.state) if request.preflight else None
    if refusal:
        raise DeploymentError(refusal)
    report = AdvanceReport(name)
    while True:
        state = unit.state
        if state.status is Status.REJECTED:
            raise DeploymentError(f"{name} was rejected at assessment: it cannot advance")
        if state.status is Status.NEEDS_HUMAN_REVIEW:
            reasons = "; ".join(b.reason for b in state.blockers) or "a gate failed twice"
            raise DeploymentError(f"{shown(name)} needs human review ({reasons}); fix it, then "
                                  f"`{ledger_command('resume', name, '--note', '...')}`")
        if state.status is Status.DEPLOYED:
            report.stopped = f"{name} is deployed"
            break
        phase = state.next_phase
        if phase is None or (until is not None and phase > until):
            report.stopped = f"stopped before phase {phase} (--until {until})" if phase is not None else ""
            break
        gate = GATES[phase]
        outcome = None
        if not state.attempt_open(phase):  # the normal case; an open attempt means a crash after its evidence
            if phase is not Phase.EVALUATION:  # the evaluator re-hashes itself; its FAIL blocks the deployment
                stop_if_model_changed(unit)
            attempt = state.attempts.get(phase, 0) + 1
            narrate.report(f"phase {int(phase)} ({phase.title}), attempt {attempt}")
            started_at = _now()
            try:
                outcome = gate(GateRun(state=state, workspace=workspace, ledger=ledger, options=options))
            except Inconclusive as e:  # no verdict either way: neither a pass nor one of the gate's two failures
                verdict = record_inconclusive(unit, phase, attempt, e, started_at=started_at)
                report.ran.append(verdict)
                if request.on_verdict is not None:
                    request.on_verdict(verdict)
                break
            digest = next((e.digest for e in outcome.events if isinstance(e, ModelDigested)), state.model_digest)
            open_attempt(unit, phase, attempt, outcome.context, bind(stamp_toolchain(outcome.events, state.executor), digest),
                         started_at=started_at)
        attempt = unit.state.open_attempt.number
        passed = _judged(unit, phase, attempt, outcome)
        report.ran.append(passed)
        if request.on_verdict is not None:
            request.on_verdict(passed)
        if not passed["passed"]:
            break
    report.status = unit.state.status.value
    return report


def _judged(unit: DeploymentUnit, phase: Phase, attempt: int, outcome: GateOutcome | None) -> dict[str, Any]:
    """`judge_attempt`, with a verdict the database refuses (a CHECK, index or trigger on the events table that
    the tool does not install: `ledger.StoreRefused`, or a failed write) said as what it leaves: the attempt open
    with its evidence recorded, as a crash after the evidence leaves it. PhasePassed cites the evidence's seqs, so
    it cannot share their batch; the next `advance` judges that open attempt from its recorded evidence (its plan
    in PhaseStarted) without re-running the gate, once the store takes appends again."""
    try:
        return judge_attempt(unit, phase, attempt, outcome)
    except LedgerWriteError as e:
        if not unit.state.attempt_open(phase):  # the verdict is recorded; what was refused came after it (triage)
            raise
        seqs = [unit.state.open_attempt.started_seq, *(ev.seq for ev in unit.state.open_attempt.evidence)]
        raise DeploymentError(
            f"{shown(unit.name)} phase {int(phase)} attempt {attempt} is open: its evidence is recorded (seq "
            f"{min(seqs)}..{max(seqs)}), its verdict was not: {e}. Once `ledger verify` is clean, "
            f"`{ledger_command('advance', unit.name)}` judges this attempt from that evidence without re-running it"
        ) from e


def open_attempt(unit: DeploymentUnit, phase: Phase, attempt: int, context: GateContext,
                 evidence: Iterable[Event] = (), *, started_at: str | None = None) -> list[int]:
    """Open `attempt` of `phase`: one atomic batch of PhaseStarted and the attempt's evidence; returns its seqs.

    PhaseStarted carries the context's planned (kernel, shape) rows, so an attempt interrupted before its
    verdict is judged later with its own plan (`judge_attempt` without an outcome). `started_at` (UTC ISO
    8601, default now) is when the work began: the gates record PhaseStarted after the work."""
    started = PhaseStarted(phase=int(phase), attempt=attempt, started_at=started_at or _now(), plan=_plan_of(context),
                           plan_sources=context.plan_sources)
    return unit.commit([started, *evidence])


def _plan_of(context: GateContext) -> list[dict[str, Any]] | None:
    """The gate context's planned (kernel, shape) rows as PhaseStarted records them (None: no plan)."""
    if context.planned_kernels is None:
        return None
    return [{"kernel": kernel, "shape": json.loads(shape)} for kernel, shape in sorted(context.planned_kernels)]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def bind(events: list[Event], digest: str | None) -> list[Event]:
    """The evidence events stamped with the model digest they were measured against."""
    if not digest:
        return list(events)
    return [e.model_copy(update={"model_digest": digest}) if isinstance(e, Measured) and not isinstance(e, ModelDigested)
            else e for e in events]


class ModelChanged(DeploymentError):
    """Raised when the model folder no longer hashes to the digest Phase 0 recorded (a blocker is recorded)."""


def stop_if_model_changed(unit: DeploymentUnit) -> None:
    """Re-hash the model folder; if it changed since Phase 0, record a blocker naming the changed files and
    the phases whose evidence they invalidate, and raise `ModelChanged`."""
    state = unit.state
    if state.digest is None:
        return
    narrate.report("re-hashing the model folder (config.json and weights)")
    recorded = state.digest.event
    try:
        now = model_digest(state.model_path)
        changed = changed_files(recorded.files, now.files)
        if not changed and now.digest != recorded.digest:
            changed = ["config.json"]  # same bytes cannot resolve differently; a resolver change is a config change
    except Exception as e:  # noqa: BLE001 - an unreadable folder stops the deployment like a changed one
        now, changed = None, [f"the folder itself ({e})"]
    if now is not None and now.digest == recorded.digest:
        return
    phases = invalidated_phases(changed, [int(p) for p in state.passed])
    reason = (f"model folder changed since Phase 0 (ModelDigested seq {state.digest.seq}): {', '.join(changed)}; "
              f"invalidates the evidence of phase(s) {', '.join(map(str, phases)) or 'none passed yet'}. "
              "Restore the files, or deploy the changed model as a new deployment (`ledger init --name ...`)")
    unit.commit([BlockerRaised(phase=int(state.next_phase), reason=reason)])
    raise ModelChanged(f"{unit.name}: {reason}")


def judge_attempt(unit: DeploymentUnit, phase: Phase, attempt: int, outcome: GateOutcome | None) -> dict[str, Any]:
    """Judge the open `attempt` of `phase`: ask the state machine, then record PhasePassed, or PhaseFailed
    (+ BlockerRaised when no retry is left, + FailureTriaged). Returns the verdict as `advance` reports it
    ({"phase", "attempt", "passed", "summary" | "reasons", "blocked"}).

    Without an outcome (an attempt interrupted after its evidence, judged now), the gate context is the
    one the attempt's PhaseStarted recorded: the attempt is judged with its own plan. Raises
    `SomeoneElseAdvanced` (from the unit) when the stream moved meanwhile."""
    plan = unit.state.open_attempt.plan
    outcome = outcome or GateOutcome(events=[], context=GateContext(planned_kernels=plan))
    state = unit.state
    evidence = [e.seq for e in state.open_attempt.evidence]
    machine = DeploymentMachine(state, outcome.context)
    try:
        result = machine.try_pass(phase)
    except GateRejected as rejected:
        reasons = [rejected.reason, *outcome.reasons]
        escalate = state.escalates_on_failure()
        events: list = [PhaseFailed(phase=int(phase), attempt=attempt, reasons=reasons)]
        if escalate:
            events.append(BlockerRaised(phase=int(phase), reason=f"phase {int(phase)} failed twice: {reasons[0]}"))
        seqs = unit.commit(events)
        _triage(unit, seqs[0], outcome, reasons)
        log.info("phase failed", deployment=unit.name, phase=int(phase), attempt=attempt, reason=reasons[0])
        return {"phase": int(phase), "attempt": attempt, "passed": False, "reasons": reasons, "blocked": escalate}
    summary = outcome.summary or result.reason
    unit.commit([PhasePassed(phase=int(phase), attempt=attempt, evidence_seqs=evidence, summary=summary)])
    log.info("phase passed", deployment=unit.name, phase=int(phase), attempt=attempt)
    return {"phase": int(phase), "attempt": attempt, "passed": True, "summary": summary}


def record_inconclusive(unit: DeploymentUnit, phase: Phase, attempt: int, e: Inconclusive, *,
                        started_at: str) -> dict[str, Any]:
    """Record `attempt` of `phase` as inconclusive (its device run gave no verdict on each of `e.tries` fresh processes):
    PhaseStarted, PhaseInconclusive and, when it is the INCONCLUSIVE_IN_A_ROW-th of the phase in a row, BlockerRaised,
    in one batch; then the triage of its reason (with, for a Phase 1 row's harness, the row's evidence: `e.evidence`).
    Returns the verdict as `advance` reports it, with
    "inconclusive": True (never "passed")."""
    in_a_row = unit.state.inconclusive.get(phase, 0) + 1
    escalate = in_a_row >= INCONCLUSIVE_IN_A_ROW
    reasons = [f"inconclusive: {e.reason}"]
    events: list = [PhaseStarted(phase=int(phase), attempt=attempt, started_at=started_at),
                    PhaseInconclusive(phase=int(phase), attempt=attempt, reasons=reasons, tries=e.tries)]
    if escalate:
        events.append(BlockerRaised(phase=int(phase), reason=(
            f"phase {int(phase)} inconclusive on {in_a_row} attempts in a row (the last after {e.tries} device runs "
            f"without a verdict): {e.reason}")))
    seqs = unit.commit(events)
    own = {"executor": unit.state.executor if unit.state else None, "deployment": unit.name}
    row = {k: v for k, v in (e.evidence or {}).items() if k != "transcript"}  # a Phase 1 row's hang (Inconclusive)
    text = "\n".join(x for x in (e.reason, (e.evidence or {}).get("transcript")) if x)
    matches = sorted((m.to_json() for m in triage_evidence({**row, **own}, text)),
                     key=lambda j: (-j["confidence"], j["rule_id"]))
    unit.commit([FailureTriaged(subject_seq=seqs[1], subject_type="PhaseInconclusive", matches=matches,
                                summary=matches[0]["root_cause"] if matches else "no known pattern matches")])
    log.warning("phase inconclusive", deployment=unit.name, phase=int(phase), attempt=attempt, tries=e.tries,
                in_a_row=in_a_row)
    return {"phase": int(phase), "attempt": attempt, "passed": False, "inconclusive": True, "tries": e.tries,
            "reasons": reasons, "blocked": escalate}


def _triage(unit: DeploymentUnit, failed_seq: int, outcome, reasons: list[str]) -> None:
    """Match the failure against the playbook rules and record what matched (nothing when none does)."""
    matches: list = []
    # the registry's measured configurations, where a row names a kernel it keeps a best one of (GEMM's lookup)
    registry = planning_registry(unit.ledger) if any(piece(e.get("kernel"), "best_config")
                                                     for e in outcome.triage) else None
    # the deployment's executor: an emulated one is never sent to mlir-air's `make verify` (issue 48 item 3)
    own = {"executor": unit.state.executor if unit.state else None, "deployment": unit.name}
    for evidence in outcome.triage:  # a fix the registry records failing for the shape is not offered
        evidence = {**evidence, **own}
        found = triage_evidence(evidence, text=evidence.get("transcript"))
        matches.extend(check_fixes(found, evidence, registry) if registry is not None else found)
    matches.extend(triage_evidence(own, "\n".join(reasons)))
    best: dict[str, Any] = {}
    for m in matches:
        j = m.to_json()
        if j["rule_id"] not in best or j["confidence"] > best[j["rule_id"]]["confidence"]:
            best[j["rule_id"]] = j
    ranked = sorted(best.values(), key=lambda j: (-j["confidence"], j["rule_id"]))
    summary = ranked[0]["root_cause"] if ranked else "no known failure pattern matches"
    unit.commit([FailureTriaged(subject_seq=failed_seq, subject_type="PhaseFailed", matches=ranked, summary=summary)])
