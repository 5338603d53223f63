"""`ledger advance NAME --distribute`: Phase 1's rows as jobs for the workers, judged by the usual predicate.

1. The attempt is opened first: `PhaseStarted(phase 1, attempt, plan)` is committed alone, before any job
   exists, so every row a worker records lands inside the attempt, and an attempt interrupted anywhere
   (coordinator killed, workers killed) is resumed and judged with its own recorded plan.
2. The plan's rows that have no KernelVerified yet, and no job queued or running, are deferred to the
   queue of the deployment's executor (one queueing lock per row: running the command twice queues once).
3. The coordinator polls the ledger, drawing `[landed/planned]` as rows arrive, until every planned row
   has its verdict, or every job left is finished (a refused row stays missing and says so).
4. `handlers.deploy.judge_attempt` asks the state machine: the same Phase 1 predicate as the local gate
   (`gate_1_all_kernels_pass`: latest verdict per shape, the plan covered, one transcript per row).
Later phases then run locally, as `ledger advance` runs them.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from procrastinate.exceptions import AlreadyEnqueued

from handlers import deploy, narrate
from handlers.gates import GateOutcome, GateRun
from handlers.planning import deployment_plan, deployment_weights
from handlers.uow import DeploymentError, DeploymentUnit, SomeoneElseAdvanced
from handlers.workers.queue import (
    FINAL_STATUSES,
    TASK_NAME,
    conninfo,
    ensure_schema,
    job_lock,
    jobs_of,
    make_app,
    queue_name,
)
from ledger import Ledger
from ledger.events import KernelVerified
from statemachine.gate import GateContext, kernel_key
from statemachine.phases import Phase, Status


class StillRunning(DeploymentError):
    """Raised when `--wait` ran out before every planned row landed; nothing was judged, the jobs go on."""


def advance_distributed(ledger: Ledger, request: deploy.AdvanceRequest, *, poll_s: float = 0.5, wait_s: float | None = None) -> deploy.AdvanceReport:
    """Run Phase 1 of `request.name` on the workers (earlier phases and later ones locally, up to `request.until`)."""
    name, until = request.name, request.until
    dsn = conninfo(ledger.url)  # a SQLite ledger: QueueUnavailable, nothing recorded
    unit = DeploymentUnit(ledger, name)
    report = deploy.AdvanceReport(name)
    if unit.state.status in (Status.REQUESTED, Status.PHASE0):  # Phase 0 first, locally
        report = deploy.advance(ledger, replace(request, until=0))
        if report.failed or (until is not None and until < 1):
            return report
        unit = DeploymentUnit(ledger, name)
    state = unit.state
    if state.status is not Status.PHASE1:  # blocked, deployed, past Phase 1: the normal advance says what to do
        return deploy.advance(ledger, request)
    refusal = request.preflight(state) if request.preflight else None
    if refusal:
        raise DeploymentError(refusal)
    attempt = open_kernel_attempt(unit)
    ensure_schema(dsn)
    _enqueue(dsn, unit, attempt)
    unit = _wait(ledger, dsn, name, attempt, poll_s, wait_s)
    if not (unit.state.attempt_open(Phase.KERNELS) and unit.state.open_attempt.number == attempt):
        report.stopped = f"attempt {attempt} of phase 1 was judged meanwhile (by another `advance`)"
        report.status = unit.state.status.value
        return report
    result = _judge(ledger, name, attempt, dsn)
    report.ran.append(result)
    if not result["passed"] or (until is not None and until <= 1):
        report.status = DeploymentUnit(ledger, name).state.status.value
        return report
    rest = deploy.advance(ledger, request)
    rest.ran[:0] = report.ran
    return rest


def open_kernel_attempt(unit: DeploymentUnit) -> int:
    """The open Phase 1 attempt's number, opening it (PhaseStarted + plan, committed alone) when none is."""
    state = unit.state
    if state.attempt_open(Phase.KERNELS):
        narrate.report(f"phase 1 (per-kernel validation), attempt {state.open_attempt.number} resumed with its recorded plan")
        return state.open_attempt.number
    deploy.stop_if_model_changed(unit)
    rows, sources = deployment_plan(GateRun(state=state, workspace=None).config, state.target, unit.ledger, state.name,
                                    deployment_weights(state))
    attempt = state.attempt_number(Phase.KERNELS)
    deploy.open_attempt(unit, Phase.KERNELS, attempt, GateContext(planned_kernels=[r.key for r in rows],
                                                                  plan_sources=sources))
    narrate.report(f"phase 1 (per-kernel validation), attempt {attempt}: {len(rows)} rows for the {state.executor} workers")
    return attempt


def landed_rows(unit: DeploymentUnit) -> dict[tuple[str, str], list]:
    """The open attempt's KernelVerified per planned (kernel, shape) key, in stream order."""
    out: dict[tuple[str, str], list] = {}
    for e in unit.state.open_attempt.evidence:
        if isinstance(e.event, KernelVerified):
            out.setdefault(kernel_key(e.event.kernel, e.event.shape), []).append(e)
    return out


def _enqueue(dsn: str, unit: DeploymentUnit, attempt: int) -> None:
    state = unit.state
    landed = landed_rows(unit)
    active = {kernel_key(j["kernel"], j["shape"]) for j in jobs_of(dsn, state.name, attempt)
              if j["status"] not in FINAL_STATUSES}
    todo = [(k, s) for k, s in state.open_attempt.plan if kernel_key(k, s) not in landed and kernel_key(k, s) not in active]
    app = make_app(dsn)
    with app.open():
        for kernel, shape in todo:
            try:
                app.configure_task(TASK_NAME, queue=queue_name(state.executor),
                                   queueing_lock=job_lock(state.name, attempt, kernel, shape)).defer(
                    deployment=state.name, attempt=attempt, kernel=kernel, shape=dict(shape))
            except AlreadyEnqueued:  # another coordinator queued it a moment ago
                pass
    narrate.report(f"queued {len(todo)} row job(s) on {queue_name(state.executor)} ({len(landed)} recorded already, "
             f"{len(active)} queued or running); start `ledger worker --executor {state.executor}` on each NPU host")


def _wait(ledger: Ledger, dsn: str, name: str, attempt: int, poll_s: float, wait_s: float | None):
    planned = None
    shown = -1
    t0 = time.monotonic()
    while True:
        unit = DeploymentUnit(ledger, name)
        if not (unit.state.attempt_open(Phase.KERNELS) and unit.state.open_attempt.number == attempt):
            return unit
        planned = planned or [kernel_key(k, s) for k, s in unit.state.open_attempt.plan]
        landed = landed_rows(unit)
        done = [key for key in planned if key in landed]
        if len(done) != shown:
            last = max((ev for key in done for ev in landed[key]), key=lambda e: e.seq, default=None)
            where = "" if last is None else \
                f" (last: {last.event.kernel} {last.event.verdict} on {last.event.provenance.get('worker', '?')})"
            narrate.report(f"[{len(done)}/{len(planned)}] rows recorded{where}")
            shown = len(done)
        if len(done) == len(planned):
            return unit
        missing = set(planned) - set(done)
        jobs = [j for j in jobs_of(dsn, name, attempt) if kernel_key(j["kernel"], j["shape"]) in missing]
        if all(j["status"] in FINAL_STATUSES for j in jobs) and {kernel_key(j["kernel"], j["shape"]) for j in jobs} >= missing:
            return DeploymentUnit(ledger, name)  # nothing more will land: judge without the refused rows
        if wait_s is not None and time.monotonic() - t0 > wait_s:
            raise StillRunning(f"{len(missing)} of {len(planned)} rows of {name} attempt {attempt} are still queued or "
                               "running; nothing was judged. Run `ledger advance --distribute` again to keep watching")
        time.sleep(poll_s)


def _judge(ledger: Ledger, name: str, attempt: int, dsn: str) -> dict[str, Any]:
    """The normal Phase 1 predicate on the attempt's evidence, with failure detail and triage like the gate's."""
    for _ in range(50):
        unit = DeploymentUnit(ledger, name)
        state = unit.state
        plan = state.open_attempt.plan
        landed = landed_rows(unit)
        jobs = {kernel_key(j["kernel"], j["shape"]): j for j in jobs_of(dsn, name, attempt)}
        reasons, triage, workers = [], [], set()
        for kernel, shape in plan:
            key = kernel_key(kernel, shape)
            if key not in landed:
                job = jobs.get(key)
                why = f"job {job['id']} {job['status']} after {job['attempts']} run(s)" if job else "no job"
                reasons.append(f"{kernel} {key[1]}: no KernelVerified ({why}; the worker's log says why)")
                continue
            last = landed[key][-1].event
            workers.add(last.provenance.get("worker", "?"))
            if last.verdict != "PASS" and not last.caveat:
                reasons.append(f"{kernel} {key[1]}: mismatches {last.mismatches}/{last.n_elements}, "
                               f"max_abs {last.max_abs} vs atol {last.atol}")
                triage.append({"kind": "kernel", **last.to_payload(), "transcript": None})
        n_pass = len(plan) - len(reasons)
        outcome = GateOutcome(events=[], context=GateContext(planned_kernels=plan), reasons=reasons, triage=triage,
                              summary=f"{n_pass}/{len(plan)} planned kernel shapes pass on {state.executor}/{state.target}"
                                      f" (distributed over {len(workers)} worker(s): {', '.join(sorted(workers))})")
        try:
            return deploy.judge_attempt(unit, Phase.KERNELS, attempt, outcome)
        except SomeoneElseAdvanced:
            continue
    raise DeploymentError(f"could not record the verdict of {name} phase 1 attempt {attempt}: the stream kept moving")
