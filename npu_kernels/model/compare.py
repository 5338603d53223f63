"""The comparisons Phases 2-7 measure with: pure numpy on the records two runners produce.

block_gate      layer-0 block output vs the reference: whole-tensor cosine and per-position cosine min.
bisect_block    on a failed block: swap the executor's kernels for FP32 ones, cumulatively in block order;
                the first swap that clears the gate names the culprit kernel.
token_gate      two walks in one pass, both runners fed the reference's greedy tokens with their own KV
                caches: the first-divergence check (at the first step the argmaxes differ, each side's token
                must be in the other side's top-k, then it stops: vLLM `check_logprobs_close`) and the
                teacher-forced walk over every step (top-k inclusion, KL, perplexity ratio; issue #15).
diagnose_layers per-layer per-position cosine statistics (localisation only, never a verdict).

Every result carries its numbers and the thresholds (from `npu_kernels.thresholds`) it was judged against; `event_fields()` gives exactly the fields of the
matching ledger event (BlockValidated, TokenGateChecked; diagnose_layers returns LayerDiagnosed dicts).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from npu_kernels.model.description import GELU_TANH_GLU
from npu_kernels.model.features import short_conv
from npu_kernels.model.pipeline import BLOCK_KERNEL_ORDER
from npu_kernels.model.runner import Runner
from npu_kernels.thresholds import (
    TOKEN_GATE_STEPS,
    TOKEN_GATE_TOP_K,
    block_thresholds,
    perplexity_ratio,
    teacher_forced_problems,
    token_gate_failure_line,
    teacher_forced_thresholds,
)

REL_FLOOR = 1e-6  # denominator floor of max_rel (as mlir-air's comparators)


def per_position_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine per row of (positions, features); rows where either side has zero norm give 0."""
    a = np.asarray(a, np.float64).reshape(len(a), -1)
    b = np.asarray(b, np.float64).reshape(len(b), -1)
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch: {a.shape} vs {b.shape}")
    denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dot = (a * b).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, dot / np.where(denom > 0, denom, 1.0), 0.0)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denom) if denom > 0 else 0.0


@dataclass
class BlockResult:
    """Field names match the `BlockValidated` event."""

    layer: int
    executor: str
    n_positions: int
    cosine: float
    per_position_min: float
    p5: float
    median: float
    max_abs: float
    max_rel: float
    nan_count: int
    thresholds: dict[str, float]
    passed: bool
    bisect: list[dict[str, Any]] = field(default_factory=list)
    culprit: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)  # command, report sha256, mlir-air commit (mlir-air)

    def event_fields(self) -> dict[str, Any]:
        return asdict(self)


def block_gate(ours_layer0: np.ndarray, ref_layer0: np.ndarray, head_dim: int, *, n_positions: int | None = None,
               layer: int = 0, executor: str = "") -> BlockResult:
    """Judge a block output (positions, E) against the reference on the first `n_positions` rows (default:
    all rows; pass the real prompt length when either side is padded)."""
    ours = np.asarray(ours_layer0, np.float32)
    ref = np.asarray(ref_layer0, np.float32)
    n = n_positions if n_positions is not None else min(len(ours), len(ref))
    ours, ref = ours[:n], ref[:n]
    if ours.shape != ref.shape:
        raise ValueError(f"block outputs differ in shape: {ours.shape} vs {ref.shape}")
    thresholds = block_thresholds(head_dim)
    nan_count = int(np.count_nonzero(~np.isfinite(ours)))
    if nan_count:
        nan = float("nan")
        return BlockResult(layer, executor, n, nan, nan, nan, nan, nan, nan, nan_count, thresholds, False)
    pos = per_position_cosine(ours, ref)
    diff = np.abs(ours.astype(np.float64) - ref)
    whole = cosine(ours, ref)
    passed = whole >= thresholds["cosine"] and float(pos.min()) >= thresholds["per_position_min"]
    return BlockResult(
        layer=layer, executor=executor, n_positions=n, cosine=whole, per_position_min=float(pos.min()),
        p5=float(np.percentile(pos, 5)), median=float(np.median(pos)), max_abs=float(diff.max()),
        max_rel=float((diff / np.maximum(np.abs(ref), REL_FLOOR)).max()), nan_count=0,
        thresholds=thresholds, passed=bool(passed),
    )


def block_kernel_order(c) -> tuple[str, ...]:
    """The bisect's order for config `c`: a GELU-tanh GLU block uses the gelu kernel where SwiGLU uses silu_mul; a
    short-convolution layer 0 (LFM2) its eltwise_mul and conv1d where attention uses rope and flash_attention."""
    order = tuple("gelu" if k == "silu_mul" and c.arch.mlp == GELU_TANH_GLU else k for k in BLOCK_KERNEL_ORDER)
    return short_conv.block_kernel_order(order) if c.arch.is_conv(0) else order


@dataclass
class BisectResult:
    steps: list[dict[str, Any]]  # [{swapped, cosine, per_position_min, passed}]
    culprit: str | None


def bisect_block(make_runner: Callable[[frozenset[str]], Runner], tokens, ref_layer0: np.ndarray, head_dim: int,
                 *, order: Iterable[str] = BLOCK_KERNEL_ORDER, layer: int = 0) -> BisectResult:
    """Swap kernels to FP32 one at a time, cumulatively, in block order; the kernel whose swap first makes
    the block pass is the culprit (None when even the all-FP32 block fails: the fault is not in a kernel).

    `make_runner(swapped)` builds the runner whose executor runs `swapped` on FP32 (e.g.
    `pipeline.with_fp32_kernels`)."""
    tokens = np.asarray(tokens)
    n = len(tokens)
    swapped: list[str] = []
    steps: list[dict[str, Any]] = []
    culprit = None
    for kernel in order:
        swapped.append(kernel)
        rec = make_runner(frozenset(swapped)).prefill(tokens)
        res = block_gate(rec.layer_intermediates[layer]["ffn_out"], ref_layer0, head_dim, n_positions=n,
                         layer=layer)
        steps.append({"swapped": list(swapped), "cosine": res.cosine, "per_position_min": res.per_position_min,
                      "passed": res.passed})
        if res.passed:
            culprit = kernel
            break
    return BisectResult(steps=steps, culprit=culprit)


def topk_ids(logits: np.ndarray, k: int = TOKEN_GATE_TOP_K) -> list[int]:
    """Top-k token ids, highest first; ties go to the smaller id (like np.argmax)."""
    z = np.asarray(logits, np.float32)
    z = np.where(np.isnan(z), -np.inf, z)
    k = min(k, z.shape[0])
    idx = np.argpartition(-z, k - 1)[:k]
    # include every id tied with the k-th value so that the smaller ids win the tie
    cut = z[idx].min()
    idx = np.flatnonzero(z >= cut)
    order = np.lexsort((idx, -z[idx]))
    return [int(i) for i in idx[order][:k]]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, np.float64)
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def kl_divergence(ref_logits: np.ndarray, ours_logits: np.ndarray) -> float:
    """KL(ref || ours) of the two next-token distributions, nats."""
    lp, lq = log_softmax(ref_logits), log_softmax(ours_logits)
    p = np.exp(lp)
    return float(np.sum(p * (lp - lq)))


@dataclass
class TokenGateResult:
    """Field names match the `TokenGateChecked` event. Ranks are 1-based (None: absent from the top-k).

    The first-divergence fields (divergence_step ... kl_per_step, tokens_*) are vLLM's check as mlir-air's
    `make verify` decides it; the `tf_*` fields are the teacher-forced walk over every step. `passed` is
    both: `first_divergence_passed and tf_passed`."""

    prompt_index: int
    prompt: str
    executor: str
    pipeline: dict[str, Any]
    n_tokens: int
    top_k: int
    passed: bool
    divergence_step: int | None
    agreed_prefix: int
    chosen_ours: int | None = None
    chosen_ref: int | None = None
    topk_ours: list[int] = field(default_factory=list)
    topk_ref: list[int] = field(default_factory=list)
    rank_ours_in_ref: int | None = None
    rank_ref_in_ours: int | None = None
    kl_divergence: float | None = None
    kl_per_step: list[float] = field(default_factory=list)
    tokens_ours: list[int] = field(default_factory=list)
    tokens_ref: list[int] = field(default_factory=list)
    text_ours: str = ""
    text_ref: str = ""
    nan_count: int = 0
    context: str = "phase3"
    first_divergence_passed: bool | None = None
    tf_steps: int = 0
    tf_tokens: list[int] = field(default_factory=list)
    tf_topk_ours: list[list[int]] = field(default_factory=list)
    tf_topk_ref: list[list[int]] = field(default_factory=list)
    tf_kl_per_step: list[float] = field(default_factory=list)
    tf_logprob_ours: list[float] = field(default_factory=list)
    tf_logprob_ref: list[float] = field(default_factory=list)
    tf_ppl_ratio: float | None = None
    tf_passed: bool | None = None
    thresholds: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)  # command, report sha256, mlir-air commit (mlir-air)
    reason: str = ""  # why it failed, one sentence (not an event field)

    def event_fields(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("reason")
        return d

    def tf_stats(self) -> dict[str, float | None]:
        """Summary of the teacher-forced walk (reports, the drill's table)."""
        return teacher_forced_stats(self.tf_kl_per_step, self.tf_topk_ours, self.tf_topk_ref, self.tf_ppl_ratio)


def _rank(token: int, top: list[int]) -> int | None:
    return top.index(token) + 1 if token in top else None


def teacher_forced_stats(kls, topk_ours, topk_ref, ppl_ratio) -> dict[str, float | None]:
    """kl max / p95 / mean, the fraction of steps where both argmaxes sit in the other side's top-k, and the
    perplexity ratio, of one prompt's teacher-forced walk."""
    kl = np.asarray(kls, np.float64)
    both = [o[0] in r and r[0] in o for o, r in zip(topk_ours, topk_ref)]
    return {"kl_max": float(kl.max()) if kl.size else None, "kl_p95": float(np.percentile(kl, 95)) if kl.size else None,
            "kl_mean": float(kl.mean()) if kl.size else None,
            "inclusion": float(np.mean(both)) if both else None, "ppl_ratio": ppl_ratio}


def token_gate(ours: Runner, ref: Runner, prompt_tokens, n_tokens: int = TOKEN_GATE_STEPS, k: int = TOKEN_GATE_TOP_K, *, prompt_index: int = 0,
               prompt: str = "", tokenizer=None, context: str = "phase3") -> TokenGateResult:
    """Both walks of the token gate in one pass over `n_tokens` steps.

    Every step feeds both runners the reference's greedy token (prefill, then KV-cached decode, as
    production decodes). Up to the first step where the two argmaxes differ this *is* the lockstep greedy
    walk, so the first-divergence check (top-k set inclusion of both chosen tokens, then stop: vLLM's
    `check_logprobs_close`, what mlir-air's `make verify` decides) reads its numbers from the same steps.
    The walk then goes on teacher-forced to the last step, recording at every step both top-k lists, the
    KL(reference || ours) of the next-token distributions and both sides' log-probability of the
    reference token (-> the perplexity ratio); `thresholds.teacher_forced_problems` judges it. NaN in
    either side's logits stops the walk and fails the gate."""
    tokens = np.asarray(prompt_tokens, np.int64)
    pos = len(tokens)
    logits_o = ours.prefill(tokens).logits_at_pred
    logits_r = ref.prefill(tokens).logits_at_pred
    greedy = {"divergence": None, "passed": True, "reason": "", "top_o": [], "top_r": [], "toks_o": [], "toks_r": [],
              "kls": [], "done": False}
    tf = {"tokens": [], "top_o": [], "top_r": [], "kls": [], "lp_o": [], "lp_r": []}
    nan_count, nan_reason = 0, ""
    for step in range(n_tokens):
        nan_count = int(np.count_nonzero(np.isnan(logits_o)))
        if nan_count or np.isnan(logits_r).any():
            nan_reason = f"NaN in the logits at step {step} ({nan_count} in ours)"
            if not greedy["done"]:
                greedy.update(passed=False, divergence=step, done=True)
            break
        top_o, top_r = topk_ids(logits_o, k), topk_ids(logits_r, k)
        lp_o, lp_r = log_softmax(logits_o), log_softmax(logits_r)
        kl = float(np.sum(np.exp(lp_r) * (lp_r - lp_o)))
        forced = top_r[0]
        tf["tokens"].append(forced)
        tf["top_o"].append(top_o)
        tf["top_r"].append(top_r)
        tf["kls"].append(kl)
        tf["lp_o"].append(float(lp_o[forced]))
        tf["lp_r"].append(float(lp_r[forced]))
        if not greedy["done"]:
            _greedy_step(greedy, step, top_o, top_r, kl, k)
        if step + 1 < n_tokens:
            logits_o = ours.decode_step(forced, pos).lm_head_logits
            logits_r = ref.decode_step(forced, pos).lm_head_logits
            pos += 1
    thresholds = teacher_forced_thresholds()
    ppl_ratio = perplexity_ratio(tf["lp_o"], tf["lp_r"])
    tf_problems = ([nan_reason] if nan_reason else
                   teacher_forced_problems(tf["top_o"], tf["top_r"], tf["kls"], ppl_ratio, n_tokens, thresholds))
    tf_passed = not tf_problems
    first_passed = greedy["passed"]  # a NaN after a passed divergence is the teacher-forced walk's to judge
    divergence = greedy["divergence"]
    toks_o, toks_r = greedy["toks_o"], greedy["toks_r"]
    agreed = divergence if divergence is not None else len(toks_o)
    decode = (lambda ids: tokenizer.decode(ids)) if tokenizer is not None else (lambda ids: "")
    chosen_o = toks_o[-1] if toks_o else None
    chosen_r = toks_r[-1] if toks_r else None
    top_o, top_r = greedy["top_o"], greedy["top_r"]
    reasons = [r for r in (greedy["reason"], nan_reason) if r] + [p for p in tf_problems if p != nan_reason]
    pipeline = getattr(ours, "options", None)
    return TokenGateResult(
        prompt_index=prompt_index, prompt=prompt, executor=_executor_name(ours),
        pipeline=pipeline.to_dict() if hasattr(pipeline, "to_dict") else {}, n_tokens=n_tokens, top_k=k,
        passed=bool(first_passed and tf_passed), divergence_step=divergence, agreed_prefix=agreed,
        chosen_ours=chosen_o, chosen_ref=chosen_r, topk_ours=top_o, topk_ref=top_r,
        rank_ours_in_ref=_rank(chosen_o, top_r) if chosen_o is not None else None,
        rank_ref_in_ours=_rank(chosen_r, top_o) if chosen_r is not None else None,
        kl_divergence=greedy["kls"][-1] if greedy["kls"] else None, kl_per_step=greedy["kls"], tokens_ours=toks_o,
        tokens_ref=toks_r, text_ours=decode(toks_o), text_ref=decode(toks_r), nan_count=nan_count, context=context,
        first_divergence_passed=bool(first_passed), tf_steps=len(tf["tokens"]), tf_tokens=tf["tokens"],
        tf_topk_ours=tf["top_o"], tf_topk_ref=tf["top_r"], tf_kl_per_step=tf["kls"], tf_logprob_ours=tf["lp_o"],
        tf_logprob_ref=tf["lp_r"], tf_ppl_ratio=ppl_ratio, tf_passed=tf_passed, thresholds=thresholds,
        reason="; ".join(reasons),
    )


def _greedy_step(g: dict[str, Any], step: int, top_o: list[int], top_r: list[int], kl: float, k: int) -> None:
    """One step of the lockstep greedy walk (vLLM's check): record it; at the first divergence judge and stop."""
    chosen_o, chosen_r = top_o[0], top_r[0]
    g["toks_o"].append(chosen_o)
    g["toks_r"].append(chosen_r)
    g["kls"].append(kl)
    g["top_o"], g["top_r"] = top_o, top_r
    if chosen_o == chosen_r:
        return
    missing = []
    if chosen_o not in top_r:
        missing.append(f"ours chose {chosen_o}, not in the reference top-{k} {top_r}")
    if chosen_r not in top_o:
        missing.append(f"the reference chose {chosen_r}, not in our top-{k} {top_o}")
    g.update(divergence=step, passed=not missing, reason="; ".join(missing), done=True)


def _executor_name(runner) -> str:
    k = getattr(runner, "base_executor", None)
    return getattr(k, "name", None) or getattr(runner, "name", "")


def diagnose_layers(ours_prefill, ref_prefill, *, executor: str = "", prompt_index: int = 0,
                    n_positions: int | None = None) -> list[dict[str, Any]]:
    """Per layer: per-position cosine min/p5/median/mean, max_abs, mean_abs (fields of `LayerDiagnosed`)."""
    out = []
    pairs = zip(ours_prefill.layer_intermediates, ref_prefill.layer_intermediates)
    for layer, (o, r) in enumerate(pairs):
        if "ffn_out" not in o or "ffn_out" not in r:
            continue
        n = n_positions if n_positions is not None else min(len(o["ffn_out"]), len(r["ffn_out"]))
        a = np.asarray(o["ffn_out"][:n], np.float64)
        b = np.asarray(r["ffn_out"][:n], np.float64)
        pos = per_position_cosine(a, b)
        diff = np.abs(a - b)
        out.append({"layer": layer, "executor": executor, "cos_min": float(np.min(pos)),
                    "cos_p5": float(np.percentile(pos, 5)), "cos_median": float(np.median(pos)),
                    "cos_mean": float(np.mean(pos)), "max_abs": float(diff.max()), "mean_abs": float(diff.mean()),
                    "prompt_index": prompt_index})
    return out


ISOLATED_GAP = 0.05  # a layer's minimum this far below its 5th percentile is one position apart (display only)


def isolated_minima(layers) -> list[int]:
    """The layers (`LayerDiagnosed`-like: layer, cos_min, cos_p5) whose worst position's cosine lies more than
    ISOLATED_GAP below their 5th percentile: one position apart from the rest, such as a massive activation
    drifting under the floor-rounded residual add (docs/emulated_numerics.md, "Massive activations"). A note for
    the reader, never a verdict."""
    return [x.layer for x in layers if x.cos_p5 - x.cos_min > ISOLATED_GAP]


def token_gate_failure(g: Any) -> str:
    """One sentence on why a recorded token gate failed (a TokenGateChecked or TokenGateResult), from its
    fields: the criteria it misses first, then the figures of those that held
    (`thresholds.token_gate_failure_line`)."""
    return token_gate_failure_line(g, g.thresholds or None) or ("passed" if g.passed else "recorded FAIL")
