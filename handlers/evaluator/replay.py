"""Phase 7, the replay: re-judge every attempt on all of its evidence, bind evidence to the model, and
re-derive each figure from its own samples.

* `rejudge_attempts` replays the stream event by event and, at each `PhasePassed`, applies the state
  machine's own gate predicate (`statemachine.predicates.PREDICATES`) to the attempt as it stood: every evidence
  event of the attempt counts, not only the seqs the PhasePassed cites (a later FAIL left out of
  `evidence_seqs` is found).
* `digest_findings` compares the model folder's digest now with the one Phase 0 recorded, and every
  evidence event of a passed attempt with that digest.
* `figure_findings` re-derives Phase 4-6 medians and means from their samples, token and prompt counts,
  and the pipeline options each measurement declares against the optimisations applied before it;
  `gate_evidence_findings` checks that each applied Phase 4-5 optimisation's gate records exist, passed, ran
  with it, and (when it rests on one re-run on the final switch set) equal Phase 3's number for number.

Each finding names the seq of the event it concerns. No I/O: the caller passes the recomputed digest.
(handlers.evaluator.plan_sources re-derives Phase 1's recorded plan sources.)
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

from handlers.evaluator.audit import Finding
from npu_kernels.thresholds import (
    FIGURE_RTOL,
    TOKEN_GATE_PROMPTS,
    TOKEN_GATE_PROMPTS_FULL,
    TOKEN_GATE_STEPS,
    TOKEN_GATE_TOP_K,
)
from ledger.record import RecordedEvent
from statemachine.state import DeploymentState
from statemachine.fold import FoldError, apply
from statemachine.gate import GateContext
from statemachine.predicates import PREDICATES
from statemachine.phases import Phase
from npu_kernels.model.digest import changed_files, changed_numerics, invalidated_phases
from handlers.planning import deployment_weights
from npu_kernels.perf.curve import npu2_curve
from npu_kernels.perf.figures import npu2_prediction
from npu_kernels.model.config import ModelConfig

SWITCH_NAMES = ("weight_residency", "fusion", "seq_first")  # npu_kernels.model.pipeline.SWITCHES (no numpy here)
# the optimisations Phases 4 (prefill) and 5 ("decode:") record: npu_kernels.perf.dispatch.SWITCHES
_DISPATCH = ("fusion", "weight_residency", "intermediate_bos", "seq_first")
OPTIMISATIONS = (*_DISPATCH, *(f"decode:{k}" for k in _DISPATCH))


def replay_states(events: list[RecordedEvent]) -> list[DeploymentState | None]:
    """states[i] is the folded state just before events[i] (None before the first, or once unreplayable)."""

    states: list[DeploymentState | None] = []
    state = None
    broken = False
    for rec in events:
        states.append(None if broken else state)
        if broken:
            continue
        try:
            state = apply(state, rec)
        except (FoldError, ValueError):
            broken = True
    return states


def _named_seq(reason: str, default: int) -> int:
    found = re.search(r"\bseq (\d+)", reason)
    return int(found.group(1)) if found else default


def rejudge_attempts(events: list[RecordedEvent], states: list, planned: list[tuple[str, dict]] | None) -> list[Finding]:
    """The gate predicate of each passed phase, re-applied to all of its attempt's evidence."""

    findings = []
    for rec, state in zip(events, states):
        if rec.type != "PhasePassed" or state is None or state.open_attempt is None:
            continue
        phase = Phase(rec.payload["phase"])
        context = GateContext(planned_kernels=planned if phase is Phase.KERNELS else None)
        if phase is Phase.KERNELS and planned is None:
            continue  # no plan re-derivable: reported as a model-folder finding
        result = PREDICATES[phase](state, context)
        if not result.ok:
            n = len(state.open_attempt.evidence)
            findings.append(Finding("error", _named_seq(result.reason, rec.seq), "rejudge",
                                    f"PhasePassed({int(phase)}) seq {rec.seq} does not re-derive from all {n} evidence "
                                    f"events of attempt {state.open_attempt.number}: {result.reason}"))
    return findings


# --- evidence bound to the model ---------------------------------------------------------------------------


def digest_findings(state: DeploymentState | None, events: list[RecordedEvent], now, error: str | None) -> list[Finding]:
    """`now` is `npu_kernels.model.digest.ModelDigest` of the folder at audit time (None with `error`)."""

    if state is None:
        return []
    passed0 = state.passed.get(0)
    if state.digest is None:
        return [Finding("error", passed0.seq if passed0 else None, "model-digest",
                        "Phase 0 recorded no ModelDigested: the evidence is bound to no model")]
    recorded, seq = state.digest.event, state.digest.seq
    findings = []
    if now is None:
        findings.append(Finding("error", seq, "model-digest", f"cannot re-hash the model folder: {error}"))
    elif now.digest != recorded.digest:
        changed = changed_files(recorded.files, now.files)
        what = ", ".join(f"{n} (sha256 {str(recorded.files.get(n, 'absent'))[:12]} -> {str(now.files.get(n, 'absent'))[:12]})"
                         for n in changed) or f"resolved fields {changed_numerics(recorded.numerics, now.numerics)}"
        phases = invalidated_phases(changed or ["config.json"], [int(p) for p in state.passed])
        findings.append(Finding("error", seq, "model-digest",
                                f"the model folder is not the one Phase 0 digested (ModelDigested seq {seq}): {what} "
                                f"changed; this invalidates the evidence of phase(s) {', '.join(map(str, phases))}"))
    by_phase: dict[int, list[RecordedEvent]] = {}
    seqs = {s for p in state.passed.values() for s in (e.seq for e in p.evidence)}
    for rec in events:
        if rec.seq in seqs and rec.type != "ModelDigested" and "model_digest" in rec.payload \
                and rec.payload["model_digest"] != recorded.digest:
            phase = next(int(p) for p, v in state.passed.items() if any(e.seq == rec.seq for e in v.evidence))
            by_phase.setdefault(phase, []).append(rec)
    for phase, recs in sorted(by_phase.items()):
        first = recs[0]
        got = first.payload["model_digest"][:12] or "no digest"
        findings.append(Finding("error", first.seq, "model-digest",
                                f"{len(recs)} evidence event(s) of phase {phase} were measured against another model "
                                f"(first: {first.type} seq {first.seq} carries {got}, the deployment's digest is "
                                f"{recorded.digest[:12]})"))
    return findings


# --- figures re-derived from their samples -------------------------------------------------------------------


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(float(a), float(b), rel_tol=FIGURE_RTOL, abs_tol=1e-15)


def _modelled(config: dict | None, switches: dict, weights: str = "bf16"):
    """The NPU2 performance model's figure, recomputed from the config, the recorded switches and the weight
    format the deployment declared (its init request, not the figure's own record)."""

    cfg = ModelConfig(**{k: v for k, v in (config or {}).items() if k in ModelConfig.__dataclass_fields__})
    return npu2_prediction(cfg, switches, weights)


def perf_problems(p: dict, config: dict | None = None, weights: str = "bf16") -> list[str]:
    """Why a PerformanceMeasured payload's figures do not agree with themselves ([]: they do): a median or mean
    that is not its samples', counts that do not match, a modelled figure the model does not give. The audit's
    check, and the one `ledger perf calibrate` fits only rows that pass (handlers.calibrate)."""
    phase, prof = p["phase"], p.get("profile") or {}
    out = []
    if phase in (4, 5):
        samples = prof.get("samples_s")
        if not samples:
            return [f"phase {phase} PerformanceMeasured without its samples"]
        if p.get("runs") != len(samples):
            out.append(f"says {p.get('runs')} runs but holds {len(samples)} samples")
        median = statistics.median(samples)
        if phase == 4 and not _close(p.get("prefill_s"), median):
            out.append(f"prefill_s {p.get('prefill_s')} is not the median {median:.6g} of its samples")
        if phase == 5 and not _close(p.get("ms_per_token"), median * 1e3):
            out.append(f"ms_per_token {p.get('ms_per_token')} is not the median {median * 1e3:.6g} of its samples")
        if phase == 5 and median > 0 and not _close(p.get("tokens_per_s"), 1.0 / median):
            out.append(f"tokens_per_s {p.get('tokens_per_s')} is not 1 / median ({1.0 / median:.6g})")
        if not p.get("n_prompt_tokens"):
            out.append("measured on no prompt tokens")
        if prof.get("source") == "modelled-npu2":  # re-derived exactly: the model is a pure function
            if not isinstance(prof.get("switches"), dict):
                return out + ["a modelled figure without the switches it was modelled under"]
            m = _modelled(config, prof["switches"], weights)
            want = m.prefill_s if phase == 4 else m.ms_per_token / 1e3
            if not _close(median, want):
                out.append(f"the modelled NPU2 figure {median:.6g} s is not the model's {want:.6g} s under the "
                           f"recorded switches")
    elif phase == 6 and prof.get("source") == "modelled-npu2":
        npu2, wall = prof.get("npu2") or {}, prof.get("emulator_wall") or {}
        sw = npu2.get("switches") or {}
        if not isinstance(sw.get("prefill"), dict) or not isinstance(sw.get("decode"), dict):
            return ["a modelled Phase 6 figure without the switches it was modelled under"]
        pre, dec = _modelled(config, sw["prefill"], weights), _modelled(config, sw["decode"], weights)
        for key, want in (("ttft_s", pre.ttft_s), ("prefill_s", pre.prefill_s), ("ms_per_token", dec.ms_per_token),
                          ("tokens_per_s", dec.decode_tokens_per_s)):
            if not _close(p.get(key), want):
                out.append(f"{key} {p.get(key)} is not the NPU2 model's {want:.6g} under the recorded switches")
        out += _curve_problems(p.get("curve") or {}, config, weights)
        steps = wall.get("decode_s_per_token")
        if steps is None:
            out.append("phase 6 PerformanceMeasured without the integrated run's per-token decode times")
        elif p.get("n_tokens") != len(steps) + 1:
            out.append(f"n_tokens {p.get('n_tokens')} but {len(steps)} decode steps after the first token")
        if p.get("n_tokens") != TOKEN_GATE_STEPS:
            out.append(f"n_tokens {p.get('n_tokens')}, the integrated run generates {TOKEN_GATE_STEPS}")
    elif phase == 6:
        steps = prof.get("decode_s_per_token")
        if steps is None:
            return ["phase 6 PerformanceMeasured without its per-token decode times"]
        if p.get("n_tokens") != len(steps) + 1:
            out.append(f"n_tokens {p.get('n_tokens')} but {len(steps)} decode steps after the first token")
        if p.get("n_tokens") != TOKEN_GATE_STEPS:
            out.append(f"n_tokens {p.get('n_tokens')}, the integrated run generates {TOKEN_GATE_STEPS}")
        total = sum(steps)
        if steps and not _close(p.get("ms_per_token"), total / len(steps) * 1e3):
            out.append(f"ms_per_token {p.get('ms_per_token')} is not the mean {total / len(steps) * 1e3:.6g} of its steps")
        if total > 0 and not _close(p.get("tokens_per_s"), len(steps) / total):
            out.append(f"tokens_per_s {p.get('tokens_per_s')} is not steps / decode time ({len(steps) / total:.6g})")
        for key in ("prefill_s", "setup_s"):
            if key in prof and not _close(p.get(key), prof[key]):
                out.append(f"{key} {p.get(key)} differs from its profile's {prof[key]}")
        if not _close(p.get("ttft_s"), p.get("prefill_s")):
            out.append(f"ttft_s {p.get('ttft_s')} is not the timed prefill {p.get('prefill_s')}")
    return out


def _curve_problems(curve: dict, config: dict | None, weights: str = "bf16") -> list[str]:
    """A modelled Phase 6 curve (npu_kernels.perf.curve) recomputed under its recorded switches and context window:
    every point's figure and status equal the model's (a curve recorded before curves existed is {})."""
    if not curve or curve.get("source") != "modelled-npu2":
        return []
    sw = curve.get("switches") or {}
    if not isinstance(sw.get("prefill"), dict) or not isinstance(sw.get("decode"), dict):
        return ["a modelled Phase 6 curve without the switches it was modelled under"]
    cfg = ModelConfig(**{k: v for k, v in (config or {}).items() if k in ModelConfig.__dataclass_fields__})
    want = npu2_curve(cfg, sw["prefill"], sw["decode"], max_positions=curve.get("max_positions"), weights=weights)
    out = []
    for axis, x, y in (("prefill", "prefill_len", "ttft_s"), ("decode", "context_len", "decode_tokens_per_sec")):
        got = {pt.get(x): pt for pt in (curve.get(axis) or {}).get("points", [])}
        for pt in want[axis]["points"]:
            rec = got.get(pt[x])
            if rec is None or rec.get("status") != pt["status"] or not _close(rec.get(y), pt.get(y)):
                out.append(f"curve {axis} at {pt[x]}: {y} {None if rec is None else rec.get(y)} "
                           f"({None if rec is None else rec.get('status')}) is not the NPU2 model's {pt.get(y)} "
                           f"({pt['status']}) under the recorded switches")
    return out


def _token_problems(p: dict) -> list[str]:
    out = []
    if p.get("n_tokens") != TOKEN_GATE_STEPS:
        out.append(f"n_tokens {p.get('n_tokens')}, the gate decodes {TOKEN_GATE_STEPS}")
    if p.get("top_k") != TOKEN_GATE_TOP_K:
        out.append(f"top_k {p.get('top_k')}, the gate keeps {TOKEN_GATE_TOP_K}")
    ours, ref, step = p.get("tokens_ours", []), p.get("tokens_ref", []), p.get("divergence_step")
    expected = (p.get("n_tokens") or 0) if step is None else step + 1
    if p.get("nan_count"):
        return out
    if len(ours) != expected or len(ref) != expected:
        out.append(f"holds {len(ours)}/{len(ref)} tokens (ours/reference); a walk to "
                   f"{'the end' if step is None else f'divergence step {step}'} holds {expected}")
    if p.get("kl_per_step") and len(p["kl_per_step"]) != len(ours):
        out.append(f"{len(p['kl_per_step'])} KL values for {len(ours)} checked steps")
    if step is None and p.get("agreed_prefix") != len(ours):
        out.append(f"agreed prefix {p.get('agreed_prefix')} but {len(ours)} identical tokens")
    return out


def _declared(pipeline: dict) -> tuple[dict, list]:
    """The optimisation switches a measurement declares (the dispatch switches in force when recorded, else the
    pipeline's own switch fields) and its faults."""
    if isinstance(pipeline.get("switches"), dict):
        on = {k: True for k, v in pipeline["switches"].items() if v}
    else:
        on = {k: True for k in SWITCH_NAMES if pipeline.get(k)}
    return on, sorted(pipeline.get("faults") or [])


def _expected(state: DeploymentState) -> tuple[dict, list]:
    """What the stream says was applied: every optimisation applied so far (by its recorded name)."""
    pipe = state.pipeline or {}
    on = {k: True for k, v in pipe.items() if v is True and (k in SWITCH_NAMES or k in OPTIMISATIONS)}
    return on, sorted(pipe.get("faults") or [])


def figure_findings(events: list[RecordedEvent], states: list) -> list[Finding]:
    """Figures, counts and pipeline options re-derived; see the module docstring."""
    findings = []
    prompts: dict[tuple, list[RecordedEvent]] = {}
    applied_in_attempt: dict[tuple, dict[str, bool]] = {}
    attempt_start: dict[tuple, dict[str, bool]] = {}
    for rec, state in zip(events, states):
        p = rec.payload
        if rec.type == "PerformanceMeasured":
            findings += [Finding("error", rec.seq, "figures", f"PerformanceMeasured(phase {p['phase']}): {m}")
                         for m in perf_problems(p, state.config if state is not None else None,
                                                 deployment_weights(state) if state is not None else "bf16")]
        elif rec.type == "OptimizationTried":
            after = (p.get("samples") or {}).get("after_samples_s")
            if after and not _close(p.get("after_s"), statistics.median(after)):
                findings.append(Finding("error", rec.seq, "figures",
                                        f"OptimizationTried {p['optimisation']}: after_s {p.get('after_s')} is not the "
                                        f"median {statistics.median(after):.6g} of its samples"))
        elif rec.type == "TokenGateChecked":
            findings += [Finding("error", rec.seq, "figures", f"TokenGateChecked (prompt {p['prompt_index']}, "
                                 f"{p.get('context')}): {m}") for m in _token_problems(p)]
        if state is None or state.open_attempt is None:
            continue
        attempt = state.open_attempt
        key = (int(attempt.phase), attempt.number)
        if rec.type == "PhaseStarted":
            continue
        attempt_start.setdefault(key, _expected(state)[0])  # at its first evidence: what earlier phases applied
        if rec.type == "TokenGateChecked":
            prompts.setdefault((*key, p.get("context")), []).append(rec)
        # pipeline options: what the measurement declares vs what the stream says was applied before it
        if rec.type in ("TokenGateChecked", "PerformanceMeasured") and int(attempt.phase) in (3, 6) \
                and p.get("context", "phase") in ("phase3", "phase6", "phase"):
            if _declared(p.get("pipeline") or {}) != _expected(state):
                findings.append(Finding("error", rec.seq, "pipeline-options",
                                        f"{rec.type} ran with {p.get('pipeline')}, but the optimisations applied "
                                        f"before it give {_expected(state)[0]} (faults {_expected(state)[1]})"))
        if rec.type == "OptimizationTried" and p.get("outcome") == "applied" and p["optimisation"] in OPTIMISATIONS:
            applied_in_attempt.setdefault(key, {})[p["optimisation"]] = True
        if rec.type == "PerformanceMeasured" and p["phase"] in (4, 5) and int(attempt.phase) == p["phase"]:
            label = (p.get("profile") or {}).get("label")
            before = {k: True for k, v in (attempt_start.get(key) or {}).items() if v}
            want = {**before, **applied_in_attempt.get(key, {})} if label == "final" else before
            if label in ("baseline", "final") and _declared(p.get("pipeline") or {})[0] != want:
                findings.append(Finding("error", rec.seq, "pipeline-options",
                                        f"phase {p['phase']} {label} measured with {_declared(p['pipeline'])[0]}, the "
                                        f"attempt's applied optimisations give {want}"))
    for (phase, attempt, context), recs in prompts.items():
        if context not in ("phase3", "phase6"):
            continue
        indices = [r.payload["prompt_index"] for r in recs]
        if len(set(indices)) != len(indices) or len(indices) not in (TOKEN_GATE_PROMPTS, TOKEN_GATE_PROMPTS_FULL):
            findings.append(Finding("error", recs[0].seq, "figures",
                                    f"phase {phase} attempt {attempt} checked prompts {indices}: the gate runs "
                                    f"{TOKEN_GATE_PROMPTS} (or {TOKEN_GATE_PROMPTS_FULL} with --full) distinct prompts"))
    return findings


# Phase 3 records vs a re-run on another switch set: everything but these is a measured number
_NOT_NUMBERS = ("context", "pipeline", "provenance", "model_digest")


def gate_evidence_findings(events: list[RecordedEvent], states: list) -> list[Finding]:
    """Each applied OptimizationTried that names its gate records (`gate_context`; ledgers written before it
    name none) must find them in its attempt, before it, passed and run with it; records of one re-run on the
    final switch set ("phase<N>:final") must also equal the passed Phase 3 records, prompt by prompt, in every
    number: that is the claim that the switches changed nothing, which is what lets them share one re-run."""

    findings = []
    gates: dict[tuple, list[RecordedEvent]] = {}
    for rec, state in zip(events, states):
        if state is None or state.open_attempt is None:
            continue
        key = (int(state.open_attempt.phase), state.open_attempt.number)
        p = rec.payload
        if rec.type == "TokenGateChecked":
            gates.setdefault((*key, p.get("context")), []).append(rec)
        if rec.type != "OptimizationTried" or p.get("outcome") != "applied" or not p.get("gate_context"):
            continue
        name, where = p["optimisation"], f"OptimizationTried seq {rec.seq} ({p['optimisation']})"
        cited = gates.get((*key, p["gate_context"]), [])
        problems = [] if cited else [f"no TokenGateChecked {p['gate_context']!r} before it in its attempt"]
        for g in cited:
            on, faults = _declared(g.payload.get("pipeline") or {})
            if not g.payload.get("passed"):
                problems.append(f"TokenGateChecked seq {g.seq} did not pass")
            if name not in on and name not in faults:
                problems.append(f"TokenGateChecked seq {g.seq} ran without {name} ({g.payload.get('pipeline')})")
        if p["gate_context"].endswith(":final"):
            passed3 = state.passed.get(Phase.FULL_MODEL)
            phase3 = {e.event.prompt_index: e for e in (passed3.evidence if passed3 else ())
                      if type(e.event).__name__ == "TokenGateChecked" and e.event.context == "phase3"}
            for g in cited:
                old = phase3.get(g.payload["prompt_index"])
                old_p = old.event.to_payload() if old else {}
                differ = sorted(k for k in g.payload if k not in _NOT_NUMBERS and g.payload[k] != old_p.get(k))
                if old is None or differ:
                    problems.append(f"TokenGateChecked seq {g.seq} on the final switch set does not equal Phase 3's "
                                    f"record of prompt {g.payload['prompt_index']}"
                                    + (f" (seq {old.seq}: {', '.join(differ)} differ)" if old else " (none)")
                                    + ": the switches changed the numbers, each needed its own re-run")
        findings += [Finding("error", rec.seq, "optimisation-gate", f"{where}: {m}") for m in problems]
    return findings

