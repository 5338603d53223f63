"""The deployment lifecycle as one table, the gate predicates it names, and the machine that checks them.

`TRANSITIONS` is the whole lifecycle: a reviewer reads every gate (the `conditions` of each `pass_phase_N`)
without reading code, `mermaid()` draws it, and `fold` refuses any status change that is not a row of it.
There is no row from `phaseN` to `phaseN+2`: a gate cannot be skipped.

A gate predicate is `(state, context) -> GateResult`: it reads the evidence of the open attempt (and the
resolved config) from the folded `DeploymentState`, and whatever the stream cannot know (the planned kernel
list) from the `GateContext` the handler builds. It re-derives verdicts from the recorded numbers rather
than trusting a `passed` flag, and its reason names the unmet criterion and the seq of the evidence.

`DeploymentMachine(state, context).try_pass(phase)` is what a handler calls before appending PhasePassed:
it raises `GateRejected` with the reason (transitions' own failed guard is silent). Nothing here does I/O;
the machine's status is a value the next fold will confirm, never a thing that is stored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial, wraps
from typing import Any, NamedTuple

from transitions import Machine

from ledger.events import (
    BlockValidated,
    EvaluationRecorded,
    Event,
    KernelVerified,
    LayerDiagnosed,
    Measured,
    ModelDigested,
    OptimizationTried,
    PerformanceMeasured,
    ReferenceBaselineRecorded,
    TokenGateChecked,
    WeightsChecked,
)
from kernels.thresholds import (
    ATOL_ARTIFACT,
    BLOCK_COSINE_MIN,
    TOKEN_GATE_TOP_K,
    per_position_threshold,
    perplexity_ratio,
    strictest_teacher_forced,
    teacher_forced_problems,
)
from statemachine.phases import Phase, Status
from statemachine.state import EVALUATION_PASSES, DeploymentState, Evidence

# --- the lifecycle ---------------------------------------------------------------------------------------

_PHASE_STATES = [p.status.value for p in Phase]

TRANSITIONS: list[dict[str, Any]] = [
    # architecture assessment: in scope starts Phase 0, out of scope ends the deployment
    {"trigger": "assess", "source": "requested", "dest": "phase0"},
    {"trigger": "reject", "source": "requested", "dest": "rejected"},
    # the gates, in order; each opens only when its predicate holds on the open attempt's evidence
    {"trigger": "pass_phase_0", "source": "phase0", "dest": "phase1", "conditions": "gate_0_reference_ok"},
    {"trigger": "pass_phase_1", "source": "phase1", "dest": "phase2", "conditions": "gate_1_all_kernels_pass"},
    {"trigger": "pass_phase_2", "source": "phase2", "dest": "phase3", "conditions": "gate_2_block_ok"},
    {"trigger": "pass_phase_3", "source": "phase3", "dest": "phase4", "conditions": "gate_3_token_gate_ok"},
    {"trigger": "pass_phase_4", "source": "phase4", "dest": "phase5",
     "conditions": "gate_4_prefill_faster_and_gate_kept"},
    {"trigger": "pass_phase_5", "source": "phase5", "dest": "phase6",
     "conditions": "gate_5_decode_faster_and_gate_kept"},
    {"trigger": "pass_phase_6", "source": "phase6", "dest": "phase7", "conditions": "gate_6_finalized"},
    {"trigger": "pass_phase_7", "source": "phase7", "dest": "deployed", "conditions": "gate_7_evaluation_passed"},
    # a failed gate is retried once; the next failure (or a Phase 7 FAIL) goes to a human
    *({"trigger": p.fail_trigger, "source": p.status.value, "dest": "needs_human_review",
       "conditions": "no_retry_left"} for p in Phase),
    *({"trigger": p.fail_trigger, "source": p.status.value, "dest": p.status.value,
       "unless": "no_retry_left"} for p in Phase),
    # a blocker stops the deployment until a human records the fix; resuming returns to the blocked phase
    # (a deployed model whose re-audit fails is blocked at Phase 7 as well)
    {"trigger": "raise_blocker", "source": [*_PHASE_STATES, "deployed", "needs_human_review"],
     "dest": "needs_human_review"},
    *({"trigger": "resume", "source": "needs_human_review", "dest": p.status.value,
       "conditions": f"blocked_at_phase_{int(p)}"} for p in Phase),
]

STATES = [s.value for s in Status]


@dataclass(frozen=True)
class Edge:
    """One row of the table with a single source."""

    trigger: str
    source: str
    dest: str
    conditions: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()


def edges(transitions: list[dict[str, Any]] = TRANSITIONS) -> list[Edge]:
    """The table's rows, one per source state, in table order."""

    def names(value: str | list[str] | None) -> tuple[str, ...]:
        return () if value is None else (value,) if isinstance(value, str) else tuple(value)

    return [
        Edge(row["trigger"], source, row["dest"], names(row.get("conditions")), names(row.get("unless")))
        for row in transitions
        for source in names(row["source"])
    ]


# --- gate context and results ---------------------------------------------------------------------------


def kernel_key(kernel: str, shape: Mapping[str, Any]) -> tuple[str, str]:
    """The identity of a (kernel, shape) pair: the shape as canonical JSON, so key order never matters."""
    return kernel, json.dumps(dict(shape), sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class GateContext:
    """What a gate needs that the stream does not hold, supplied by the handler.

    `planned_kernels`: the (kernel, shape) pairs the model needs (derived from its config), given as
    `[("GEMM", {"M": 2048, "K": 2048, "N": 2048}), ...]`; stored as `kernel_key`s. Gate 1 refuses to open
    without a plan (None), so a stream cannot pass Phase 1 by verifying fewer kernels than the model needs.
    """

    planned_kernels: frozenset[tuple[str, str]] | None = None  # normalised from any iterable of pairs

    def __post_init__(self) -> None:
        if self.planned_kernels is not None:
            keys = frozenset(k if isinstance(k[1], str) else kernel_key(*k) for k in self.planned_kernels)
            object.__setattr__(self, "planned_kernels", keys)


class GateResult(NamedTuple):
    """`(ok, reason)`: the reason names the unmet criterion, or summarises the evidence when ok.

    Its truth value is `ok` (a plain non-empty tuple would always be true).
    """

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


Predicate = Callable[[DeploymentState, GateContext], GateResult]


class GateRejected(Exception):
    """Raised when a gate is tried and one of its criteria is unmet; `reason` names it."""

    def __init__(self, phase: Phase, reason: str) -> None:
        self.phase = Phase(phase)
        self.reason = reason
        super().__init__(f"phase {int(phase)} ({self.phase.title}) gate rejected: {reason}")


def _yes(reason: str) -> GateResult:
    return GateResult(True, reason)


def _no(reason: str) -> GateResult:
    return GateResult(False, reason)


def _all(state: DeploymentState, event_type: type[Event]) -> list[Evidence]:
    return state.open_attempt.of_type(event_type) if state.open_attempt else []


def _latest(state: DeploymentState, event_type: type[Event]) -> Evidence | None:
    found = _all(state, event_type)
    return found[-1] if found else None


def _finite(x: float | None) -> bool:
    return x is None or math.isfinite(x)


# --- the gate predicates ---------------------------------------------------------------------------------


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
        return _no(f"ReferenceBaselineRecorded seq {baseline.seq} did not pass")
    if not b.logits_finite:
        return _no(f"ReferenceBaselineRecorded seq {baseline.seq} has non-finite logits")
    if b.config_mismatches:
        return _no(f"ReferenceBaselineRecorded seq {baseline.seq}: config differs from config.json in "
                   f"{b.config_mismatches}")
    if digested is None:
        return _no("no ModelDigested in the attempt: the evidence is bound to no model")
    return _yes(f"config resolved; {w.n_tensors} weight tensors (seq {weights.seq}); HF bf16 top-1 "
                f"{b.top1_text!r} p={b.top1_prob:.3f} (seq {baseline.seq})")


def _some(names: list[str], n: int = 3) -> str:
    """The first few names of a list (the first one is the one to fix first) and how many more there are."""
    if not names:
        return "none"
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more


def atol_artifact(k: KernelVerified) -> str | None:
    """Why a FAIL row is only the near-zero atol artifact (None when it is not: the FAIL stands)."""
    c = ATOL_ARTIFACT
    if k.verdict != "FAIL" or k.kernel != c["kernel"] or k.contract not in c["contracts"]:
        return None
    if k.nan_count or not k.mismatches or not k.n_elements or k.mismatch_ref_max is None or k.mismatch_err_max is None:
        return None
    if not (math.isfinite(k.mismatch_ref_max) and math.isfinite(k.mismatch_err_max)):
        return None
    if not _finite(k.mean_rel_L1) or k.mean_rel_L1 > c["max_mean_rel_L1"]:
        return None
    if k.mismatches > c["max_mismatch_fraction"] * k.n_elements:
        return None
    if k.mismatch_ref_max > k.atol / k.rtol or k.mismatch_err_max > c["max_err_over_atol"] * k.atol:
        return None
    return (f"near-zero atol artifact: {k.mismatches}/{k.n_elements} elements, all at |ref| <= "
            f"{k.mismatch_ref_max:.3g} (atol-dominated), error <= {k.mismatch_err_max:.3g}, mean_rel_L1 "
            f"{k.mean_rel_L1:.3g} in tier")


def _kernel_problem(k: KernelVerified) -> str | None:
    if k.verdict != "PASS" and atol_artifact(k):
        return None
    if k.verdict != "PASS":
        return f"verdict {k.verdict} (mean_rel_L1 {k.mean_rel_L1}, mismatches {k.mismatches})"
    if k.mismatches:
        return f"PASS recorded with {k.mismatches} mismatches"
    if k.nan_count:
        return f"PASS recorded with {k.nan_count} NaN"
    if k.worst_ratio is not None and not k.worst_ratio <= 1:  # max |out-ref| / (atol + rtol*|ref|)
        return f"PASS recorded with worst_ratio {k.worst_ratio} > 1"
    if (k.tiles_in_flight is not None and k.tiles_target is not None and k.tiles_in_flight < k.tiles_target
            and not k.tile_justification):
        return f"{k.tiles_in_flight} of {k.tiles_target} tiles in flight without a justification"
    return None


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
    problem = _kernel_problem(origin)
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
        problem = _kernel_problem(row.event)
        if problem:
            return _no(f"KernelVerified seq {row.seq} {kernel} {shape} {contract}: {problem}")
    missing = sorted(context.planned_kernels - {(kernel, shape) for kernel, shape, _ in latest})
    if missing:
        shown = ", ".join(f"{kernel} {shape}" for kernel, shape in missing[:5])
        return _no(f"{len(missing)} planned kernel shape(s) not verified: {shown}")
    return _yes(f"{len(latest)} kernel verdict(s) PASS covering {len(context.planned_kernels)} planned shape(s)")


def gate_2_block_ok(state: DeploymentState, context: GateContext) -> GateResult:
    """The latest BlockValidated passed, and its numbers clear the thresholds (never weaker than policy)."""
    found = _latest(state, BlockValidated)
    if found is None:
        return _no("no BlockValidated in the attempt")
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
    return _yes(f"layer {b.layer} cosine {b.cosine:.4f} >= {cosine_min}, per-position min "
                f"{b.per_position_min:.4f} >= {position_min}, no NaN (seq {found.seq})")


def _token_gate_problem(t: TokenGateChecked) -> str | None:
    """Why a TokenGateChecked cannot open a gate: re-derived from its own numbers, both walks."""
    if t.context.startswith("drill"):
        return f"a gate drill ({t.context}) is never a deployment's evidence"
    if t.nan_count or not _finite(t.kl_divergence) or not all(map(math.isfinite, t.kl_per_step)):
        return f"NaN in the logits ({t.nan_count} NaN, KL {t.kl_divergence})"
    if not t.passed:
        return f"failed at step {t.divergence_step}: ours {t.chosen_ours} vs reference {t.chosen_ref}"
    if t.top_k > TOKEN_GATE_TOP_K:
        return f"judged against top-{t.top_k}; the gate is top-{TOKEN_GATE_TOP_K}"
    problem = _first_divergence_problem(t)
    return problem or teacher_forced_problem(t)


def _first_divergence_problem(t: TokenGateChecked) -> str | None:
    """vLLM's check_logprobs_close, as mlir-air's `make verify` decides it."""
    if t.divergence_step is None:
        if t.tokens_ours and t.tokens_ref and t.tokens_ours != t.tokens_ref:
            return "recorded no divergence but the two token sequences differ"
        return None
    if t.chosen_ours not in t.topk_ref[: t.top_k]:
        return f"passed, but our token {t.chosen_ours} is not in the reference top-{t.top_k} {t.topk_ref}"
    if t.chosen_ref not in t.topk_ours[: t.top_k]:
        return f"passed, but the reference token {t.chosen_ref} is not in our top-{t.top_k} {t.topk_ours}"
    return None


def teacher_forced_problem(t: TokenGateChecked) -> str | None:
    """The teacher-forced walk over every step (issue #15), judged against the stricter of its recorded
    thresholds and kernels.thresholds; its perplexity ratio is re-derived from the recorded log-probs."""
    if t.tf_steps < t.n_tokens or len(t.tf_tokens) != t.tf_steps:
        return f"teacher-forced walk covers {t.tf_steps} of {t.n_tokens} steps"
    if any(not top or tok != top[0] for tok, top in zip(t.tf_tokens, t.tf_topk_ref)):
        return "teacher-forced tokens are not the reference's argmax at every step"
    if t.tokens_ref and t.tokens_ref != t.tf_tokens[: len(t.tokens_ref)]:
        return "the greedy reference tokens are not a prefix of the teacher-forced tokens"
    ratio = perplexity_ratio(t.tf_logprob_ours, t.tf_logprob_ref)
    if ratio is None or t.tf_ppl_ratio is None or not math.isclose(ratio, t.tf_ppl_ratio, rel_tol=1e-9):
        return f"recorded perplexity ratio {t.tf_ppl_ratio} does not re-derive from the log-probs ({ratio})"
    problems = teacher_forced_problems(t.tf_topk_ours, t.tf_topk_ref, t.tf_kl_per_step, ratio, t.n_tokens,
                                       strictest_teacher_forced(t.thresholds))
    return f"passed, but {problems[0]}" if problems else None


def _token_gates_ok(state: DeploymentState) -> GateResult:
    checks = _all(state, TokenGateChecked)
    if not checks:
        return _no("no TokenGateChecked in the attempt")
    for found in checks:
        problem = _token_gate_problem(found.event)
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
    """Every applied decode optimisation kept the token gate; final ms_per_token strictly below the baseline."""
    return _faster_and_gate_kept(state, Phase.DECODE_OPT, "ms_per_token")


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


GATES: dict[Phase, Predicate] = {
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


def _blocked_at(phase: Phase) -> Predicate:
    def predicate(state: DeploymentState, context: GateContext) -> GateResult:
        if state.blockers and state.next_phase == phase:
            return _yes(f"blocked at phase {int(phase)}")
        return _no(f"no active blocker at phase {int(phase)}")

    predicate.__name__ = f"blocked_at_phase_{int(phase)}"
    return predicate


CONDITIONS: dict[str, Predicate] = {
    predicate.__name__: predicate for predicate in (*GATES.values(), no_retry_left, *map(_blocked_at, Phase))
}


# --- the machine -----------------------------------------------------------------------------------------


def _holds(predicate: Predicate, state: DeploymentState, context: GateContext) -> bool:
    return predicate(state, context).ok


class Lifecycle:
    """The plain model `transitions` drives: `state` is the status, and every condition named in
    TRANSITIONS is an attribute answering from the folded deployment and the gate context."""

    def __init__(self, deployment: DeploymentState, context: GateContext) -> None:
        self.deployment = deployment
        self.context = context
        for name, predicate in CONDITIONS.items():
            setattr(self, name, partial(_holds, predicate, deployment, context))


class DeploymentMachine:
    """The lifecycle machine rebuilt at the folded status of one deployment.

    Build one per fold: `try_pass` moves the machine's status, not the deployment; the PhasePassed the
    handler then appends is what moves the deployment, on the next fold.
    """

    def __init__(self, state: DeploymentState, context: GateContext | None = None) -> None:
        self.deployment = state
        self.context = context or GateContext()
        self.model = Lifecycle(state, self.context)
        self.machine = Machine(model=self.model, states=STATES, transitions=TRANSITIONS,
                               initial=state.status.value, auto_transitions=False)

    @property
    def status(self) -> Status:
        return Status(self.model.state)

    def triggers(self) -> list[str]:
        """The triggers that have a row from the current status (their guards not evaluated)."""
        return self.machine.get_triggers(self.model.state)

    def check(self, phase: int) -> GateResult:
        """Run phase's gate predicate on the folded evidence, without moving anything."""
        return GATES[Phase(phase)](self.deployment, self.context)

    def try_pass(self, phase: int) -> GateResult:
        """Open phase's gate or raise `GateRejected` naming the unmet criterion.

        Refused unless phase is the next gate and its attempt is open. Returns the passing result, whose
        reason summarises the evidence (handlers may use it as the PhasePassed summary).
        """
        phase = Phase(phase)
        if self.status is not phase.status:
            if self.status is Status.NEEDS_HUMAN_REVIEW:
                raise GateRejected(phase, "the deployment needs human review: resume it first")
            raise GateRejected(phase, f"the deployment is at {self.status.value}, not {phase.status.value}")
        if not self.deployment.attempt_open(phase):
            raise GateRejected(phase, f"no open attempt of phase {int(phase)}: record PhaseStarted first")
        result = self.check(phase)
        if not result.ok:
            raise GateRejected(phase, result.reason)
        if not self.model.trigger(phase.pass_trigger):  # the guard re-evaluates the same predicate
            raise GateRejected(phase, f"{phase.pass_trigger} refused by the state machine")
        return result
