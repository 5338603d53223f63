"""Phase 0 — reference: the model digested, config resolved and equal to config.json, weights complete, HF
bf16 baseline sane."""

from __future__ import annotations

from handlers.gates import GateOutcome, GateRun
from kernels.model.architecture import ModelConfigError, load_raw_config
from kernels.backends.in_process import hf_reference
from kernels.model.digest import model_digest
from kernels.model.prompts import CANONICAL_PROMPT
from kernels.model.weights import WeightsError, check_weights, expected_tensors
from ledger.events import ModelDigested, ReferenceBaselineRecorded, WeightsChecked


def run(ctx: GateRun) -> GateOutcome:
    cfg = ctx.config
    ctx.progress("hashing config.json and the weight files")
    try:
        digested = [ModelDigested(**model_digest(ctx.model_path).event_fields())]
    except ModelConfigError:  # no config.json beside the weights (a bare config file): the weights check says so
        digested = []
    ctx.progress("checking weights")
    try:
        report = check_weights(ctx.model_path, cfg)
        fields = report.event_fields()
    except WeightsError as e:  # no checkpoint at all (e.g. a bare config.json): every tensor is missing
        expected = list(expected_tensors(cfg))
        fields = {"ok": False, "n_tensors": 0, "expected": len(expected), "missing": expected, "misshaped": []}
        report = None
        reason = f"weights missing: {e} (first missing tensor: {expected[0]})"
    events: list = [*digested, WeightsChecked(**fields)]
    if report is None:
        return GateOutcome(events=events, reasons=[reason])
    if not report.ok:
        return GateOutcome(events=events, reasons=[f"weights incomplete: {report.first_problem()}"])
    ctx.progress("running the HF transformers bf16 reference on the canonical prompt")
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
    return GateOutcome(events=events, summary=summary)
