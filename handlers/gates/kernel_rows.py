"""Phase 1 — kernels: every planned (kernel, shape) verified on the deployment's kernel runner
(`npu_kernels.backends.kernel_runners.make_runner`, chosen once per attempt).

One `KernelVerified` per planned row (with tile config, tiles in flight and provenance); a failing
shape gets one retry (recorded too: the gate reads the latest verdict per shape). The gate context
carries the plan, so the state machine refuses a Phase 1 that skipped a planned shape.

On mlir-air every harness outcome is evidence (npu_kernels/backends/harness_runner.py): a build error, a Python traceback (a shape assertion)
or a lock timeout becomes a FAIL row with `not_measured` saying which, the command, the exit status,
the transcript's sha256 and its last lines, and is triaged (handlers/triage/rules.toml); the loop goes on
with the other rows and the phase fails naming the failing kernels. A harness run killed at its timeout is re-run in
a fresh process (npu_kernels.mlir_air.lock.run_retried); when no try gave a verdict the gate runs no further row (the
device is suspect) and the attempt is recorded as inconclusive (`HarnessInconclusive`,
handlers.deploy.attempts.record_inconclusive): neither a row nor a failure, and the next attempt runs every row again.
A row that failed before it is a signal, never hidden by a later run without a verdict: the phase then fails on it. A run that printed a verdict is parsed
(npu_kernels/mlir_air/transcript.py) and, when its `Index` lines list every mismatch, the near-zero atol
artifact rule applies to it as to an emulated row.

Re-advancing after a failure re-runs only what failed: a row that was acceptable in a failed attempt of
Phase 1 (same executor, target, contract and planned tile) is recorded again as a copy with
`carried_from_seq` naming the original measurement; gate 1 checks that copy field by field against the
original in the failed attempt (statemachine.predicates, gate 1), so a carried row is exactly the
evidence that was measured, never a new claim.
"""

from __future__ import annotations

import platform
from dataclasses import replace
from datetime import datetime, timezone

from handlers.gates import GateOutcome, GateRun
from handlers import narrate
from npu_kernels.backends.kernel_runners import make_runner
from npu_kernels.backends.runner_base import KernelRow, KernelRunner
from npu_kernels.inconclusive import Inconclusive
from npu_kernels.mlir_air.output import error_excerpt
from npu_kernels.mlir_air.table import HarnessConfigError
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.tiles import TileRuleViolation
from npu_kernels.perf.evidence import EvidenceError
from ledger.events import KernelVerified
from statemachine.checks import atol_artifact
from statemachine.gate import GateContext, kernel_key
from statemachine.phases import Phase
from handlers.planning import deployment_plan, deployment_weights


def run(ctx: GateRun) -> GateOutcome:
    state = ctx.state
    rows, sources = deployment_plan(ctx.config, state.target, ctx.ledger, state.name, deployment_weights(state))  # registry first, each row says its source
    events: list = []
    triage: list = []
    failures: list[str] = []
    failed_kernels: list[str] = []
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    host = platform.node() or "unknown"
    evidence_of: dict[str, str] = {}  # transcript sha256 -> the row it is evidence for
    passed_before = _passed_before(state)
    runner = make_runner(state.executor, state.target, inconclusive_up=True)  # one runner for every row of the attempt
    n_carried = 0
    for i, row in enumerate(rows, start=1):
        shape_text = row.shape_text
        carried = _carry(passed_before, state, row)
        if carried is not None:
            narrate.report(f"[{i}/{len(rows)}] {row.kernel} {shape_text}: passed in attempt "
                         f"{carried.provenance.get('attempt_of_phase', '?')}, carried (seq {carried.carried_from_seq})")
            events.append(carried)
            n_carried += 1
            continue
        narrate.report(f"[{i}/{len(rows)}] {row.kernel} {shape_text} ({row.role}, {row.phase})")
        try:
            tries, transcript = verify_row(runner, kernel_row(state, row), when=when, host=host)
            events.extend(tries)
            event = tries[-1]
        except TileRuleViolation as e:  # a hard hardware constraint: the shape cannot run as planned
            failures.append(f"{row.kernel} {shape_text}: not run, {e}")
            triage.append({"kind": "kernel", "kernel": row.kernel, "shape": row.shape, "transcript": str(e)})
            failed_kernels.append(row.kernel)
            continue
        except EvidenceError as e:  # a harness transcript that cannot be this row's evidence: nothing recorded
            failures.append(f"{row.kernel} {shape_text}: transcript refused: {e}")
            failed_kernels.append(row.kernel)
            continue
        except HarnessConfigError as e:  # no command can be built: not run, nothing measured
            failures.append(f"{row.kernel} {shape_text}: not run, {e}")
            failed_kernels.append(row.kernel)
            continue
        except Inconclusive as e:  # no verdict on any fresh-process try: the device is suspect, no more rows run
            failures.append(_no_verdict(e, f"Phase 1 row {i}/{len(rows)} {row.kernel} {shape_text}", row, failed_kernels))
            break  # a row that failed before it is a signal: the phase fails on it (its evidence stays recorded)
        digest = event.provenance.get("output_sha256")
        if digest:
            row_text = f"{row.kernel} {shape_text} {event.contract}"
            if evidence_of.setdefault(digest, row_text) != row_text:
                failures.append(f"{row_text}: transcript refused: the same transcript (sha256 {digest[:12]}) is "
                                f"already the evidence of {evidence_of[digest]}")
                events.pop()
                failed_kernels.append(row.kernel)
                continue
        if event.not_measured:
            excerpt = error_excerpt(event.provenance.get("tail") or [])  # the error line, not make's last word
            failures.append(f"{row.kernel} {shape_text}: not measured ({event.not_measured}), exit status "
                            f"{event.provenance.get('returncode')}: {excerpt[:200]}")
            triage.append({"kind": "kernel", **event.to_payload(), "transcript": transcript,
                           "runtime_hang": event.not_measured == "timeout" or None})
            failed_kernels.append(row.kernel)
        elif event.verdict != "PASS" and not event.caveat:
            failures.append(f"{row.kernel} {shape_text}: mismatches {event.mismatches}/{event.n_elements}, "
                            f"max_abs {event.max_abs} vs atol {event.atol}")
            triage.append({"kind": "kernel", **event.to_payload(), "transcript": transcript})
            failed_kernels.append(row.kernel)
    if failed_kernels:
        names = sorted(set(failed_kernels), key=failed_kernels.index)
        failures.insert(0, f"failing kernel(s): {', '.join(names)} ({len(failed_kernels)} of {len(rows)} rows); "
                           "the other rows are recorded and are carried, not re-run, by the next attempt")
    context = GateContext(planned_kernels=[r.key for r in rows], plan_sources=sources)
    n_pass = len(rows) - len(failed_kernels)
    n_caveat = sum(1 for e in events if e.caveat)
    return GateOutcome(events=events, context=context, reasons=failures, triage=triage,
                       summary=f"{n_pass}/{len(rows)} planned kernel shapes pass on {state.executor}/{state.target}"
                               + (f" ({n_carried} carried from the failed attempt, not re-run)" if n_carried else "")
                               + (f" ({n_caveat} GEMM rows FAIL only by the near-zero atol artifact)" if n_caveat else ""))


def _no_verdict(e: Inconclusive, where: str, row: KernelRow, failed_kernels: list[str]) -> str:
    """A row whose harness gave no verdict on any try: with nothing failed before it the attempt gives none either -
    `Inconclusive` again, naming the row and carrying its triage evidence; after a failure, the reason line the failed
    phase records for it (the module docstring)."""
    if failed_kernels:
        return f"{where}: not run to a verdict, the rows after it not run: {e.reason}"
    evidence = {"kind": "kernel", "kernel": row.kernel, "shape": dict(row.shape), "tile": dict(row.tile or {}),
                "contract": row.contract or get_spec(row.kernel).default_contract, "runtime_hang": True,
                "transcript": getattr(e, "transcript", None)}
    raise Inconclusive(f"{where}: {e.reason}; the rows before it are not recorded", e.tries, evidence) from e


def verify_row(runner: KernelRunner, row: KernelRow, *, when: str | None = None,
               host: str | None = None) -> tuple[list[KernelVerified], str | None]:
    """Every verification of one row: the first, and one retry when it FAILs without the documented caveat (the
    gate reads the latest verdict per shape); the last transcript when a harness ran.

    This is what a distributed Phase 1 job (handlers.workers) and `ledger reverify` run, each on the runner it
    was given (a worker's with its own NPU lock, a stand-in fault's). Raises TileRuleViolation / EvidenceError
    like the gate (nothing to record)."""
    when = when or datetime.now(timezone.utc).strftime("%Y-%m-%d")
    host = host or platform.node() or "unknown"
    tries: list[KernelVerified] = []
    transcript = None
    for attempt in (1, 2):  # one retry per failing shape
        event, transcript = verify_once(runner, row, when, host, attempt)
        tries.append(event)
        if event.verdict == "PASS" or event.caveat or event.not_measured:  # a rerun would repeat it
            break
    return tries, transcript


def kernel_row(state, row: KernelRow) -> KernelRow:
    """A planned row as the deployment runs it: as planned, or with a test fault's forced tile
    (`state.pipeline["forced_tiles"]`, tests of the gate and of triage) merged over the planner's and forced
    past the tile rules."""
    forced = (state.pipeline or {}).get("forced_tiles", {}).get(row.kernel)
    if not forced:
        return row
    return replace(row, tile={**(row.tile or {}), **forced}, force_tile=True)


def _passed_before(state) -> dict[tuple, tuple[int, int, KernelVerified]]:
    """(kernel_key, contract) -> (seq of the measurement, its attempt number, event) for every row that was
    acceptable (PASS, or FAIL only by the atol artifact) in a failed attempt of Phase 1, latest first."""
    out: dict[tuple, tuple[int, int, KernelVerified]] = {}
    for attempt in state.failed_attempts.get(Phase.KERNELS, ()):
        latest: dict[tuple, tuple[int, KernelVerified]] = {}
        for ev in attempt.of_type(KernelVerified):
            latest[(*kernel_key(ev.event.kernel, ev.event.shape), ev.event.contract)] = (ev.seq, ev.event)
        for key, (seq, e) in latest.items():
            if e.verdict == "PASS" or (e.caveat and atol_artifact(e)):
                origin = e.carried_from_seq if e.carried_from_seq is not None else seq
                out[key] = (origin, attempt.number, e)
            else:
                out.pop(key, None)  # a later attempt's failure of the same row replaces an older pass
    return out


def _carry(passed_before: dict, state, row) -> KernelVerified | None:
    """The copy of an earlier passing measurement of this row, if it was measured the same way: same
    executor, target, contract and the planned tile (a changed plan or executor re-runs the row)."""
    contract = row.contract or get_spec(row.kernel).default_contract  # the plan's, on every executor
    hit = passed_before.get((*row.key, contract))
    if hit is None:
        return None
    origin_seq, attempt_no, e = hit
    if (e.executor, e.target) != (state.executor, state.target):
        return None
    if any(e.tile.get(k) != v for k, v in (row.tile or {}).items()):
        return None
    original = _original(state, origin_seq) or e
    return original.model_copy(update={
        "carried_from_seq": origin_seq,
        "note": "; ".join(x for x in (original.note, f"passed in Phase 1 attempt {attempt_no} (seq {origin_seq}); "
                                      "carried, not re-run") if x),
    })


def _original(state, seq: int) -> KernelVerified | None:
    for attempt in state.failed_attempts.get(Phase.KERNELS, ()):
        for ev in attempt.evidence:
            if ev.seq == seq and isinstance(ev.event, KernelVerified):
                return ev.event
    return None


def verify_once(runner: KernelRunner, row: KernelRow, when: str, host: str,
                attempt: int) -> tuple[KernelVerified, str | None]:
    """One verification of a row on `runner` (no retry): its KernelVerified, and the transcript when a harness
    ran. The gate (through `verify_row`) and the evaluator's re-measurement (`handlers.evaluator.remeasure`) both
    call it, so a re-measured row runs exactly the gate's code path. A measured FAIL whose mismatches are all the
    documented near-zero atol artifact is recorded as what it is: a FAIL with that caveat."""
    run = runner.verify(row, attempt=attempt, when=when, host=host)
    event = KernelVerified(**run.fields)
    if run.not_measured is None:
        artifact = atol_artifact(event)
        if artifact:
            event = event.model_copy(update={"caveat": "near-zero-atol-artifact",
                                             "note": "; ".join(x for x in (event.note, artifact) if x)})
    return event, run.transcript
