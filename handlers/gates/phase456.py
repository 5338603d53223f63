"""Phases 4-6: optimisations that must keep the token gate, and the finalized runner.

Phase 4 (prefill) and Phase 5 (decode) measure a baseline first (5 warm-up + 20 timed runs, median), then
try each optimisation in turn, cumulatively: apply -> measure -> re-run the token gate -> keep or revert,
one `OptimizationTried` each. The baseline of both phases is the pipeline as Phase 3 verified it (no
optimisation switch on), so Phase 5's figure is compared with the decode speed before any optimisation.
Phase 6 runs the integrated runner (setup outside the timed region): TTFT, tokens/s, profile, token gate,
diagnosis.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from handlers.gates import GateOutcome, GateRun
from handlers.gates.phase23 import diagnosis_events, token_gate_events
from handlers.gates.runtime import FAULTS, SWITCHES, model_backend
from kernels.model.backend import Measurement
from kernels.thresholds import TOKEN_GATE_STEPS
from ledger.events import OptimizationTried, PerformanceMeasured

WARMUP, RUNS = 5, 20
DEFAULT_PREFILL_LEN = 128  # timed prefill length (tokens); `ledger advance --prefill-len` changes it
DECODE_STEPS = 16  # decode steps per timed decode run


def measure(backend, phase: int, n_tokens: int) -> Measurement:
    """The phase's figure on `backend`: prefill seconds (4) or seconds per decoded token (5)."""
    if phase == 4:
        return backend.measure_prefill(n_tokens, warmup=WARMUP, runs=RUNS)
    return backend.measure_decode(n_tokens, DECODE_STEPS, warmup=WARMUP, runs=RUNS)


def measure_pair(a, b, phase: int, n_tokens: int) -> tuple[Measurement, Measurement]:
    """Both sides measured interleaved (a, b, a, b, ...) so machine load drifts affect them alike."""
    one = (lambda be, w: be.measure_prefill(n_tokens, warmup=w, runs=1)) if phase == 4 else \
          (lambda be, w: be.measure_decode(n_tokens, DECODE_STEPS, warmup=w, runs=1))
    sa, sb = [], []
    for i in range(RUNS):
        sa.append(one(a, WARMUP if i == 0 else 0).median_s)
        sb.append(one(b, WARMUP if i == 0 else 0).median_s)
    metric = "prefill_s" if phase == 4 else "s_per_token"
    return (Measurement(metric, statistics.median(sa), sa, n_tokens, "wall", WARMUP),
            Measurement(metric, statistics.median(sb), sb, n_tokens, "wall", WARMUP))


def _candidates(ctx: GateRun) -> list[str]:
    """The optimisations to try: the three switches (those Phase 4 applied first), plus any a deployment
    declared for testing the gate."""
    extra = list((ctx.state.pipeline or {}).get("extra_optimisations", []))
    applied = [k for k in SWITCHES if (ctx.state.pipeline or {}).get(k) is True]
    return [*extra, *applied, *(k for k in SWITCHES if k not in applied)]


def _build(ctx: GateRun, applied: dict[str, bool], faults: set[str]):
    """The deployment's backend with exactly the switches in `applied` (and any injected test faults)."""
    return model_backend(ctx.state, ctx.config, {**{k: applied.get(k, False) for k in SWITCHES}, "faults": faults})


def _optimise(ctx: GateRun, phase: int) -> GateOutcome:
    length = int(ctx.options.get("prefill_len") or DEFAULT_PREFILL_LEN)
    n_tokens = length if phase == 4 else min(length, 64)
    metric = "prefill_s" if phase == 4 else "ms_per_token"
    what = "prefill" if phase == 4 else "decode"
    applied: dict[str, bool] = {k: False for k in SWITCHES}
    faults: set[str] = set()

    ctx.progress(f"phase {phase} baseline: {what} of {n_tokens} tokens, {WARMUP} warm-up + {RUNS} timed runs")
    base_pipe = _build(ctx, applied, faults)
    base = measure(base_pipe, phase, n_tokens).median_s
    events: list = []
    current = base
    carried_from_4 = {k for k, v in (ctx.state.pipeline or {}).items() if k in SWITCHES and v is True}
    candidates = _candidates(ctx)
    for i, name in enumerate(candidates, start=1):
        ctx.progress(f"[{i}/{len(candidates)}] {name}: apply, measure {what}, re-run the token gate")
        trial_applied, trial_faults = dict(applied), set(faults)
        if name in FAULTS:
            trial_faults.add(name)
        else:
            trial_applied[name] = True
        pipe = _build(ctx, trial_applied, trial_faults)
        trial = measure(pipe, phase, n_tokens)
        after, samples = trial.median_s, trial.samples_s
        gates = token_gate_events(ctx, pipe, f"phase{phase}:{name}", full=False)
        events.extend(gates)
        gate_ok = all(g.passed for g in gates)
        before = current
        carried = phase == 5 and name in carried_from_4
        if gate_ok and (after < before or carried):
            outcome = "applied"
            reason = f"{what} {_fmt(before, phase)} -> {_fmt(after, phase)}, token gate kept"
            if carried:  # a Phase 4 (prefill) win stays in the pipeline unless it breaks the gate
                reason = f"carried from phase 4 (prefill); {reason}"
            applied, faults, current = trial_applied, trial_faults, after
        else:
            outcome = "reverted"
            why = [] if gate_ok else [f"token gate broken ({'; '.join(_gate_why(g) for g in gates if not g.passed)})"]
            if after >= before:
                why.append(f"no speed-up ({_fmt(before, phase)} -> {_fmt(after, phase)})")
            reason = " and ".join(why)
        events.append(OptimizationTried(
            phase=phase, optimisation=name, outcome=outcome, before_s=before, after_s=after, gate_passed=gate_ok,
            reason=reason, samples={"after_samples_s": samples, "metric": metric,
                                    **({"carried_from_phase": 4} if carried else {})},
        ))
    # the verdict's two numbers: baseline and final pipelines re-measured side by side, interleaved
    ctx.progress(f"phase {phase}: baseline vs final {what}, interleaved")
    final_pipe = _build(ctx, applied, faults)
    m_base, m_final = measure_pair(base_pipe, final_pipe, phase, n_tokens)
    base, final = m_base.median_s, m_final.median_s
    events.insert(0, _perf(ctx, phase, base_pipe, n_tokens, base, m_base.samples_s, "baseline"))
    events.append(_perf(ctx, phase, final_pipe, n_tokens, final, m_final.samples_s, "final"))
    kept = [k for k, v in applied.items() if v] + sorted(faults)
    return GateOutcome(events=events, summary=f"{what} {_fmt(base, phase)} -> {_fmt(final, phase)} "
                                              f"({base / final:.2f}x) with {', '.join(kept) or 'no optimisation'}")


def _gate_why(g) -> str:
    return f"prompt {g.prompt_index} diverged at step {g.divergence_step}: {g.chosen_ours} not in reference top-5"


def _fmt(seconds: float, phase: int) -> str:
    return f"{seconds * 1e3:.2f} ms" + ("" if phase == 4 else "/token")


def _perf(ctx: GateRun, phase: int, pipe, n_tokens: int, median: float, samples: list[float], label: str):
    fields: dict[str, Any] = dict(
        phase=phase, executor=ctx.state.executor, pipeline=pipe.options, n_prompt_tokens=n_tokens,
        warmup=WARMUP, runs=RUNS,
        profile={"label": label, "samples_s": samples,
                 "measured": "baseline and final interleaved, after the trials (same machine load)"},
    )
    if phase == 4:
        fields["prefill_s"] = median
    else:
        fields["ms_per_token"] = median * 1e3
        fields["tokens_per_s"] = 1.0 / median if median > 0 else None
    return PerformanceMeasured(**fields)


def run_prefill(ctx: GateRun) -> GateOutcome:
    return _optimise(ctx, 4)


def run_decode(ctx: GateRun) -> GateOutcome:
    return _optimise(ctx, 5)


# --- Phase 6 ---------------------------------------------------------------------------------------------


def integrated_run(ctx: GateRun, tokens: np.ndarray, n_tokens: int) -> dict[str, Any]:
    """The deployment's integrated runner: setup outside the timed region, prefill + greedy decode timed."""
    return model_backend(ctx.state, ctx.config).integrated_run(tokens, n_tokens)


def run_finalize(ctx: GateRun) -> GateOutcome:
    from kernels.model.prompts import canonical_tokens

    backend = model_backend(ctx.state, ctx.config)
    gates = token_gate_events(ctx, backend, "phase6")
    layers = diagnosis_events(ctx, backend)
    tokens = np.asarray(canonical_tokens(backend.tokenizer()), np.int64)
    ctx.progress("integrated run: TTFT and tokens/s")
    r = backend.integrated_run(tokens, TOKEN_GATE_STEPS)
    perf = PerformanceMeasured(
        phase=6, executor=ctx.state.executor, pipeline=r["pipeline"], n_prompt_tokens=len(tokens), n_tokens=TOKEN_GATE_STEPS,
        ttft_s=r["ttft_s"], tokens_per_s=r["tokens_per_s"], ms_per_token=r["ms_per_token"],
        prefill_s=r["prefill_s"], setup_s=r["setup_s"], profile=r["profile"],
    )
    reasons = [f"prompt {g.prompt_index}: {_gate_why(g)}" for g in gates if not g.passed]
    return GateOutcome(events=[*gates, *layers, perf], reasons=reasons,
                       summary=f"TTFT {r['ttft_s'] * 1e3:.1f} ms, {r['tokens_per_s']:.1f} tokens/s, token gate "
                               f"{sum(g.passed for g in gates)}/{len(gates)}")
