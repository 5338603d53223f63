"""Phase 1 — kernels: every planned (kernel, shape) verified on the deployment's executor.

One `KernelVerified` per planned row (with tile config, tiles in flight and provenance); a failing
shape gets one retry (recorded too: the gate reads the latest verdict per shape). The gate context
carries the plan, so the state machine refuses a Phase 1 that skipped a planned shape.

On mlir-air every harness outcome is evidence: a build error, a Python traceback (a shape assertion), a
timeout or a lock timeout becomes a FAIL row with `not_measured` saying which, the command, the exit status,
the transcript's sha256 and its last lines, and is triaged (handlers/triage/rules.toml); the loop goes on
with the other rows and the phase fails naming the failing kernels. A run that printed a verdict is parsed
(kernels/mlir_air/transcript.py) and, when its `Index` lines list every mismatch, the near-zero atol
artifact rule applies to it as to an emulated row.

Re-advancing after a failure re-runs only what failed: a row that was acceptable in a failed attempt of
Phase 1 (same executor, target, contract and planned tile) is recorded again as a copy with
`carried_from_seq` naming the original measurement; gate 1 checks that copy field by field against the
original in the failed attempt (statemachine.predicates, gate 1), so a carried row is exactly the
evidence that was measured, never a new claim.
"""

from __future__ import annotations

import platform
from datetime import datetime, timezone

from handlers.gates import GateOutcome, GateRun
from kernels.perf.evidence import EvidenceError, check_measurement
from kernels.mlir_air.lock import HarnessTimeout, NpuLockTimeout
from kernels.mlir_air.table import HarnessConfigError
from kernels.mlir_air.output import TranscriptError, sha256_text
from kernels.numerics.tiles import TileRuleViolation
from ledger.events import KernelVerified
from statemachine.checks import atol_artifact
from statemachine.gate import GateContext


def run(ctx: GateRun) -> GateOutcome:
    from handlers.planning import deployment_plan

    state = ctx.state
    rows, sources = deployment_plan(ctx.config, state.target, ctx.ledger)  # registry first, each row says its source
    events: list = []
    triage: list = []
    failures: list[str] = []
    failed_kernels: list[str] = []
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    host = platform.node() or "unknown"
    evidence_of: dict[str, str] = {}  # transcript sha256 -> the row it is evidence for
    passed_before = _passed_before(state)
    n_carried = 0
    for i, row in enumerate(rows, start=1):
        shape_text = ",".join(f"{k}={v}" for k, v in row.shape.items())
        carried = _carry(passed_before, state, row)
        if carried is not None:
            ctx.progress(f"[{i}/{len(rows)}] {row.kernel} {shape_text}: passed in attempt "
                         f"{carried.provenance.get('attempt_of_phase', '?')}, carried (seq {carried.carried_from_seq})")
            events.append(carried)
            n_carried += 1
            continue
        ctx.progress(f"[{i}/{len(rows)}] {row.kernel} {shape_text} ({row.role}, {row.phase})")
        try:
            tries, transcript = verify_row(state, row, when=when, host=host)
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
            tail = event.provenance.get("tail") or [""]
            failures.append(f"{row.kernel} {shape_text}: not measured ({event.not_measured}), exit status "
                            f"{event.provenance.get('returncode')}: {tail[-1][:200]}")
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
    context = GateContext(planned_kernels=[(r.kernel, r.shape) for r in rows], plan_sources=sources)
    n_pass = len(rows) - len(failed_kernels)
    n_caveat = sum(1 for e in events if e.caveat)
    return GateOutcome(events=events, context=context, reasons=failures, triage=triage,
                       summary=f"{n_pass}/{len(rows)} planned kernel shapes pass on {state.executor}/{state.target}"
                               + (f" ({n_carried} carried from the failed attempt, not re-run)" if n_carried else "")
                               + (f" ({n_caveat} GEMM rows FAIL only by the near-zero atol artifact)" if n_caveat else ""))


def verify_row(state, row, *, when: str | None = None, host: str | None = None, executor=None,
               toolchain: dict | None = None) -> tuple[list[KernelVerified], str | None]:
    """Every verification of one planned row: the first, and one retry when it FAILs without the documented
    caveat (the gate reads the latest verdict per shape); the last transcript when a harness ran.

    This is what a distributed Phase 1 job runs (handlers.workers): `executor` is an executor instance to
    use instead of the deployment's by name (a worker's MlirAirExecutor with its own NPU lock, a stand-in),
    `toolchain` replaces the recorded toolchain of emulated/torch rows (a declared stand-in fault). Raises
    TileRuleViolation / EvidenceError like the gate (nothing to record)."""
    when = when or datetime.now(timezone.utc).strftime("%Y-%m-%d")
    host = host or platform.node() or "unknown"
    shape_text = ",".join(f"{k}={v}" for k, v in row.shape.items())
    tries: list[KernelVerified] = []
    transcript = None
    for attempt in (1, 2):  # one retry per failing shape
        event, transcript = verify_once(state, row, shape_text, when, host, attempt, executor=executor,
                                    toolchain=toolchain)
        tries.append(event)
        if event.verdict == "PASS" or event.caveat or event.not_measured:  # a rerun would repeat it
            break
    return tries, transcript


def row_contract(state, row) -> str | None:
    """The contract a planned row runs on: the plan's, on every executor (kernels.model.plan decides the tier
    once: small-K GEMMs on bf16-out-low), so the emulated rehearsal runs the kernel the hardware runs."""
    return row.contract or None


def _passed_before(state) -> dict[tuple, tuple[int, int, KernelVerified]]:
    """(kernel_key, contract) -> (seq of the measurement, its attempt number, event) for every row that was
    acceptable (PASS, or FAIL only by the atol artifact) in a failed attempt of Phase 1, latest first."""
    from statemachine.gate import kernel_key
    from statemachine.phases import Phase

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
    from kernels.numerics.catalog import get_spec
    from statemachine.gate import kernel_key

    contract = row_contract(state, row) or get_spec(row.kernel).default_contract
    hit = passed_before.get((*kernel_key(row.kernel, row.shape), contract))
    if hit is None:
        return None
    origin_seq, attempt_no, e = hit
    if (e.executor, e.target) != (state.executor, state.target):
        return None
    if any(e.tile.get(k) != v for k, v in (row.tile.tile or {}).items()):
        return None
    original = _original(state, origin_seq) or e
    return original.model_copy(update={
        "carried_from_seq": origin_seq,
        "note": "; ".join(x for x in (original.note, f"passed in Phase 1 attempt {attempt_no} (seq {origin_seq}); "
                                      "carried, not re-run") if x),
    })


def _original(state, seq: int) -> KernelVerified | None:
    from statemachine.phases import Phase

    for attempt in state.failed_attempts.get(Phase.KERNELS, ()):
        for ev in attempt.evidence:
            if ev.seq == seq and isinstance(ev.event, KernelVerified):
                return ev.event
    return None


def verify_once(state, row, shape_text: str, when: str, host: str, attempt: int, *, executor=None,
                toolchain: dict | None = None) -> tuple[KernelVerified, str | None]:
    """One verification of a planned row on the deployment's executor (no retry): its KernelVerified, and the
    transcript when a harness ran. The gate (through `verify_row`) and the evaluator's re-measurement
    (`handlers.evaluator.remeasure`) both call it, so a re-measured row runs exactly the gate's code path."""
    from kernels.toolchain import current_toolchain, with_npu_ledger

    tile = dict(row.tile.tile) or None  # the planner's TilePlan
    note = "; ".join(row.warnings)
    if state.executor == "mlir-air":
        from kernels.backends.kernel_runners import make_executor

        contract = row_contract(state, row)
        try:
            run = (executor or make_executor("mlir-air", state.target)).run_harness(row.kernel, row.shape, tile, contract)
        except (TranscriptError, HarnessTimeout, NpuLockTimeout) as e:
            return _not_measured(state, row, tile, note, when, attempt, e)
        fields = run.kernel_verified_kwargs(state.target)
        check_measurement(row.kernel, row.shape, fields["contract"],
                          **{k: v for k, v in fields.items() if k not in ("kernel", "shape", "contract", "method", "tier")})
        fields["provenance"] = {**fields["provenance"], "attempt": attempt,
                                "toolchain": with_npu_ledger(fields["provenance"].get("toolchain"), "mlir-air")}
        event = KernelVerified(**fields, role=row.role, stage=row.phase, note=note,
                               tiles_target=row.tile.tiles_target, tile_justification=row.tile.justification)
        artifact = atol_artifact(event)
        if artifact:  # the Index lines listed every mismatch: the documented atol artifact re-derives
            event = event.model_copy(update={"caveat": "near-zero-atol-artifact",
                                             "note": "; ".join(x for x in (note, artifact) if x)})
        return event, run.transcript
    from kernels.numerics.run import blas_threads, run_kernel

    forced = (state.pipeline or {}).get("forced_tiles", {}).get(row.kernel)
    if forced:  # fault injection: a tile forced past the planner (tests of the gate and of triage)
        tile = {**(tile or {}), **forced}
    result = run_kernel(row.kernel, row.shape, executor=executor or state.executor, target=state.target, tile=tile,
                        force_tile=bool(forced), contract=row_contract(state, row))
    command = f"ledger kernel run {row.kernel} --shape {shape_text} --executor {state.executor} --target {state.target}"
    from kernels.perf import modelled_kernel_figures

    event = KernelVerified(
        **result.event_fields(), source=_source(state.executor), role=row.role, stage=row.phase, measured_at=when,
        provenance={"command": command, "host": host, "attempt": attempt, "seed": 0,
                    "blas_threads": blas_threads(), "toolchain": toolchain or current_toolchain(state.executor)},
        note=note,
        modelled_npu2=modelled_kernel_figures(row.kernel, row.shape, tile) if state.target == "npu2" else {},
    )
    artifact = atol_artifact(event)
    if artifact:  # recorded as what it is: a FAIL verdict with the documented caveat
        event = event.model_copy(update={"caveat": "near-zero-atol-artifact",
                                         "note": "; ".join(x for x in (note, artifact) if x)})
    return event, None


TAIL_LINES = 20  # the last lines of a failed harness run kept in the event (the full text is hashed)


def _not_measured(state, row, tile, note: str, when: str, attempt: int, e: Exception) -> tuple[KernelVerified, str]:
    """A harness run that produced no measurement, as a FAIL row: what ran, how it ended, the transcript's sha256
    and its last lines; error figures absent. The contract's tolerances are recorded as the ones it was held to."""
    from kernels.numerics.catalog import get_spec
    from kernels.thresholds import kernel_tolerance

    transcript = getattr(e, "transcript", None) or ""
    command = getattr(e, "command", None) or ""
    returncode = getattr(e, "returncode", None)
    message = str(e).split("\n")[0]
    if isinstance(e, NpuLockTimeout):
        kind = "lock-timeout"
    elif isinstance(e, HarnessTimeout):
        kind = "timeout"
    elif "Python exception" in message:
        kind = "traceback"
    elif "only compiled" in message:
        kind = "compile-only"
    elif returncode not in (None, 0):
        kind = "compile-error"
    else:
        kind = "unparseable"
    contract = row.contract or get_spec(row.kernel).default_contract
    rtol, atol = kernel_tolerance(row.kernel, contract)
    lines = [ln for ln in transcript.splitlines() if ln.strip()]
    provenance = {"command": command, "returncode": returncode, "host": platform.node() or "unknown",
                  "attempt": attempt, "failure": kind, "tail": lines[-TAIL_LINES:]}
    if transcript:
        provenance["transcript_sha256"] = sha256_text(transcript)
    what = {"lock-timeout": "not run: the NPU lock was not free", "timeout": "killed at its timeout",
            "traceback": "the harness raised", "compile-only": "only compiled", "compile-error": "failed to build",
            "unparseable": "printed no verdict"}[kind]
    event = KernelVerified(
        kernel=row.kernel, shape=dict(row.shape), contract=contract, executor="mlir-air", target=state.target,
        verdict="FAIL", rtol=rtol, atol=atol, tile=dict(tile or {}), herd=list(row.tile.herd),
        tiles_in_flight=row.tile.tiles_in_flight, tiles_target=row.tile.tiles_target,
        tile_justification=row.tile.justification, source="harness", role=row.role, stage=row.phase,
        provenance=provenance, measured_at=when, not_measured=kind,
        note="; ".join(x for x in (f"not measured ({kind}): {what}: {message}", note) if x),
    )
    return event, transcript


def _source(executor: str) -> str:
    return {"emulated": "emulated", "torch": "torch", "mlir-air": "harness"}.get(executor, "emulated")
