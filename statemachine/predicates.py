"""The gate predicates the lifecycle table names, and `PREDICATES` (phase -> predicate).

A gate predicate is `(state, context) -> GateResult`: it reads the evidence of the open attempt (and the
resolved config) from the folded `DeploymentState`, and whatever the stream cannot know (the planned kernel
list) from the `GateContext` the handler builds. It re-derives verdicts from the recorded numbers rather
than trusting a `passed` flag, and its reason names the unmet criterion and the seq of the evidence.
`CONDITIONS` maps every condition name of `statemachine.lifecycle.TRANSITIONS` to its predicate.
"""

from __future__ import annotations

import math
from functools import wraps

from ledger.events import (
    BlockValidated,
    ConvStateChecked,
    EvaluationRecorded,
    Event,
    KernelVerified,
    LayerDiagnosed,
    Measured,
    ModelDigested,
    QuantisationBudgetMeasured,
    QuantisedBundleRead,
    OptimizationTried,
    PerformanceMeasured,
    ReferenceBaselineRecorded,
    SpeculationChecked,
    TokenGateChecked,
    WeightsChecked,
)
from npu_kernels.thresholds import (
    BLOCK_COSINE_MIN,
    TOKEN_GATE_TOP_K,
    per_position_threshold,
    quant_budget_problems,
    strictest_quant_budget,
)
from statemachine.checks import conv_state_problem, kernel_problem, speculation_problem, token_gate_problem
from statemachine.gate import GateContext, GateResult, Predicate, kernel_key
from statemachine.phases import Phase
from statemachine.state import EVALUATION_PASSES, DeploymentState, Evidence


def _yes(reason: str) -> GateResult:
    return GateResult(True, reason)


def _no(reason: str) -> GateResult:
    return GateResult(False, reason)


def _all(state: DeploymentState, event_type: type[Event]) -> list[Evidence]:
    return state.open_attempt.of_type(event_type) if state.open_attempt else []


def _latest(state: DeploymentState, event_type: type[Event]) -> Evidence | None:
    found = _all(state, event_type)
    return found[-1] if found else None


def _config_drift(state: DeploymentState, digested: Evidence) -> str | None:
    """Why the digested model folder is not the config the deployment resolved at init (None: it is)."""
    d, cfg = digested.event, state.config or {}
    recorded_sha, now_sha = cfg.get("source_sha256") or "", d.files.get("config.json")
    fields = sorted(k for k, v in cfg.items() if k in d.numerics and d.numerics[k] != v)
    if recorded_sha and now_sha != recorded_sha:
        detail = f" (fields {', '.join(f'{k} {cfg[k]!r} -> {d.numerics[k]!r}' for k in fields)})" if fields else ""
        return (f"config.json changed since init: ConfigResolved recorded sha256 {recorded_sha[:12]}, "
                f"ModelDigested seq {digested.seq} hashed {str(now_sha)[:12]}{detail}; start a new deployment "
                "(`ledger init`) for the edited config, or restore the file")
    if fields:
        return f"ModelDigested seq {digested.seq}: config.json resolves differently from ConfigResolved in {fields}"
    return None


def gate_0_reference_ok(state: DeploymentState, context: GateContext) -> GateResult:
    """Config resolved and equal to config.json as digested, every expected weight present and well-shaped,
    the model digested, the HF bf16 baseline sane."""
    if state.config is None:
        return _no("no ConfigResolved in the stream")
    digested = _latest(state, ModelDigested)
    drift = _config_drift(state, digested) if digested else None
    if drift:
        return _no(drift)
    weights = _latest(state, WeightsChecked)
    if weights is None:
        return _no("no WeightsChecked in the attempt")
    w = weights.event
    if not w.ok or w.missing or w.misshaped or w.n_tensors != w.expected:
        return _no(f"WeightsChecked seq {weights.seq} not ok: {w.n_tensors}/{w.expected} tensors, "
                   f"missing {_some(w.missing)}, misshaped {_some(w.misshaped)}")
    baseline = _latest(state, ReferenceBaselineRecorded)
    if baseline is None:
        return _no("no ReferenceBaselineRecorded in the attempt")
    b = baseline.event
    if not b.passed:
        return _no(f"ReferenceBaselineRecorded seq {baseline.seq} did not pass: "
                   + ("; ".join(baseline_misses(b)) or "no recorded threshold says why"))
    if not b.logits_finite:
        return _no(f"ReferenceBaselineRecorded seq {baseline.seq} has non-finite logits")
    if b.config_mismatches:
        return _no(f"ReferenceBaselineRecorded seq {baseline.seq}: config differs from config.json in "
                   f"{b.config_mismatches}")
    if digested is None:
        return _no("no ModelDigested in the attempt: the evidence is bound to no model")
    if state.quantisation:
        read = _latest(state, QuantisedBundleRead)
        if read is None:
            return _no("a 4-bit deployment without QuantisedBundleRead in the attempt")
        budget = _latest(state, QuantisationBudgetMeasured)
        if budget is None:
            return _no("a 4-bit deployment without QuantisationBudgetMeasured in the attempt")
        problems = quant_budget_problems(budget.event.model_dump(), strictest_quant_budget(budget.event.thresholds))
        if problems:
            return _no(f"QuantisationBudgetMeasured seq {budget.seq}: {problems[0]}")
    return _yes(f"config resolved; {w.n_tensors} weight tensors (seq {weights.seq}); HF bf16 top-1 "
                f"{b.top1_text!r} p={b.top1_prob:.3f} (seq {baseline.seq})")


def _some(names: list[str], n: int = 3) -> str:
    """The first few names of a list (the first one is the one to fix first) and how many more there are."""
    if not names:
        return "none"
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more


_CARRY_FREE = ("carried_from_seq", "note")  # the only fields a carried copy may differ in


def _carried_problem(state: DeploymentState, k: KernelVerified) -> str | None:
    """Why a row claiming to be carried from an earlier attempt is not (None: it is, or it claims nothing).

    The original must be a KernelVerified measured (not itself carried) in a failed attempt of Phase 1 of this
    deployment, equal to the copy in every field but `carried_from_seq` and `note`, and acceptable on its own."""
    if k.carried_from_seq is None:
        return None
    earlier = [ev for attempt in state.failed_attempts.get(Phase.KERNELS, ()) for ev in attempt.evidence
               if ev.seq == k.carried_from_seq]
    if not earlier or not isinstance(earlier[0].event, KernelVerified):
        return f"carried from seq {k.carried_from_seq}, which is no KernelVerified of a failed Phase 1 attempt"
    origin = earlier[0].event
    if origin.carried_from_seq is not None:
        return f"carried from seq {k.carried_from_seq}, itself a carried copy: a copy must name the measurement"
    a = {f: v for f, v in k.to_payload().items() if f not in _CARRY_FREE}
    b = {f: v for f, v in origin.to_payload().items() if f not in _CARRY_FREE}
    if a != b:
        diff = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
        return f"carried from seq {k.carried_from_seq} but differs from it in {diff}"
    problem = kernel_problem(origin)
    if problem:
        return f"carried from seq {k.carried_from_seq}, which did not pass there ({problem})"
    return None


def gate_1_all_kernels_pass(state: DeploymentState, context: GateContext) -> GateResult:
    """Every planned (kernel, shape) verified; the latest verdict per (kernel, shape, contract) is PASS."""
    if context.planned_kernels is None:
        return _no("no planned kernel list: pass GateContext(planned_kernels=[(kernel, shape), ...])")
    rows = _all(state, KernelVerified)
    if not rows:
        return _no("no KernelVerified in the attempt")
    latest: dict[tuple[str, str, str], Evidence] = {}
    for row in rows:  # a later verdict for the same (kernel, shape, contract) replaces the earlier one
        latest[(*kernel_key(row.event.kernel, row.event.shape), row.event.contract)] = row
    evidence_of: dict[str, tuple[int, tuple[str, str, str]]] = {}  # transcript sha256 -> (seq, row)
    for row in rows:  # one harness transcript is evidence for one (kernel, shape, contract) only
        digest = (row.event.provenance or {}).get("output_sha256")
        key = (*kernel_key(row.event.kernel, row.event.shape), row.event.contract)
        if digest:
            seq, first = evidence_of.setdefault(digest, (row.seq, key))
            if first != key:
                return _no(f"KernelVerified seq {row.seq} {key[0]} {key[1]} {key[2]}: its transcript (sha256 "
                           f"{digest[:12]}) is already the evidence of seq {seq} {first[0]} {first[1]}")
    for row in rows:  # a carried row must be the copy of a passing measurement of an earlier failed attempt
        problem = _carried_problem(state, row.event)
        if problem:
            return _no(f"KernelVerified seq {row.seq} {row.event.kernel}: {problem}")
    for (kernel, shape, contract), row in latest.items():
        problem = kernel_problem(row.event)
        if problem:
            return _no(f"KernelVerified seq {row.seq} {kernel} {shape} {contract}: {problem}")
    missing = sorted(context.planned_kernels - {(kernel, shape) for kernel, shape, _ in latest})
    if missing:
        shown = ", ".join(f"{kernel} {shape}" for kernel, shape in missing[:5])
        return _no(f"{len(missing)} planned kernel shape(s) not verified: {shown}")
    return _yes(f"{len(latest)} kernel verdict(s) PASS covering {len(context.planned_kernels)} planned shape(s)")


def _hybrid(state: DeploymentState) -> bool:
    """The resolved description has short-convolution layers (LFM2)."""
    layers = ((state.config or {}).get("description") or {}).get("layers") or []
    return any(x.get("mixer") == "conv" for x in layers)


def gate_2_block_ok(state: DeploymentState, context: GateContext) -> GateResult:
    """The latest BlockValidated passed, and its numbers clear the thresholds (never weaker than policy); a hybrid's
    other block (an earlier BlockValidated of the attempt, of another layer) passed too."""
    found = _latest(state, BlockValidated)
    if found is None:
        return _no("no BlockValidated in the attempt")
    for other in _all(state, BlockValidated)[:-1]:
        if other.event.layer != found.event.layer and not other.event.passed:
            return _no(f"BlockValidated seq {other.seq} (layer {other.event.layer}) did not pass "
                       f"(cosine {other.event.cosine})")
    b = found.event
    if not b.passed:
        return _no(f"BlockValidated seq {found.seq} did not pass (cosine {b.cosine}, culprit {b.culprit})")
    if state.config is None:
        return _no("no ConfigResolved: the per-position threshold depends on head_dim")
    cosine_min = max(b.thresholds.get("cosine", 0.0), BLOCK_COSINE_MIN)
    position_min = max(b.thresholds.get("per_position_min", 0.0), per_position_threshold(state.config["head_dim"]))
    if b.nan_count:
        return _no(f"BlockValidated seq {found.seq} has {b.nan_count} NaN")
    if not b.cosine >= cosine_min:  # `not >=` also catches a NaN cosine
        return _no(f"BlockValidated seq {found.seq} cosine {b.cosine} < {cosine_min}")
    if not b.per_position_min >= position_min:
        return _no(f"BlockValidated seq {found.seq} per-position min {b.per_position_min} < {position_min}")
    # a short-convolution model: its carried state must hold too (npu_kernels.model.features.short_conv)
    if _hybrid(state):
        why = _required_problem(state, ConvStateChecked, conv_state_problem,
                                "a hybrid model (short-convolution layers)")
        if why:
            return _no(why)
    return _yes(f"layer {b.layer} cosine {b.cosine:.4f} >= {cosine_min}, per-position min "
                f"{b.per_position_min:.4f} >= {position_min}, no NaN (seq {found.seq})")


def _required_problem(state: DeploymentState, event_type: type[Event], problem, who: str) -> str | None:
    """Why the attempt's latest `event_type` (required of `who`) cannot count (None: it can): missing, or what
    `problem` (statemachine.checks) re-derives from it."""
    found = _latest(state, event_type)
    if found is None:
        return f"{who} without a {event_type.__name__} in the attempt"
    why = problem(found.event)
    return f"{event_type.__name__} seq {found.seq}: {why}" if why else None


def _token_gates_ok(state: DeploymentState) -> GateResult:
    checks = _all(state, TokenGateChecked)
    if not checks:
        return _no("no TokenGateChecked in the attempt")
    for found in checks:
        problem = token_gate_problem(found.event)
        if problem:
            return _no(f"TokenGateChecked seq {found.seq} (prompt {found.event.prompt_index}): {problem}")
    return _yes(f"{len(checks)} prompt(s) pass the top-{TOKEN_GATE_TOP_K} token gate, first divergence and "
                f"teacher-forced (seqs {[c.seq for c in checks]})")


def gate_3_token_gate_ok(state: DeploymentState, context: GateContext) -> GateResult:
    """At least one TokenGateChecked; every one passed both walks (re-derived from its numbers), has no NaN,
    and none is a drill."""
    return _token_gates_ok(state)


def _faster_and_gate_kept(state: DeploymentState, phase: Phase, metric: str) -> GateResult:
    applied = [o for o in _all(state, OptimizationTried) if o.event.phase == phase and o.event.outcome == "applied"]
    for o in applied:
        if o.event.gate_passed is not True:
            return _no(f"OptimizationTried seq {o.seq} applied {o.event.optimisation!r} with gate_passed "
                       f"{o.event.gate_passed}")
    measured = [m for m in _all(state, PerformanceMeasured) if m.event.phase == phase]
    if not measured:
        return _no(f"no PerformanceMeasured baseline for phase {int(phase)} in the attempt")
    if len(measured) < 2:
        return _no(f"only one PerformanceMeasured (seq {measured[0].seq}): need a baseline and a final measurement")
    baseline, final = measured[0], measured[-1]
    if applied and baseline.seq > applied[0].seq:
        return _no(f"baseline PerformanceMeasured seq {baseline.seq} was taken after optimisation seq {applied[0].seq}")
    before, after = getattr(baseline.event, metric), getattr(final.event, metric)
    for found, value in ((baseline, before), (final, after)):
        if value is None or not math.isfinite(value):
            return _no(f"PerformanceMeasured seq {found.seq} has no finite {metric}")
    if not after < before:
        return _no(f"final {metric} {after} (seq {final.seq}) is not below the baseline {before} (seq {baseline.seq})")
    return _yes(f"{metric} {before} -> {after} ({len(applied)} optimisation(s) applied, token gate kept)")


def gate_4_prefill_faster_and_gate_kept(state: DeploymentState, context: GateContext) -> GateResult:
    """Every applied prefill optimisation kept the token gate; final prefill_s strictly below the baseline."""
    return _faster_and_gate_kept(state, Phase.PREFILL_OPT, "prefill_s")


def gate_5_decode_faster_and_gate_kept(state: DeploymentState, context: GateContext) -> GateResult:
    """Every applied decode optimisation kept the token gate; final ms_per_token strictly below the baseline; with a
    declared drafter, a SpeculationChecked whose streams with and without it are equal on every prompt (its
    acceptance length is a figure, never part of the verdict)."""
    faster = _faster_and_gate_kept(state, Phase.DECODE_OPT, "ms_per_token")
    if not faster or not state.drafter:
        return faster
    why = _required_problem(state, SpeculationChecked, speculation_problem, "a deployment with a drafter")
    if why:
        return _no(why)
    found = _latest(state, SpeculationChecked)
    return _yes(f"{faster.reason}; speculation exact on {len(found.event.prompts)} prompt(s) (seq {found.seq})")


def gate_6_finalized(state: DeploymentState, context: GateContext) -> GateResult:
    """The integrated runner passes the token gate, was measured, and the per-layer diagnosis ran."""
    tokens = _token_gates_ok(state)
    if not tokens:
        return tokens
    if not _all(state, PerformanceMeasured):
        return _no("no PerformanceMeasured in the attempt")
    if not _all(state, LayerDiagnosed):
        return _no("no LayerDiagnosed in the attempt: the diagnosis did not run")
    return _yes(f"{tokens.reason}; measured; diagnosis recorded")


def gate_7_evaluation_passed(state: DeploymentState, context: GateContext) -> GateResult:
    """The latest EvaluationRecorded of the attempt says PASS or PASS-with-warnings."""
    found = _latest(state, EvaluationRecorded)
    if found is None:
        return _no("no EvaluationRecorded in the attempt")
    if found.event.verdict not in EVALUATION_PASSES:
        return _no(f"EvaluationRecorded seq {found.seq} says {found.event.verdict}")
    return _yes(f"independent evaluation {found.event.verdict} (seq {found.seq})")


def unbound_evidence(state: DeploymentState) -> str | None:
    """The first evidence of the open attempt measured against another model than the deployment's (None:
    all of it carries the deployment's digest, or no digest was recorded yet - a ledger older than it)."""
    digest = state.model_digest
    if digest is None or state.open_attempt is None:
        return None
    for found in state.open_attempt.evidence:
        e = found.event
        if isinstance(e, Measured) and not isinstance(e, ModelDigested) and e.model_digest != digest:
            measured = f"was measured against model digest {e.model_digest[:12]}" if e.model_digest else \
                "carries no model digest"
            return (f"{type(e).__name__} seq {found.seq} {measured}, not the deployment's {digest[:12]} "
                    f"(ModelDigested seq {state.digest.seq})")
    return None


def bound_to_digest(predicate: Predicate) -> Predicate:
    """A gate that first refuses evidence whose model digest is not the deployment's."""

    @wraps(predicate)
    def gate(state: DeploymentState, context: GateContext) -> GateResult:
        problem = unbound_evidence(state)
        return _no(problem) if problem else predicate(state, context)

    return gate


PREDICATES: dict[Phase, Predicate] = {
    phase: bound_to_digest(predicate) for phase, predicate in {
        Phase.REFERENCE: gate_0_reference_ok,
        Phase.KERNELS: gate_1_all_kernels_pass,
        Phase.BLOCK: gate_2_block_ok,
        Phase.FULL_MODEL: gate_3_token_gate_ok,
        Phase.PREFILL_OPT: gate_4_prefill_faster_and_gate_kept,
        Phase.DECODE_OPT: gate_5_decode_faster_and_gate_kept,
        Phase.FINALIZE: gate_6_finalized,
        Phase.EVALUATION: gate_7_evaluation_passed,
    }.items()
}


def no_retry_left(state: DeploymentState, context: GateContext) -> GateResult:
    """A failure of the open attempt goes to human review (see `DeploymentState.escalates_on_failure`)."""
    if state.escalates_on_failure():
        return _yes("the gate's retry is spent (or Phase 7 said FAIL)")
    return _no("the gate has a retry left")


def inconclusive_limit_reached(state: DeploymentState, context: GateContext) -> GateResult:
    """An inconclusive open attempt goes to human review (see `DeploymentState.escalates_on_inconclusive`)."""
    if state.escalates_on_inconclusive():
        return _yes("the gate's device run has given no verdict on too many attempts in a row")
    return _no("the gate may be attempted again")


def _blocked_at(phase: Phase) -> Predicate:
    def predicate(state: DeploymentState, context: GateContext) -> GateResult:
        if state.blockers and state.next_phase == phase:
            return _yes(f"blocked at phase {int(phase)}")
        return _no(f"no active blocker at phase {int(phase)}")

    predicate.__name__ = f"blocked_at_phase_{int(phase)}"
    return predicate


CONDITIONS: dict[str, Predicate] = {
    predicate.__name__: predicate for predicate in (*PREDICATES.values(), no_retry_left, inconclusive_limit_reached,
                                           *map(_blocked_at, Phase))
}


def baseline_misses(b) -> list[str]:
    """Which of the thresholds a Phase 0 baseline recorded (`ReferenceBaselineRecorded.thresholds`) its own figures
    miss, each with the figure and the bound: a degenerate reference says whether it is collapsed on one token
    (top-1 probability, entropy), near-uniform (entropy within the token gate's KL max of log V) or flat (logit
    spread)."""
    t, out = b.thresholds, []
    if "top1_prob_max" in t and b.top1_prob >= t["top1_prob_max"]:  # the bounds are strict (hf_reference.baseline)
        out.append(f"top-1 probability {b.top1_prob:.6g} >= top1_prob_max {t['top1_prob_max']!r} "
                   f"(token {b.top1_text!r})")
    if "entropy_min" in t and b.entropy <= t["entropy_min"]:
        out.append(f"entropy {b.entropy:.6g} nats <= entropy_min {t['entropy_min']!r}")
    if "entropy_max" in t and b.entropy >= t["entropy_max"]:
        out.append(f"near-uniform: entropy {b.entropy:.4g} nats >= entropy_max {t['entropy_max']:.4g} (log V less the "
                   f"token gate's KL max: an output of constant logits would pass that KL max against it)")
    if "logit_std_min" in t and b.logit_std <= t["logit_std_min"]:
        out.append(f"logit std {b.logit_std:.6g} <= logit_std_min {t['logit_std_min']!r}")
    return out
