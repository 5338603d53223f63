"""Checks of one piece of evidence, re-derived from its own recorded numbers: why a KernelVerified or a
TokenGateChecked cannot count toward a gate (None: it can). The gate predicates (`statemachine.predicates`),
the Phase 1 handler and the independent evaluator share them, so all three judge a row the same way.
"""

from __future__ import annotations

import math

from ledger.events import ConvStateChecked, KernelVerified, SpeculationChecked, TokenGateChecked
from npu_kernels.thresholds import (
    ATOL_ARTIFACT,
    CONV_STATE_THRESHOLDS,
    DECODE_GATE_PRINTED_REL,
    DECODE_GATE_THRESHOLDS,
    TOKEN_GATE_TOP_K,
    perplexity_ratio,
    state_drift_increments,
    strictest_teacher_forced,
    teacher_forced_problems,
    token_gate_failure_line,
)


def _finite(x: float | None) -> bool:
    return x is None or math.isfinite(x)


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


def kernel_problem(k: KernelVerified) -> str | None:
    """Why a measured KernelVerified cannot count toward gate 1 (None: it passes, or is the documented
    near-zero atol artifact)."""
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


def token_gate_problem(t: TokenGateChecked) -> str | None:
    """Why a TokenGateChecked cannot open a gate: re-derived from its own numbers, both walks."""
    if t.context.startswith("drill"):
        return f"a gate drill ({t.context}) is never a deployment's evidence"
    if t.nan_count or not _finite(t.kl_divergence) or not all(map(math.isfinite, t.kl_per_step)):
        return f"NaN in the logits ({t.nan_count} NaN, KL {t.kl_divergence})"
    if not t.passed:  # the criterion it misses first, never a bare "failed at step None" (issue 48 item 3)
        return (token_gate_failure_line(t, strictest_teacher_forced(t.thresholds)) or
                "recorded FAIL, though none of its figures misses a criterion")
    if t.top_k > TOKEN_GATE_TOP_K:
        return f"judged against top-{t.top_k}; the gate is top-{TOKEN_GATE_TOP_K}"
    problem = _first_divergence_problem(t)
    return problem or teacher_forced_problem(t)


def conv_state_problem(c: ConvStateChecked) -> str | None:
    """Why a carried-state check cannot count (None: it can): it says FAIL, or its numbers miss the thresholds it
    records or policy's (npu_kernels.thresholds.CONV_STATE_THRESHOLDS, never weaker), or it checked no layer.
    mlir-air's decode gate (method "decode-gate") is re-derived as that gate decides (decode_gate_problem)."""
    if c.method == "decode-gate":
        return decode_gate_problem(c)
    if not c.passed:
        return f"the carried-state check did not pass (logits cosine {c.logits_cosine})"
    if not c.layers:
        return "the carried-state check names no short-convolution layer"
    state_min = max(c.thresholds.get("state_cosine", 0.0), CONV_STATE_THRESHOLDS["state_cosine"])
    logits_min = max(c.thresholds.get("logits_cosine", 0.0), CONV_STATE_THRESHOLDS["logits_cosine"])
    worst = min(c.layers, key=lambda x: x["cosine"] if math.isfinite(x["cosine"]) else -math.inf)
    if not worst["cosine"] >= state_min:  # `not >=` also catches a NaN
        return f"layer {worst['layer']}'s carried state cosine {worst['cosine']} < {state_min}"
    if not c.logits_cosine >= logits_min:
        return f"the next decode step's logits cosine {c.logits_cosine} < {logits_min}"
    return None


def decode_gate_problem(c: ConvStateChecked) -> str | None:
    """Why an mlir-air decode gate's record cannot count (None: it can), from its own per-token figures against
    the stricter of its recorded thresholds and npu_kernels.thresholds.DECODE_GATE_THRESHOLDS (lfm2_1_2b_q4nx's
    `make decode-gate`): it ran elsewhere than on mlir-air, says FAIL, scored no token, a token's logits cosine is
    under the bound, it did not carry the state (no --seq) or compared no state row, or a layer adds more relative-L2
    drift per model layer than the bound: counted by the run or re-derived from its per-layer figures (to their
    printed precision, DECODE_GATE_PRINTED_REL)."""
    if c.executor != "mlir-air":
        return f"mlir-air's decode gate recorded for the {c.executor} executor (in process: method carried-state)"
    if not c.passed:
        return f"the decode gate did not pass{': ' + c.problem if c.problem else ''} (min logits cosine {c.logits_cosine})"
    if not c.steps:
        return "the decode gate scored no token"
    cos_min = max(c.thresholds.get("logits_cosine", 0.0), DECODE_GATE_THRESHOLDS["logits_cosine"])
    state_rel = min(c.thresholds.get("state_rel_per_layer", math.inf), DECODE_GATE_THRESHOLDS["state_rel_per_layer"])
    for s in c.steps:
        if not s["cosine"] >= cos_min:  # `not >=` also catches a NaN
            return f"token {s['token']}'s logits cosine {s['cosine']} < {cos_min}"
    if not c.carried_state or c.state_slots <= 0:
        return "the decode gate compared no carried state (run without --seq, or no state row compared)"
    if c.drift_layers:
        return f"{c.drift_layers} layer(s) add more than {c.thresholds.get('state_rel_per_layer')} drift per model layer"
    for s in c.steps:
        rows = [(x["layer"], x["rel_l2"]) for x in s.get("per_layer") or []]
        for layer, _prev, _this, span, inc in state_drift_increments(rows):
            if not inc <= state_rel + DECODE_GATE_PRINTED_REL:
                return (f"token {s['token']}: layer {layer}'s state drift {inc:.4f} per model layer (over {span}) "
                        f"> {state_rel}")
    return None


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
    thresholds and npu_kernels.thresholds; its perplexity ratio is re-derived from the recorded log-probs."""
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


def speculation_problem(s: SpeculationChecked) -> str | None:
    """Why a SpeculationChecked cannot accept speculation (None: it can), from its own recorded streams (on mlir-air,
    which prints no stream, each prompt's `exact_for` [SAME, K] of dflash_acceptance_device.py --exactness): a prompt
    whose tokens with the drafter differ from those without it (or a recorded first divergence, exact count or
    `passed` that the streams contradict), no prompt at all, or a drill's test faults. The acceptance length is
    a performance figure and decides nothing."""
    if not s.prompts:
        return "no gate prompt recorded"
    exact = 0
    for r in s.prompts:
        if "exact_for" in r:  # mlir-air's `--exactness` prints per prompt only where the streams part: SAME of K
            same, compared = (int(x) for x in r["exact_for"])
            if compared != s.n_tokens:
                return f"prompt {r.get('index')}: {compared} tokens compared, {s.n_tokens} recorded as compared"
            if (same == compared) != (r.get("first_divergence") is None):
                return (f"prompt {r.get('index')}: the recorded first divergence {r.get('first_divergence')} "
                        f"contradicts its exact for {same}/{compared}")
            if same != compared:
                return f"prompt {r.get('index')}: the tokens with the drafter differ from those without it at step {same}"
            exact += 1
            continue
        spec, plain = list(r.get("tokens_spec", [])), list(r.get("tokens_plain", []))
        if len(plain) != s.n_tokens or not spec:
            return (f"prompt {r.get('index')}: {len(plain)} tokens without the drafter, {s.n_tokens} recorded as "
                    "compared")
        same = spec == plain
        if same != (r.get("first_divergence") is None):
            return (f"prompt {r.get('index')}: the recorded first divergence {r.get('first_divergence')} contradicts "
                    "its streams")
        if not same:
            step = next((i for i, (a, b) in enumerate(zip(spec, plain)) if a != b), min(len(spec), len(plain)))
            return f"prompt {r.get('index')}: the tokens with the drafter differ from those without it at step {step}"
        exact += 1
    if exact != s.exact_prompts or not s.passed:
        return (f"records passed={s.passed}, {s.exact_prompts} exact prompts; its streams say {exact} of "
                f"{len(s.prompts)}")
    if s.faults:  # a drill whose fault left every stream exact still accepts nothing
        return f"a drill (test faults {', '.join(s.faults)}) left every stream exact"
    return None
