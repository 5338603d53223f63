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
import time
from typing import Any, Callable

import numpy as np

from handlers.gates import GateOutcome, GateRun
from handlers.gates.phase23 import diagnosis_events, token_gate_events
from handlers.gates.runtime import SWITCHES, build_pipeline, hf_runner
from ledger.events import OptimizationTried, PerformanceMeasured

WARMUP, RUNS = 5, 20
DEFAULT_PREFILL_LEN = 128  # timed prefill length (tokens); `ledger advance --prefill-len` changes it
DECODE_STEPS = 16  # decode steps per timed decode run


def _prompt(ctx: GateRun, length: int) -> np.ndarray:
    """A fixed prompt of `length` tokens: the canonical prompt repeated (deterministic)."""
    from kernels.model.prompts import canonical_tokens

    base = canonical_tokens(hf_runner(str(ctx.model_path)).tokenizer)
    reps = -(-length // len(base))
    return np.asarray((base * reps)[:length], np.int64)


def _prefill_run(pipe, tokens) -> Callable[[], float]:
    """One timed prefill (seconds)."""
    def run() -> float:
        t0 = time.perf_counter()
        pipe.prefill(tokens)
        return time.perf_counter() - t0
    return run


def _decode_run(pipe, tokens) -> Callable[[], float]:
    """One timed decode run: prefill (untimed), then DECODE_STEPS greedy steps; seconds per token."""
    def run() -> float:
        rec = pipe.prefill(tokens)
        tok, pos = rec.top1_token, len(tokens)
        t0 = time.perf_counter()
        for i in range(DECODE_STEPS):
            tok = pipe.decode_step(tok, pos + i).top1_token
        return (time.perf_counter() - t0) / DECODE_STEPS
    return run


def measure(run: Callable[[], float]) -> tuple[float, list[float]]:
    """Median of RUNS timed runs after WARMUP untimed ones."""
    for _ in range(WARMUP):
        run()
    samples = [run() for _ in range(RUNS)]
    return statistics.median(samples), samples


def measure_pair(run_a: Callable[[], float], run_b: Callable[[], float]):
    """Both sides measured interleaved (a, b, a, b, ...) so machine load drifts affect them alike."""
    for _ in range(WARMUP):
        run_a()
        run_b()
    a, b = [], []
    for _ in range(RUNS):
        a.append(run_a())
        b.append(run_b())
    return (statistics.median(a), a), (statistics.median(b), b)


def _candidates(ctx: GateRun) -> list[str]:
    """The optimisations to try: the three switches (those Phase 4 applied first), plus any a deployment
    declared for testing the gate."""
    extra = list((ctx.state.pipeline or {}).get("extra_optimisations", []))
    applied = [k for k in SWITCHES if (ctx.state.pipeline or {}).get(k) is True]
    return [*extra, *applied, *(k for k in SWITCHES if k not in applied)]


def _build(ctx: GateRun, applied: dict[str, bool], faults: set[str]):
    """The deployment's pipeline with exactly the switches in `applied` (and any injected test faults)."""
    return build_pipeline(ctx.state, ctx.config, {**{k: applied.get(k, False) for k in SWITCHES}, "faults": faults})


def _optimise(ctx: GateRun, phase: int) -> GateOutcome:
    from kernels.model.pipeline import FAULTS

    length = int(ctx.options.get("prefill_len") or DEFAULT_PREFILL_LEN)
    tokens = _prompt(ctx, length if phase == 4 else min(length, 64))
    runner = _prefill_run if phase == 4 else _decode_run
    metric = "prefill_s" if phase == 4 else "ms_per_token"
    what = "prefill" if phase == 4 else "decode"
    applied: dict[str, bool] = {k: False for k in SWITCHES}
    faults: set[str] = set()

    ctx.progress(f"phase {phase} baseline: {what} of {len(tokens)} tokens, {WARMUP} warm-up + {RUNS} timed runs")
    base_pipe = _build(ctx, applied, faults)
    base, _ = measure(runner(base_pipe, tokens))
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
        after, samples = measure(runner(pipe, tokens))
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
    (base, base_samples), (final, final_samples) = measure_pair(runner(base_pipe, tokens), runner(final_pipe, tokens))
    events.insert(0, _perf(ctx, phase, base_pipe, len(tokens), base, base_samples, "baseline"))
    events.append(_perf(ctx, phase, final_pipe, len(tokens), final, final_samples, "final"))
    kept = [k for k, v in applied.items() if v] + sorted(faults)
    return GateOutcome(events=events, summary=f"{what} {_fmt(base, phase)} -> {_fmt(final, phase)} "
                                              f"({base / final:.2f}x) with {', '.join(kept) or 'no optimisation'}")


def _gate_why(g) -> str:
    return f"prompt {g.prompt_index} diverged at step {g.divergence_step}: {g.chosen_ours} not in reference top-5"


def _fmt(seconds: float, phase: int) -> str:
    return f"{seconds * 1e3:.2f} ms" + ("" if phase == 4 else "/token")


def _perf(ctx: GateRun, phase: int, pipe, n_tokens: int, median: float, samples: list[float], label: str):
    fields: dict[str, Any] = dict(
        phase=phase, executor=ctx.state.executor, pipeline=pipe.options.to_dict(), n_prompt_tokens=n_tokens,
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
    """Setup (outside the timed region), then prefill + greedy decode, timed; with a per-stage profile."""
    t0 = time.perf_counter()
    pipe = build_pipeline(ctx.state, ctx.config)
    pipe.prefill(tokens[: min(len(tokens), 8)])  # setup: weights converted/quantised, caches built
    setup_s = time.perf_counter() - t0
    pipe.reset_timers()
    if hasattr(pipe.k, "timer"):
        pipe.k.timer.reset()
    t0 = time.perf_counter()
    rec = pipe.prefill(tokens)
    prefill_s = time.perf_counter() - t0
    out = [rec.top1_token]
    step_s = []
    pos = len(tokens)
    for i in range(n_tokens - 1):
        t1 = time.perf_counter()
        out.append(pipe.decode_step(out[-1], pos + i).top1_token)
        step_s.append(time.perf_counter() - t1)
    ttft = prefill_s  # the first token is the prefill's argmax
    decode_total = sum(step_s)
    profile = pipe.profile()
    stages = profile.get("stages", {})
    lm_head = sum(v["seconds"] for k, v in stages.items() if "lm_head" in k)
    top = sorted(profile.get("kernels", {}).items(), key=lambda kv: -kv[1]["seconds"])[:5]
    return {
        "tokens": out, "setup_s": setup_s, "prefill_s": prefill_s, "ttft_s": ttft,
        "ms_per_token": (decode_total / len(step_s) * 1e3) if step_s else None,
        "tokens_per_s": (len(step_s) / decode_total) if decode_total > 0 else None,
        "profile": {"setup_s": setup_s, "prefill_s": prefill_s, "decode_s_per_token": step_s,
                    "lm_head_s": lm_head, "top_kernels": [{"kernel": k, **v} for k, v in top], "stages": stages},
        "pipeline": pipe.options.to_dict(),
    }


def run_finalize(ctx: GateRun) -> GateOutcome:
    from kernels.model.prompts import canonical_tokens

    pipe = build_pipeline(ctx.state, ctx.config)
    gates = token_gate_events(ctx, pipe, "phase6")
    layers = diagnosis_events(ctx, pipe)
    tokens = np.asarray(canonical_tokens(hf_runner(str(ctx.model_path)).tokenizer), np.int64)
    ctx.progress("integrated run: TTFT and tokens/s")
    r = integrated_run(ctx, tokens, 32)
    perf = PerformanceMeasured(
        phase=6, executor=ctx.state.executor, pipeline=r["pipeline"], n_prompt_tokens=len(tokens), n_tokens=32,
        ttft_s=r["ttft_s"], tokens_per_s=r["tokens_per_s"], ms_per_token=r["ms_per_token"],
        prefill_s=r["prefill_s"], setup_s=r["setup_s"], profile=r["profile"],
    )
    reasons = [f"prompt {g.prompt_index}: {_gate_why(g)}" for g in gates if not g.passed]
    return GateOutcome(events=[*gates, *layers, perf], reasons=reasons,
                       summary=f"TTFT {r['ttft_s'] * 1e3:.1f} ms, {r['tokens_per_s']:.1f} tokens/s, token gate "
                               f"{sum(g.passed for g in gates)}/{len(gates)}")
