"""Phases 4-6: optimisations that must keep the token gate, and the finalized runner.

Phase 4 optimises the prefill path, Phase 5 the decode path, with the same switches (multi-launch merge =
`fusion`, static weight BOs = `weight_residency`, intermediate BOs = `intermediate_bos`, on-device layout =
`seq_first`); a decode-path switch is recorded as `decode:<switch>`. Each phase takes its baseline from the
pipeline as the previous phase left it (Phase 5 starts from Phase 4's result), then tries each switch in
turn, cumulatively: apply -> measure -> re-run the token gate -> keep or revert, one `OptimizationTried` each.

What a phase decides on is its backend's figure: on the emulated and torch executors the modelled NPU2
prefill time / ms per token of the deployment's dispatch plan (`kernels.perf`; the same plan always gives the
same figure, so a verdict never depends on this machine's load), with the emulator's own wall time recorded
beside it as information; on hardware the measured time. A phase where no optimisation gains fails, naming why.
Phase 6 runs the integrated runner (setup outside the timed region) and records the modelled TTFT / tokens/s
with the per-ELF breakdown next to the emulator's wall times; token gate and diagnosis as in Phase 3.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from handlers.gates import GateOutcome, GateRun
from handlers.gates.phase23 import diagnosis_events, token_gate_events
from handlers.gates.runtime import DECODE, FAULTS, SWITCHES, model_backend
from kernels.model.backend import Measurement
from kernels.thresholds import TOKEN_GATE_STEPS
from ledger.events import OptimizationTried, PerformanceMeasured

DEFAULT_PREFILL_LEN = 128  # tokens of the emulator's informational wall-time prefill (`advance --prefill-len`)
DECODE_STEPS = 16  # decode steps of the emulator's informational wall-time decode run


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


def measure(backend, phase: int, ctx: GateRun) -> Measurement:
    info = int(ctx.options.get("prefill_len") or DEFAULT_PREFILL_LEN)
    if phase == 4:
        return backend.measure_prefill(info)
    return backend.measure_decode(min(info, 64), DECODE_STEPS)


def _optimise(ctx: GateRun, phase: int) -> GateOutcome:
    what = "prefill" if phase == 4 else "decode"
    applied = _applied_before(ctx)
    faults: set[str] = set()
    base_backend = _build(ctx, applied, faults)
    m_base = measure(base_backend, phase, ctx)
    source = m_base.source
    ctx.progress(f"phase {phase} baseline: {what} {_fmt(m_base.median_s, phase)} ({source})")
    events: list = [performance_event(ctx, phase, base_backend, m_base, "baseline")]
    current = m_base.median_s
    candidates = _candidates(ctx, phase, applied)
    for i, name in enumerate(candidates, start=1):
        ctx.progress(f"[{i}/{len(candidates)}] {name}: apply, measure {what}, re-run the token gate")
        trial_applied, trial_faults = dict(applied), set(faults)
        if name in FAULTS:
            trial_faults.add(name)
        else:
            trial_applied[name] = True
        backend = _build(ctx, trial_applied, trial_faults)
        trial = measure(backend, phase, ctx)
        after = trial.median_s
        gates = token_gate_events(ctx, backend, f"phase{phase}:{name}", full=False)
        events.extend(gates)
        gate_ok = all(g.passed for g in gates)
        before = current
        if gate_ok and after < before:
            outcome = "applied"
            reason = f"{what} {_fmt(before, phase)} -> {_fmt(after, phase)} ({source}), token gate kept"
            applied, faults, current = trial_applied, trial_faults, after
        else:
            outcome = "reverted"
            why = [] if gate_ok else [f"token gate broken ({'; '.join(_gate_why(g) for g in gates if not g.passed)})"]
            if after >= before:
                why.append(f"no speed-up ({_fmt(before, phase)} -> {_fmt(after, phase)}, {source})")
            reason = " and ".join(why)
        events.append(OptimizationTried(
            phase=phase, optimisation=name, outcome=outcome, before_s=before, after_s=after, gate_passed=gate_ok,
            reason=reason, samples={"after_samples_s": trial.samples_s, "metric": trial.metric, "source": source,
                                    "detail": trial.detail},
        ))
    final_backend = _build(ctx, applied, faults)
    m_final = measure(final_backend, phase, ctx)
    events.append(performance_event(ctx, phase, final_backend, m_final, "final"))
    kept = [k for k, v in applied.items() if v and k in {_name(phase, s) for s in SWITCHES}] + sorted(faults)
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
    return f"prompt {g.prompt_index} diverged at step {g.divergence_step}: {g.chosen_ours} not in reference top-5"


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
    if phase == 4:
        fields["prefill_s"] = m.median_s
    else:
        fields["ms_per_token"] = m.median_s * 1e3
        fields["tokens_per_s"] = 1.0 / m.median_s if m.median_s > 0 else None
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
    npu2 = backend.npu2_figures()
    perf = PerformanceMeasured(
        phase=6, executor=ctx.state.executor, pipeline=r["pipeline"], n_prompt_tokens=npu2["seq"],
        n_tokens=TOKEN_GATE_STEPS, ttft_s=npu2["ttft_s"], tokens_per_s=npu2["tokens_per_s"],
        ms_per_token=npu2["ms_per_token"], prefill_s=npu2["prefill_s"], setup_s=r["setup_s"],
        profile={"source": npu2["source"], "npu2": npu2,
                 "emulator_wall": {**r["profile"], "ttft_s": r["ttft_s"], "tokens_per_s": r["tokens_per_s"],
                                   "ms_per_token": r["ms_per_token"], "n_prompt_tokens": len(tokens)},
                 # a measured path (mlir-air's make run / profile): its per-token times are the record's own
                 **({} if npu2["source"] == "modelled-npu2" else
                    {"decode_s_per_token": r["profile"]["decode_s_per_token"]})},
    )
    reasons = [f"prompt {g.prompt_index}: {_gate_why(g)}" for g in gates if not g.passed]
    return GateOutcome(events=[*gates, *layers, perf], reasons=reasons,
                       summary=f"TTFT {npu2['ttft_s'] * 1e3:.1f} ms, {npu2['tokens_per_s']:.1f} tokens/s "
                               f"({npu2['source']}, seq {npu2['seq']}); emulator here: TTFT {r['ttft_s'] * 1e3:.1f} ms, "
                               f"{r['tokens_per_s'] or 0:.1f} tokens/s; token gate {sum(g.passed for g in gates)}/{len(gates)}")
