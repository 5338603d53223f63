"""`ledger audit`: Phase 7 through `advance` at phase7, a re-audit of a deployed model (a FAIL blocks it
again), and the verdict alone, recorded nowhere, on a read-only ledger or an unreplayable stream.

The evaluation is handlers.evaluator's, run in a fresh process (handlers.gates.evaluation). Imported through
`handlers.deploy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from handlers.deploy.attempts import AdvanceReport, AdvanceRequest, advance, bind, judge_attempt
from handlers.evaluator.audit import Finding, chain_findings
from handlers.gates import GateOptions, GateOutcome, GateRun
from handlers.gates.evaluation import evaluate_in_fresh_process
from handlers.uow import DeploymentError, DeploymentUnit, existing_name, stream_id
from ledger import Ledger
from ledger.checkpoints import CheckpointRecord
from ledger.events import BlockerRaised
from statemachine.fold import FoldError
from statemachine.phases import Phase, Status


@dataclass
class AuditReport:
    name: str
    verdict: str
    findings: list[dict[str, Any]]
    remeasured: dict[str, Any]
    recorded: bool
    status: str
    not_recorded_because: str = ""


def audit(ledger: Ledger, name: str, *, workspace: Path, checkpoint: str | None = None) -> AuditReport:
    """Phase 7. At phase7 it runs the gate; on a deployed model it re-audits (a FAIL blocks it again).

    The evaluation itself always runs in a fresh process that reads only the ledger, the workspace's
    checkpoint record and the model folder. A stream that cannot even be replayed is reported without
    recording anything; so is every evaluation of a ledger opened read-only (an auditor's read-only copy):
    the verdict is printed and its exit status set, nothing is written.
    """
    name = existing_name(ledger, name)  # NFC unless an older ledger holds it otherwise
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
        ctx = GateRun(state=state, workspace=workspace, ledger=ledger)
        _, evaluation = evaluate_in_fresh_process(ctx, checkpoint)
        return AuditReport(name, evaluation.verdict, evaluation.findings, evaluation.remeasured, False,
                           state.status.value, "the ledger is read-only")
    if state.status is Status.PHASE7:
        if state.attempt_open(Phase.EVALUATION):
            # an evaluation interrupted before its verdict: its evidence is not trusted, evaluate afresh
            ctx = GateRun(state=state, workspace=workspace, ledger=ledger)
            rerun, evaluation = evaluate_in_fresh_process(ctx, checkpoint)
            unit.commit([*bind(rerun, state.model_digest), evaluation])
            judge_attempt(unit, Phase.EVALUATION, unit.state.open_attempt.number, GateOutcome(events=[]))
            report = AdvanceReport(name, status=unit.state.status.value)
        else:
            report = advance(ledger, AdvanceRequest(name, workspace, until=7, options=GateOptions(checkpoint=checkpoint)))
        unit = DeploymentUnit(ledger, name)
        last = next(e for e in reversed(unit.events) if e.type == "EvaluationRecorded")
        p = last.payload
        return AuditReport(name, p["verdict"], p["findings"], p["remeasured"], True, report.status)
    if state.status is not Status.DEPLOYED:
        raise DeploymentError(f"{name} is at {state.status.value}: the evaluator runs once Phase 6 has passed")
    ctx = GateRun(state=state, workspace=workspace, ledger=ledger)
    rerun, evaluation = evaluate_in_fresh_process(ctx, checkpoint)
    unit.commit([*bind(rerun, state.model_digest), evaluation])
    if evaluation.verdict == "FAIL":
        first = next((f["message"] for f in evaluation.findings if f["severity"] == "error"), "re-audit failed")
        unit.commit([BlockerRaised(phase=7, reason=f"re-audit FAIL: {first}")])
    return AuditReport(name, evaluation.verdict, evaluation.findings, evaluation.remeasured, True,
                       unit.state.status.value)
