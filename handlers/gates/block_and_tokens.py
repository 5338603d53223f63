"""Phase 2 — one block (layer 0) vs HF bf16; Phase 3 — the full model: token gate + per-layer diagnosis.

Both talk only to the deployment's model backend (`handlers.gates.runtime.model_backend`)."""

from __future__ import annotations

from handlers.gates import GateOutcome, GateRun
from handlers import narrate
from handlers.gates.runtime import model_backend
from npu_kernels.model.compare import BisectResult, token_gate_failure
from npu_kernels.thresholds import PREFILL_HEALTHY_COS_MIN
from ledger.events import BlockValidated, ConvStateChecked, LayerDiagnosed, TokenGateChecked


def run_block(ctx: GateRun) -> GateOutcome:
    backend = model_backend(ctx.state, ctx.config)
    events, reasons = [], []
    for layer in ctx.config.arch.block_layers()[:-1]:  # a hybrid's other block first (LFM2: its first attention layer)
        narrate.report(f"layer-{layer} block on {backend.name}, canonical prompt (the other mixer of a hybrid)")
        other = BlockValidated(**backend.block_gate(layer).event_fields())
        events.append(other)
        if not other.passed:
            reasons.append(f"the layer-{layer} block misses the gate (cosine {other.cosine:.5f})")
    # a hybrid: the state the prefill hands the decode (npu_kernels.model.features.short_conv)
    if ctx.config.arch.conv_layers():
        narrate.report(f"carried convolution state vs the reference's conv cache, then one decode step, on {backend.name}")
        conv = ConvStateChecked(**backend.conv_state_check())
        events.append(conv)
        if not conv.passed:
            reasons.append(f"the carried convolution state misses the check (next-token logits cosine "
                           f"{conv.logits_cosine:.5f})")
    narrate.report(f"layer-0 block on {backend.name}, canonical prompt")
    result = backend.block_gate()
    fields = result.event_fields()
    triage = []
    if not result.passed:
        if backend.can_bisect:
            narrate.report("block gate failed: bisecting (kernels swapped to FP32 one at a time)")
            bisect = backend.bisect_block()
        else:
            narrate.report(f"block gate failed; {backend.name} cannot swap a kernel to FP32: no bisect")
            bisect = BisectResult(steps=[], culprit=None)
        fields.update(bisect=bisect.steps, culprit=bisect.culprit)
        reasons.append(f"bisect names {bisect.culprit}" if bisect.culprit else
                       "even the all-FP32 block misses the gate: the fault is in the pipeline, not a kernel")
        triage.append({"kind": "block", "block_cosine": result.cosine, "culprit": bisect.culprit,
                       "nan_count": result.nan_count, "head_dim": ctx.config.head_dim})
    event = BlockValidated(**fields)
    more = "".join(f"; layer-{e.layer} cosine {e.cosine:.5f}" if isinstance(e, BlockValidated) else
                   f"; carried conv state min cosine {min(x['cosine'] for x in e.layers):.5f}, next-token logits "
                   f"{e.logits_cosine:.5f}" for e in events)
    return GateOutcome(events=[*events, event], reasons=reasons, triage=triage,
                       summary=f"layer-0 cosine {event.cosine:.5f}, per-position min {event.per_position_min:.5f}{more}")


def token_gate_events(ctx: GateRun, backend, context: str, full: bool | None = None) -> list[TokenGateChecked]:
    """The token gate on the backend's prompts (2, or 8 with full), one event per prompt."""
    prompts = backend.prompts(ctx.options.full if full is None else full)
    events = []
    for i, prompt in enumerate(prompts, start=1):
        narrate.report(f"[{i}/{len(prompts)}] token gate ({context}), prompt {prompt.index}: {prompt.text[:40]!r}")
        fields = backend.token_gate(prompt, context).event_fields()
        fields.update(executor=backend.name, pipeline=backend.options)
        events.append(TokenGateChecked(**fields))
    return events


def diagnosis_events(ctx: GateRun, backend) -> list[LayerDiagnosed]:
    narrate.report("per-layer diagnosis on the canonical prompt")
    return [LayerDiagnosed(**row) for row in backend.diagnose()]


def run_full(ctx: GateRun) -> GateOutcome:
    backend = model_backend(ctx.state, ctx.config)
    gates = token_gate_events(ctx, backend, "phase3")
    layers = diagnosis_events(ctx, backend)
    failed = [g for g in gates if not g.passed]
    # prefill is healthy when every layer's block output tracks the reference (the per-layer diagnosis)
    prefill_ok = all(layer.cos_min >= PREFILL_HEALTHY_COS_MIN for layer in layers)
    triage = []
    reasons = []
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
