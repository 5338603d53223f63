"""Phase 0 — reference: the model digested, config resolved and equal to config.json, weights complete, HF
bf16 baseline sane. A 4-bit deployment first writes its dequantised reference folder from the bundle (the
digests of bundle and base recorded), and afterwards measures the quantisation budget against the base bf16
model (npu_kernels.model.q4nx_budget); every later phase gates against the dequantised reference."""

from __future__ import annotations

from pathlib import Path

from handlers.gates import GateOutcome, GateRun
from handlers import narrate
from npu_kernels.model.architecture import ModelConfigError, load_raw_config
from npu_kernels.backends.in_process import hf_reference
from npu_kernels.model.digest import file_sha256, model_digest
from npu_kernels.model.prompts import CANONICAL_PROMPT
from npu_kernels.model.q4nx import Q4nxError
from npu_kernels.model.q4nx_budget import budget, budget_rows
from npu_kernels.model.q4nx_bundle import padding_of, write_reference_folder
from npu_kernels.model.weights import WeightsError, check_weights, expected_tensors
from ledger.events import (
    ModelDigested,
    QuantisationBudgetMeasured,
    QuantisedBundleRead,
    ReferenceBaselineRecorded,
    WeightsChecked,
)


def _read_bundle(ctx: GateRun) -> tuple[list, list[str]]:
    """A 4-bit deployment's bundle and base digested and its dequantised reference folder written."""
    q = ctx.state.quantisation
    narrate.report(f"dequantising {q['bundle']} into the reference folder")
    try:
        style = q.get("style", "host")
        if style == "device":
            narrate.report("re-quantising the decode's weights (on-device 4-bit style) into decode.requant")
        info = write_reference_folder(q["bundle"], q["base"], ctx.model_path, ctx.config, style)
        fields = dict(bundle=q["bundle"], bundle_sha256=file_sha256(Path(q["bundle"])), base=q["base"],
                      base_digest=model_digest(q["base"]).digest, layout=info["layout"],
                      scale_dtype=info["scale_dtype"], padded=padding_of(ctx.config),
                      dequantised_sha256=info["dequantised_sha256"],
                      **({"style": style, "decode_sha256": info["decode_sha256"]} if style != "host" else {}))
    except (OSError, Q4nxError, ModelConfigError) as e:
        return [], [f"Q4NX bundle unreadable: {e}"]
    return [QuantisedBundleRead(**fields)], []


def _budget(ctx: GateRun) -> QuantisationBudgetMeasured:
    q = ctx.state.quantisation
    narrate.report("quantisation budget: the dequantised model vs the bf16 base, teacher-forced on both prompt sets")
    dequantised, original = hf_reference(str(ctx.model_path)), hf_reference(q["base"])
    result = budget(budget_rows(dequantised, original, original.tokenizer))
    return QuantisationBudgetMeasured(**result)


def run(ctx: GateRun) -> GateOutcome:
    cfg = ctx.config
    bundle_events: list = []
    if ctx.state.quantisation:
        bundle_events, problems = _read_bundle(ctx)
        if problems:
            return GateOutcome(events=bundle_events, reasons=problems)
    narrate.report("hashing config.json and the weight files")
    try:
        digested = [ModelDigested(**model_digest(ctx.model_path).event_fields())]
    except ModelConfigError:  # no config.json beside the weights (a bare config file): the weights check says so
        digested = []
    narrate.report("checking weights")
    try:
        report = check_weights(ctx.model_path, cfg)
        fields = report.event_fields()
    except WeightsError as e:  # no checkpoint at all (e.g. a bare config.json): every tensor is missing
        expected = list(expected_tensors(cfg))
        fields = {"ok": False, "n_tensors": 0, "expected": len(expected), "missing": expected, "misshaped": []}
        report = None
        reason = f"weights missing: {e} (first missing tensor: {expected[0]})"
    events: list = [*bundle_events, *digested, WeightsChecked(**fields)]
    if report is None:
        return GateOutcome(events=events, reasons=[reason])
    if not report.ok:
        return GateOutcome(events=events, reasons=[f"weights incomplete: {report.first_problem()}"])
    narrate.report("running the HF transformers bf16 reference on the canonical prompt")
    runner = hf_reference(str(ctx.model_path))
    baseline = runner.baseline(CANONICAL_PROMPT)
    mismatches = runner.config_mismatches(load_raw_config(ctx.model_path))
    fields = dict(baseline)
    fields["config_mismatches"] = list(mismatches)
    fields["passed"] = bool(fields.get("passed", False)) and not mismatches
    baseline_event = ReferenceBaselineRecorded(**fields)
    events.append(baseline_event)
    summary = (
        f"{report.n_tensors} tensors present; HF bf16 top-1 {baseline_event.top1_text!r} "
        f"(p={baseline_event.top1_prob:.3f}, entropy {baseline_event.entropy:.2f})"
    )
    reasons = []
    if ctx.state.quantisation:
        b = _budget(ctx)
        events.append(b)
        reasons = list(b.problems)
        summary += (f"; Q4NX codec/layout check vs bf16 (catches codec and layout bugs; does not grade quality): "
                    f"KL mean {b.kl_mean:.4f}, KL max {b.kl_max:.3f}, top-5 agreement {b.top5_agreement:.3f}, "
                    f"PPL ratio max {b.ppl_ratio_max:.3f} ({'passes' if b.passed else 'FAILS'} the codec/layout limits)")
    return GateOutcome(events=events, summary=summary, reasons=reasons)
