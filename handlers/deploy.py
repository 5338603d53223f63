"""Deployment handlers: init, advance, resume, lesson, status, history.

Each is short: load the stream, fold, check, run the work, append with `expected_version`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from handlers.evaluator.audit import Finding, chain_findings
from handlers.gates import GateOutcome, GateRun
from handlers.gates.phase7 import evaluate_in_fresh_process
from handlers.gates.table import GATES
from handlers.planning import planning_registry
from handlers.provenance import stamp_toolchain
from handlers.triage.engine import triage_evidence, triage_text
from handlers.triage.registry_check import check_fixes
from handlers.uow import DeploymentError, DeploymentUnit, stream_id
from kernels.model.architecture import assess, default_name, load_raw_config, resolve
from kernels.model.digest import changed_files, invalidated_phases, model_digest
from ledger import Ledger
from ledger.checkpoints import CheckpointRecord
from ledger.events import (
    ArchitectureAssessed,
    BlockerRaised,
    ConfigResolved,
    DeploymentRequested,
    DeploymentResumed,
    Event,
    FailureTriaged,
    LessonRecorded,
    Measured,
    ModelDigested,
    PhaseFailed,
    PhasePassed,
    PhaseStarted,
)
from registry.model_docs import model_dir_name
from registry.names import name_problem
from statemachine.fold import FoldError, fold
from statemachine.gate import GateContext, GateRejected
from statemachine.machine import DeploymentMachine
from statemachine.phases import Phase, Status

log = structlog.get_logger("npu_ledger.deploy")


class OutOfScope(DeploymentError):
    """Raised when `init` assessed the architecture as out of scope (the assessment is recorded)."""


# --- init --------------------------------------------------------------------------------------------------


def init(
    ledger: Ledger,
    model: str,
    *,
    name: str | None = None,
    target: str = "npu2",
    dtype: str = "bf16",
    executor: str = "emulated",
    pipeline: dict[str, Any] | None = None,
    workspace: Path | None = None,
) -> str:
    """Record a new deployment of the model at `model` (HF folder or config.json); return its name.

    A name the projections cannot hold (registry.names: length, control characters) is refused first."""
    path = Path(model).expanduser().resolve()
    name = name or default_name(path)
    problem = name_problem(name, workspace)
    if problem:
        raise DeploymentError(problem)
    raw = load_raw_config(path)  # malformed or missing config: ModelConfigError, nothing recorded
    unit = DeploymentUnit(ledger, name, must_exist=False)
    if unit.events:
        raise DeploymentError(f"deployment {name!r} exists already (use --name to start another)")
    _refuse_folder_clash(ledger, name)
    folder = path if path.is_dir() else path.parent
    requested = DeploymentRequested(
        model_path=str(folder), name=name, target=target, dtype=dtype, executor=executor,
        hf_model_id=raw.get("_name_or_path") or None, pipeline=pipeline or {},
    )
    assessment = assess(raw)
    events: list = [requested, ArchitectureAssessed(**assessment.event_fields())]
    if assessment.in_scope:
        cfg = resolve(raw)
        config_file = folder / "config.json" if path.is_dir() else path
        digest = hashlib.sha256(config_file.read_bytes()).hexdigest()
        events.append(ConfigResolved(**cfg.to_dict(), source_sha256=digest))
    unit.commit(events)
    if not assessment.in_scope:
        raise OutOfScope(f"{name}: {assessment.architecture} is out of scope: " + " ".join(assessment.reasons))
    return name


def _refuse_folder_clash(ledger: Ledger, name: str) -> None:
    """Two deployments must not project to one llms/<folder>/ (compared case-insensitively: macOS, Windows)."""
    folder = model_dir_name(name)
    for other in (s.split(":", 1)[1] for s in ledger.streams("deployment:")):
        if other != name and model_dir_name(other).lower() == folder.lower():
            raise DeploymentError(f"deployment name {name!r} projects to llms/{folder}/, the folder of deployment "
                                  f"{other!r}; choose another --name")


# --- advance -------------------------------------------------------------------------------------------------


@dataclass
class AdvanceReport:
    name: str
    ran: list[dict[str, Any]] = field(default_factory=list)  # {phase, attempt, passed, reasons, summary}
    stopped: str = ""
    status: str = ""

    @property
    def failed(self) -> bool:
        return any(not r["passed"] for r in self.ran)


def advance(
    ledger: Ledger,
    name: str,
    *,
    until: int | None = None,
    workspace: Path,
    progress: Callable[[str], None] = lambda m: None,
    options: dict[str, Any] | None = None,
) -> AdvanceReport:
    """Run the next gate(s) up to `until` (default: as far as the gates go), stopping at the first failure."""
    unit = DeploymentUnit(ledger, name)
    report = AdvanceReport(name)
    while True:
        state = unit.state
        if state.status is Status.REJECTED:
            raise DeploymentError(f"{name} was rejected at assessment: it cannot advance")
        if state.status is Status.NEEDS_HUMAN_REVIEW:
            reasons = "; ".join(b.reason for b in state.blockers) or "a gate failed twice"
            raise DeploymentError(f"{name} needs human review ({reasons}); fix it, then `ledger resume {name} --note ...`")
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
                stop_if_model_changed(unit, progress)
            attempt = state.attempts.get(phase, 0) + 1
            progress(f"phase {int(phase)} ({phase.title}), attempt {attempt}")
            started_at = _now()
            outcome = gate(GateRun(state=state, workspace=workspace, ledger=ledger, progress=progress, options=options or {}))
            digest = next((e.digest for e in outcome.events if isinstance(e, ModelDigested)), state.model_digest)
            open_attempt(unit, phase, attempt, outcome.context, bind(stamp_toolchain(outcome.events, state.executor), digest),
                         started_at=started_at)
        attempt = unit.state.open_attempt.number
        passed = judge_attempt(unit, phase, attempt, outcome)
        report.ran.append(passed)
        if not passed["passed"]:
            break
    report.status = unit.state.status.value
    return report


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


def stop_if_model_changed(unit: DeploymentUnit, progress: Callable[[str], None] = lambda m: None) -> None:
    """Re-hash the model folder; if it changed since Phase 0, record a blocker naming the changed files and
    the phases whose evidence they invalidate, and raise `ModelChanged`."""
    state = unit.state
    if state.digest is None:
        return
    progress("re-hashing the model folder (config.json and weights)")
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


def _triage(unit: DeploymentUnit, failed_seq: int, outcome, reasons: list[str]) -> None:
    """Match the failure against the playbook rules and record what matched (nothing when none does)."""
    matches: list = []
    registry = planning_registry(unit.ledger) if any(e.get("kernel") == "gemm" for e in outcome.triage) else None
    for evidence in outcome.triage:  # a fix the registry records failing for the shape is not offered
        found = triage_evidence(evidence, text=evidence.get("transcript"))
        matches.extend(check_fixes(found, evidence, registry) if registry is not None else found)
    matches.extend(triage_text("\n".join(reasons)))
    best: dict[str, Any] = {}
    for m in matches:
        j = m.to_json()
        if j["rule_id"] not in best or j["confidence"] > best[j["rule_id"]]["confidence"]:
            best[j["rule_id"]] = j
    ranked = sorted(best.values(), key=lambda j: (-j["confidence"], j["rule_id"]))
    summary = ranked[0]["root_cause"] if ranked else "no known failure pattern matches"
    unit.commit([FailureTriaged(subject_seq=failed_seq, subject_type="PhaseFailed", matches=ranked, summary=summary)])


# --- resume, lesson ---------------------------------------------------------------------------------------------


def resume(ledger: Ledger, name: str, note: str) -> None:
    unit = DeploymentUnit(ledger, name)
    state = unit.state
    if state.status is not Status.NEEDS_HUMAN_REVIEW or not state.blockers:
        raise DeploymentError(f"{name} has no active blocker to resume from (status {state.status.value})")
    if not note.strip():
        raise DeploymentError("say what was fixed: --note \"...\"")
    unit.commit([DeploymentResumed(phase=int(state.blockers[-1].phase), note=note.strip())])


def lesson(ledger: Ledger, name: str, text: str, phase: int | None = None) -> int:
    unit = DeploymentUnit(ledger, name)
    return unit.commit([LessonRecorded(text=text.strip(), phase=phase)])[0]


# --- read side ------------------------------------------------------------------------------------------------


def status(ledger: Ledger, name: str | None = None) -> list[dict[str, Any]]:
    names = [name] if name else [s.split(":", 1)[1] for s in ledger.streams("deployment:")]
    rows = []
    for n in names:
        try:
            state = DeploymentUnit(ledger, n).state
        except FoldError as e:  # one impossible stream is reported; every other deployment is still listed
            rows.append({"name": n, "status": "unreplayable", "error": str(e), "next_phase": None,
                         "phases_passed": [], "executor": "", "target": "", "last_verdict": "", "blockers": [],
                         "triage": None, "evaluation": None, "version": None})
            continue
        triage = state.last_triage
        rows.append({
            "name": n,
            "status": state.status.value,
            "next_phase": int(state.next_phase) if state.next_phase is not None else None,
            "phases_passed": sorted(int(p) for p in state.passed),
            "executor": state.executor,
            "target": state.target,
            "last_verdict": state.last_verdict,
            "blockers": [{"seq": b.seq, "phase": int(b.phase), "reason": b.reason} for b in state.blockers],
            "triage": None if triage is None else {
                "subject_seq": triage.subject_seq, "summary": triage.summary,
                "matches": [{k: m.get(k) for k in ("rule_id", "root_cause", "remedy", "confidence")} for m in triage.matches[:3]],
            },
            "evaluation": state.evaluation,
            "version": state.version,
        })
    return rows


def history(ledger: Ledger, name: str) -> list[dict[str, Any]]:
    events = ledger.read_stream(stream_id(name))
    if not events:
        raise DeploymentError(f"no deployment named {name!r}")
    fold(events)  # refuse to narrate an impossible stream
    return [{"seq": e.seq, "version": e.version, "at": e.recorded_at, "type": e.type, "payload": e.payload} for e in events]


# --- audit ----------------------------------------------------------------------------------------------------


@dataclass
class AuditReport:
    name: str
    verdict: str
    findings: list[dict[str, Any]]
    remeasured: dict[str, Any]
    recorded: bool
    status: str
    not_recorded_because: str = ""


def audit(ledger: Ledger, name: str, *, workspace: Path, checkpoint: str | None = None,
          progress: Callable[[str], None] = lambda m: None) -> AuditReport:
    """Phase 7. At phase7 it runs the gate; on a deployed model it re-audits (a FAIL blocks it again).

    The evaluation itself always runs in a fresh process that reads only the ledger, the workspace's
    checkpoint record and the model folder. A stream that cannot even be replayed is reported without
    recording anything; so is every evaluation of a ledger opened read-only (an auditor's read-only copy):
    the verdict is printed and its exit status set, nothing is written.
    """
    events = ledger.read_stream(stream_id(name))
    if not events:
        raise DeploymentError(f"no deployment named {name!r}")
    try:
        unit = DeploymentUnit(ledger, name)
    except FoldError as e:
        findings = chain_findings(ledger, checkpoint, {x.seq for x in events},
                                  CheckpointRecord.for_workspace(workspace, ledger.url))
        findings.append(Finding("error", e.seq, "replay", str(e)))
        return AuditReport(name, "FAIL", [f.to_json() for f in findings], {}, False, "unreplayable",
                           "the stream cannot be replayed")
    state = unit.state
    if ledger.read_only and state.status in (Status.PHASE7, Status.DEPLOYED):
        ctx = GateRun(state=state, workspace=workspace, ledger=ledger, progress=progress)
        _, evaluation = evaluate_in_fresh_process(ctx, checkpoint)
        return AuditReport(name, evaluation.verdict, evaluation.findings, evaluation.remeasured, False,
                           state.status.value, "the ledger is read-only")
    if state.status is Status.PHASE7:
        if state.attempt_open(Phase.EVALUATION):
            # an evaluation interrupted before its verdict: its evidence is not trusted, evaluate afresh
            ctx = GateRun(state=state, workspace=workspace, ledger=ledger, progress=progress)
            rerun, evaluation = evaluate_in_fresh_process(ctx, checkpoint)
            unit.commit([*bind(rerun, state.model_digest), evaluation])
            judge_attempt(unit, Phase.EVALUATION, unit.state.open_attempt.number, GateOutcome(events=[]))
            report = AdvanceReport(name, status=unit.state.status.value)
        else:
            report = advance(ledger, name, until=7, workspace=workspace, progress=progress,
                             options={"checkpoint": checkpoint})
        unit = DeploymentUnit(ledger, name)
        last = next(e for e in reversed(unit.events) if e.type == "EvaluationRecorded")
        p = last.payload
        return AuditReport(name, p["verdict"], p["findings"], p["remeasured"], True, report.status)
    if state.status is not Status.DEPLOYED:
        raise DeploymentError(f"{name} is at {state.status.value}: the evaluator runs once Phase 6 has passed")
    ctx = GateRun(state=state, workspace=workspace, ledger=ledger, progress=progress)
    rerun, evaluation = evaluate_in_fresh_process(ctx, checkpoint)
    unit.commit([*bind(rerun, state.model_digest), evaluation])
    if evaluation.verdict == "FAIL":
        first = next((f["message"] for f in evaluation.findings if f["severity"] == "error"), "re-audit failed")
        unit.commit([BlockerRaised(phase=7, reason=f"re-audit FAIL: {first}")])
    return AuditReport(name, evaluation.verdict, evaluation.findings, evaluation.remeasured, True,
                       unit.state.status.value)
