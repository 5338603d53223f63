"""Phase 2 — one block (layer 0) vs HF bf16; Phase 3 — the full model: token gate + per-layer diagnosis."""

from __future__ import annotations

from handlers.gates import GateOutcome, GateRun
from handlers.gates.runtime import build_pipeline, hf_runner
from kernels.thresholds import PREFILL_HEALTHY_COS_MIN, TOKEN_GATE_STEPS, TOKEN_GATE_TOP_K
from ledger.events import BlockValidated, LayerDiagnosed, TokenGateChecked


def run_block(ctx: GateRun) -> GateOutcome:
    from kernels.model.compare import bisect_block, block_gate
    from kernels.model.prompts import canonical_tokens

    cfg = ctx.config
    ref = hf_runner(str(ctx.model_path))
    pipe = build_pipeline(ctx.state, cfg)
    tokens = canonical_tokens(ref.tokenizer)
    ctx.progress(f"layer-0 block on {pipe.name}, {len(tokens)} real positions")
    ours = pipe.prefill(tokens)
    ref_rec = ref.prefill(tokens)
    ref0 = ref_rec.layer_intermediates[0]["ffn_out"]
    result = block_gate(ours.layer_intermediates[0]["ffn_out"], ref0, cfg.head_dim, n_positions=len(tokens),
                        executor=ctx.state.executor)
    fields = result.event_fields()
    triage = []
    reasons = []
    if not result.passed:
        ctx.progress("block gate failed: bisecting (kernels swapped to FP32 one at a time)")
        bisect = bisect_block(pipe.with_fp32_kernels, tokens, ref0, cfg.head_dim)
        fields.update(bisect=bisect.steps, culprit=bisect.culprit)
        reasons.append(f"bisect names {bisect.culprit}" if bisect.culprit else
                       "even the all-FP32 block misses the gate: the fault is in the pipeline, not a kernel")
        triage.append({"kind": "block", "block_cosine": result.cosine, "culprit": bisect.culprit,
                       "nan_count": result.nan_count, "head_dim": cfg.head_dim})
    event = BlockValidated(**fields)
    return GateOutcome(events=[event], reasons=reasons, triage=triage,
                       summary=f"layer-0 cosine {event.cosine:.5f}, per-position min {event.per_position_min:.5f}")


def token_gate_events(ctx: GateRun, pipe, context: str, full: bool | None = None) -> list[TokenGateChecked]:
    """The token gate on the deployment's prompts (2, or 8 with full), one event per prompt."""
    from kernels.model.compare import token_gate
    from kernels.model.prompts import prompts_for

    ref = hf_runner(str(ctx.model_path))
    prompts = prompts_for(ref.tokenizer, full=ctx.options.get("full", False) if full is None else full)
    events = []
    for i, prompt in enumerate(prompts, start=1):
        ctx.progress(f"[{i}/{len(prompts)}] token gate ({context}), prompt {prompt.index}: {prompt.text[:40]!r}")
        res = token_gate(pipe, ref, prompt.tokens, n_tokens=TOKEN_GATE_STEPS, k=TOKEN_GATE_TOP_K, prompt_index=prompt.index,
                         prompt=prompt.text, tokenizer=ref.tokenizer, context=context)
        fields = res.event_fields()
        fields.update(executor=ctx.state.executor, pipeline=pipe.options.to_dict())
        events.append(TokenGateChecked(**fields))
    return events


def diagnosis_events(ctx: GateRun, pipe) -> list[LayerDiagnosed]:
    from kernels.model.compare import diagnose_layers
    from kernels.model.prompts import canonical_tokens

    ref = hf_runner(str(ctx.model_path))
    tokens = canonical_tokens(ref.tokenizer)
    ctx.progress("per-layer diagnosis on the canonical prompt")
    rows = diagnose_layers(pipe.prefill(tokens), ref.prefill(tokens), executor=ctx.state.executor)
    return [LayerDiagnosed(**row) for row in rows]


def run_full(ctx: GateRun) -> GateOutcome:
    pipe = build_pipeline(ctx.state, ctx.config)
    gates = token_gate_events(ctx, pipe, "phase3")
    layers = diagnosis_events(ctx, pipe)
    failed = [g for g in gates if not g.passed]
    # prefill is healthy when every layer's block output tracks the reference (the per-layer diagnosis)
    prefill_ok = all(layer.cos_min >= PREFILL_HEALTHY_COS_MIN for layer in layers)
    triage = []
    reasons = []
    from kernels.model.compare import token_gate_failure

    for g in failed:
        reasons.append(f"prompt {g.prompt_index}: {token_gate_failure(g)}")
        triage.append({"kind": "token_gate", "divergence_step": g.divergence_step, "nan_count": g.nan_count,
                       "layer_cosines": [layer.cos_min for layer in layers], "token_gate_passed": g.passed,
                       "rank_ours_in_ref": g.rank_ours_in_ref, "rank_ref_in_ours": g.rank_ref_in_ours,
                       "prefill_ok": prefill_ok, "kl_divergence": g.kl_divergence,
                       "first_divergence_passed": g.first_divergence_passed, "tf_passed": g.tf_passed,
                       "tf_kl_max": max(g.tf_kl_per_step, default=None), "tf_ppl_ratio": g.tf_ppl_ratio})
    worst = min((layer.cos_min for layer in layers), default=float("nan"))
    n_agree = sum(1 for g in gates if g.divergence_step is None)
    return GateOutcome(events=[*gates, *layers], reasons=reasons, triage=triage,
                       summary=f"{len(gates) - len(failed)}/{len(gates)} prompts pass the token gate (top-5 at the "
                               f"first divergence and teacher-forced over every step; {n_agree} identical over 32 "
                               f"tokens); worst per-layer cosine min {worst:.4f}")
