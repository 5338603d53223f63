"""Phases 4-6: optimisations that must keep the token gate, and the finalized runner.

Phase 4 optimises the prefill path, Phase 5 the decode path, with the same switches (multi-launch merge =
`fusion`, static weight BOs = `weight_residency`, intermediate BOs = `intermediate_bos`, on-device layout =
`seq_first`); a decode-path switch is recorded as `decode:<switch>`. Each phase takes its baseline from the
pipeline as the previous phase left it (Phase 5 starts from Phase 4's result), then tries each switch in
turn, cumulatively: apply -> measure -> keep or revert, one `OptimizationTried` each.

What a phase decides on is its backend's figure: on the emulated and torch executors the modelled NPU2
prefill time / ms per token of the deployment's dispatch plan (`npu_kernels.perf`; the same plan always gives the
same figure, so a verdict never depends on this machine's load), with the emulator's own wall time, measured
once at the phase's baseline and once at its final switch set on the prompt Phase 6 times, recorded beside it
as information; on hardware the measured time. A phase where no optimisation gains fails, naming why.

The token gate: on hardware (`switches_keep_numbers` False) and for a test fault, re-run after every trial.
Where the backend's switches change no number (the in-process pipeline), re-running it per switch would
record identical numbers each time: it runs once on the final switch set, and each kept switch cites those
records (`gate_context` "phase<N>:final"), which must equal the Phase 3 records number for number (the
invariance; `handlers.evaluator.replay` re-checks it). If they do not, every switch is tried again with its own
re-run, so a switch that does change the numbers is judged as on hardware.
Phase 6 runs the integrated runner (setup outside the timed region) and records the modelled TTFT / tokens/s
with the per-ELF breakdown next to the emulator's wall times; token gate and diagnosis as in Phase 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from handlers.gates import GateOutcome, GateRun
from handlers import narrate
from handlers.gates.block_and_tokens import diagnosis_events, token_gate_events
from handlers.gates.runtime import DECODE, FAULTS, SWITCHES, model_backend
from handlers.gates.speculation import speculation_event, speculation_reasons, speculation_summary
from npu_kernels.backends.base import IntegratedRun, Measurement
from npu_kernels.model.compare import token_gate_failure
from npu_kernels.model.prompts import canonical_tokens
from npu_kernels.provenance import CPU_EMULATOR, figure_provenance
from npu_kernels.thresholds import TOKEN_GATE_STEPS
from ledger.events import OptimizationTried, PerformanceMeasured
from statemachine.phases import Phase

DECODE_STEPS = 16  # decode steps of the emulator's informational wall-time decode run
# what an OptimizationTried's token-gate evidence is, besides a re-run of its own ("phase<N>:<name>")
FINAL_SET = "final"  # one re-run on the phase's final switch set, equal number for number to Phase 3's records
# what a re-run on another switch set records differently from Phase 3 (the numbers are all the rest)
UNCOMPARED = ("context", "pipeline", "provenance", "model_digest")


def _name(phase: int, switch: str) -> str:
    return switch if phase == 4 else DECODE + switch


def _applied_before(ctx: GateRun) -> dict[str, bool]:
    """Every switch an earlier phase (or this one's earlier attempt) left applied, by recorded name."""
    known = {*SWITCHES, *(DECODE + k for k in SWITCHES)}
    return {k: True for k, v in (ctx.state.pipeline or {}).items() if k in known and v is True}


def _candidates(ctx: GateRun, phase: int, applied: dict[str, bool]) -> list[str]:
    """The optimisations to try in `phase`: any a deployment declared for testing the gate, then the phase's
    switches not applied yet."""
    extra = list((ctx.state.pipeline or {}).get("extra_optimisations", [])) if phase == 4 else []
    return [*extra, *(_name(phase, k) for k in SWITCHES if not applied.get(_name(phase, k)))]


def _build(ctx: GateRun, applied: dict[str, bool], faults: set[str]):
    """The deployment's backend with exactly the switches in `applied` (and any injected test faults)."""
    return model_backend(ctx.state, ctx.config, {**applied, "faults": faults})


def info_tokens(backend, ctx: GateRun) -> int:
    """The emulator's informational wall-time prefill length: the canonical prompt, as Phase 6's integrated run
    times it (so Phases 4-6 report wall times of one prompt), unless `advance --prefill-len` says otherwise."""
    return int(ctx.options.prefill_len or len(canonical_tokens(backend.tokenizer())))


def measure(backend, phase: int, ctx: GateRun, informational: bool = True) -> Measurement:
    """The figure the phase decides on; with `informational`, the emulator's own wall time beside it."""
    info = info_tokens(backend, ctx) if informational else None
    if phase == 4:
        return backend.measure_prefill(info)
    return backend.measure_decode(info, DECODE_STEPS)  # decoding on from that prompt, as Phase 6 does


@dataclass
class _Run:
    """Where a phase's trials stand: the switches and test faults applied so far and the current figure."""

    applied: dict[str, bool]
    faults: set[str]
    current: float
    events: list = field(default_factory=list)


def _trial(ctx: GateRun, phase: int, run: _Run, name: str, gate: bool):
    """Apply `name` on top of `run`, take the decided figure, and (with `gate`) re-run the token gate on it.
    Returns (the figure, the trial's switches, its faults, the gate events or None when not re-run here)."""
    applied, faults = dict(run.applied), set(run.faults)
    if name in FAULTS:
        faults.add(name)
    else:
        applied[name] = True
    backend = _build(ctx, applied, faults)
    m = measure(backend, phase, ctx, informational=False)
    gates = token_gate_events(ctx, backend, f"phase{phase}:{name}", full=False) if gate else None
    return m, applied, faults, gates


def _decide(phase: int, run: _Run, name: str, m: Measurement, gate_ok: bool | None, gate_context: str,
            why_not: str = "") -> OptimizationTried:
    """Keep `name` when its gate held (None: judged on the final set afterwards) and the figure dropped."""
    what, before, after, source = ("prefill" if phase == 4 else "decode"), run.current, m.median_s, m.source
    if gate_ok is not False and after < before:
        outcome = "applied"
        reason = f"{what} {_fmt(before, phase)} -> {_fmt(after, phase)} ({source}), token gate kept"
    else:
        outcome = "reverted"
        why = [] if gate_ok is not False else [f"token gate broken ({why_not})"]
        if after >= before:
            why.append(f"no speed-up ({_fmt(before, phase)} -> {_fmt(after, phase)}, {source})")
        reason = " and ".join(why)
    return OptimizationTried(
        phase=phase, optimisation=name, outcome=outcome, before_s=before, after_s=after, gate_passed=gate_ok,
        gate_context=gate_context, reason=reason,
        samples={"after_samples_s": m.samples_s, "metric": m.metric, "source": source, "detail": m.detail})


def _per_switch(ctx: GateRun, phase: int, run: _Run, names: list[str]) -> None:
    """Each optimisation applied in turn with its own token-gate re-run (test faults; every switch on hardware)."""
    for name in names:
        narrate.report(f"{name}: apply, measure, re-run the token gate")
        m, applied, faults, gates = _trial(ctx, phase, run, name, gate=True)
        ok = all(g.passed for g in gates)
        why_not = "; ".join(_gate_why(g) for g in gates if not g.passed)
        tried = _decide(phase, run, name, m, ok, f"phase{phase}:{name}", why_not)
        run.events += [*gates, tried]
        if tried.outcome == "applied":
            run.applied, run.faults, run.current = applied, faults, m.median_s


def phase3_records(ctx: GateRun) -> dict[int, dict[str, Any]]:
    """The passed Phase 3 attempt's token-gate records by prompt index: what a switch must leave unchanged."""
    passed = ctx.state.passed.get(Phase.FULL_MODEL)
    return {e.event.prompt_index: e.event.to_payload() for e in (passed.evidence if passed else ())
            if type(e.event).__name__ == "TokenGateChecked" and e.event.context == "phase3"}


def differs_from_phase3(gate, records: dict[int, dict[str, Any]]) -> str | None:
    """None when `gate` records Phase 3's numbers exactly for its prompt, else what differs."""
    old = records.get(gate.prompt_index)
    if old is None:
        return f"Phase 3 recorded no prompt {gate.prompt_index}"
    new = gate.to_payload()
    diff = sorted(k for k in new if k not in UNCOMPARED and new[k] != old.get(k))
    return f"prompt {gate.prompt_index}: {', '.join(diff)} differ from Phase 3's" if diff else None


def _on_final_set(ctx: GateRun, phase: int, run: _Run, names: list[str]) -> None:
    """Switches of a backend whose switches change no number: each decided on its figure, then the token gate
    re-run once on the final switch set. When every record there equals Phase 3's number for number (the
    invariance, recorded for the evaluator to re-check) and passes, each kept switch kept the gate; otherwise
    every switch is tried again with its own re-run (`_per_switch`), so a switch that does change the numbers
    is judged as on hardware."""
    trial = _Run(dict(run.applied), set(run.faults), run.current)  # `run` moves only once the gate is known
    decided = []
    for name in names:
        m, applied, faults, _ = _trial(ctx, phase, trial, name, gate=False)
        decided.append(_decide(phase, trial, name, m, None, f"phase{phase}:{FINAL_SET}"))
        if decided[-1].outcome == "applied":
            trial.applied, trial.faults, trial.current = applied, faults, m.median_s
        narrate.report(f"{name}: {decided[-1].outcome} on its figure ({decided[-1].reason})")
    if not any(t.outcome == "applied" for t in decided):  # nothing kept: no gate to establish
        run.events += [t.model_copy(update={"gate_context": ""}) for t in decided]
        return
    narrate.report(f"token gate once on the final switch set {sorted(k for k, v in trial.applied.items() if v)}")
    gates = token_gate_events(ctx, _build(ctx, trial.applied, trial.faults), f"phase{phase}:{FINAL_SET}", full=False)
    records = phase3_records(ctx)
    problems = [_gate_why(g) for g in gates if not g.passed] + [d for g in gates if (d := differs_from_phase3(g, records))]
    run.events += gates
    if problems:
        narrate.report(f"the final switch set does not reproduce Phase 3 ({problems[0]}): each switch re-runs the gate")
        return _per_switch(ctx, phase, run, names)
    kept = (f" on the final switch set (one re-run, TokenGateChecked phase{phase}:{FINAL_SET}, equal to Phase 3's "
            "records number for number: no switch changed a number)")
    run.events += [t.model_copy(update={"gate_passed": True, "reason": t.reason + kept}) if t.outcome == "applied"
                   else t.model_copy(update={"gate_context": ""}) for t in decided]
    run.applied, run.faults, run.current = trial.applied, trial.faults, trial.current


def _optimise(ctx: GateRun, phase: int) -> GateOutcome:
    what = "prefill" if phase == 4 else "decode"
    applied = _applied_before(ctx)
    base_backend = _build(ctx, applied, set())
    m_base = measure(base_backend, phase, ctx)
    source = m_base.source
    narrate.report(f"phase {phase} baseline: {what} {_fmt(m_base.median_s, phase)} ({source})")
    run = _Run(applied, set(), m_base.median_s, [performance_event(ctx, phase, base_backend, m_base, "baseline")])
    candidates = _candidates(ctx, phase, applied)
    # a test fault changes the numbers by definition; a switch does only where the backend says it can
    switches = {_name(phase, s) for s in SWITCHES} if base_backend.switches_keep_numbers else set()
    del base_backend  # its pipeline's resident weights go now, not beside the trials' (issue 48 item 3: 1B peak RSS)
    shared = [n for n in candidates if n in switches]
    _per_switch(ctx, phase, run, [n for n in candidates if n not in shared])
    if shared:
        _on_final_set(ctx, phase, run, shared)
    final_backend = _build(ctx, run.applied, run.faults)
    m_final = measure(final_backend, phase, ctx)
    events = [*run.events, performance_event(ctx, phase, final_backend, m_final, "final")]
    kept = [k for k, v in run.applied.items() if v and k in {_name(phase, s) for s in SWITCHES}] + sorted(run.faults)
    # the figures' provenance beside their source, as Phase 6 says it: `make profile` on a twin is a rehearsal
    cls = events[-1].provenance_class
    source = source if cls in ("", source) else f"{source}, {cls}"
    reasons = []
    if not m_final.median_s < m_base.median_s:
        reasons.append(f"no {what} optimisation gains over the phase {phase - 1} result "
                       f"({_fmt(m_base.median_s, phase)} -> {_fmt(m_final.median_s, phase)}, {source}): "
                       f"every switch was already applied or was reverted")
    return GateOutcome(events=events, reasons=reasons,
                       summary=f"{what} {_fmt(m_base.median_s, phase)} -> {_fmt(m_final.median_s, phase)} "
                               f"({m_base.median_s / m_final.median_s:.2f}x, {source}) with "
                               f"{', '.join(kept) or 'no optimisation'}")


def _gate_why(g) -> str:
    """Why a token gate of Phases 4-6 failed: the criterion it misses first (never "diverged at step None" for a
    walk that agreed on every token and missed a teacher-forced bound, issue 48 item 3)."""
    return f"prompt {g.prompt_index}: {token_gate_failure(g)}"


def _fmt(seconds: float, phase: int) -> str:
    return f"{seconds * 1e3:.2f} ms" + ("" if phase == 4 else "/token")


def performance_event(ctx: GateRun, phase: int, backend, m: Measurement, label: str) -> PerformanceMeasured:
    """The PerformanceMeasured of one measurement `m` of the deployment's backend: Phase 4 records
    `prefill_s`, Phases 5-6 `ms_per_token` and tokens/s; `label` (baseline, final, engineer) goes in the
    profile with the measurement's source and samples."""
    fields: dict[str, Any] = dict(
        phase=phase, executor=ctx.state.executor, pipeline=backend.options, n_prompt_tokens=m.n_tokens,
        warmup=m.warmup, runs=len(m.samples_s),
        profile={"label": label, "source": m.source, "samples_s": m.samples_s, **m.detail},
    )
    fields["provenance_class"] = figure_provenance(m.source, m.detail.get("provenance"))
    if phase == 4:
        fields["prefill_s"] = m.median_s
    else:
        fields["ms_per_token"] = m.median_s * 1e3
        fields["tokens_per_s"] = 1.0 / m.median_s if m.median_s > 0 else None
    return PerformanceMeasured(**fields)


def run_prefill(ctx: GateRun) -> GateOutcome:
    return _optimise(ctx, 4)


def run_decode(ctx: GateRun) -> GateOutcome:
    """Phase 5: the decode switches, then, for a deployment with a drafter, the speculative-decoding gate
    (handlers.gates.speculation: exactness decides, the acceptance length is recorded as a figure)."""
    outcome = _optimise(ctx, 5)
    if not ctx.state.drafter:
        return outcome
    spec = speculation_event(ctx, outcome.events)
    if isinstance(spec, str):
        outcome.reasons.append(f"speculation: {spec}")
        return outcome
    outcome.events.append(spec)
    outcome.reasons += speculation_reasons(spec)
    outcome.summary = f"{outcome.summary}; {speculation_summary(spec)}"
    return outcome


# --- Phase 6 ---------------------------------------------------------------------------------------------


def integrated_run(ctx: GateRun, tokens: np.ndarray, n_tokens: int) -> IntegratedRun:
    """The deployment's integrated runner: setup outside the timed region, prefill + greedy decode timed."""
    return model_backend(ctx.state, ctx.config).integrated_run(tokens, n_tokens)


def sweep_reasons(curve: dict[str, Any] | None) -> list[str]:
    """A device sweep that failed unforgiven (its axis' `failures`, npu_kernels.mlir_air.sweeps: wrong_seq_len, a cause
    outside --expect-fail's closed list) fails Phase 6, as mlir-air's sweep scripts exit 1 on it; the curve keeps
    every point, an expected failure with its cause."""
    return [f"the {axis} sweep failed: {f}" for axis in ("prefill", "decode")
            for f in ((curve or {}).get(axis) or {}).get("failures", [])]


def run_finalize(ctx: GateRun) -> GateOutcome:
    backend = model_backend(ctx.state, ctx.config)
    gates = token_gate_events(ctx, backend, "phase6")
    layers = diagnosis_events(ctx, backend)
    tokens = np.asarray(canonical_tokens(backend.tokenizer()), np.int64)
    narrate.report("integrated run: TTFT and tokens/s")
    r = backend.integrated_run(tokens, TOKEN_GATE_STEPS)
    npu2 = backend.npu2_figures()
    perf = PerformanceMeasured(
        phase=6, executor=ctx.state.executor, pipeline=r.pipeline, n_prompt_tokens=npu2.seq,
        n_tokens=TOKEN_GATE_STEPS, ttft_s=npu2.ttft_s, tokens_per_s=npu2.tokens_per_s,
        ms_per_token=npu2.ms_per_token, prefill_s=npu2.prefill_s, setup_s=r.setup_s,
        profile={"source": npu2.source, "npu2": npu2.record,
                 "emulator_wall": {**r.profile, "ttft_s": r.ttft_s, "tokens_per_s": r.tokens_per_s,
                                   "ms_per_token": r.ms_per_token, "n_prompt_tokens": len(tokens)},
                 # a measured path (mlir-air's make run / profile): its per-token times are the record's own
                 **({} if npu2.modelled else {"decode_s_per_token": r.profile["decode_s_per_token"]})},
        curve=npu2.curve, provenance_class=figure_provenance(npu2.source, npu2.record.get("provenance")),
    )
    reasons = [_gate_why(g) for g in gates if not g.passed]
    reasons += sweep_reasons(npu2.curve)
    return GateOutcome(events=[*gates, *layers, perf], reasons=reasons,
                       summary=f"TTFT {npu2.ttft_s * 1e3:.1f} ms, {npu2.tokens_per_s:.1f} tokens/s "
                               f"({perf.provenance_class}, seq {npu2.seq}); integrated run "
                               f"({CPU_EMULATOR if npu2.modelled else perf.provenance_class}): TTFT "
                               f"{r.ttft_s * 1e3:.1f} ms, "
                               f"{r.tokens_per_s or 0:.1f} tokens/s; token gate {sum(g.passed for g in gates)}/{len(gates)}")
