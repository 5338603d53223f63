"""A 4-bit deployment's two figures side by side (issue #26): the implementation (the deployment's executor
against the dequantised reference: its Phase 3 token gate's teacher-forced walk) and the quantisation (the
dequantised model against the original bf16 model: Phase 0's QuantisationBudgetMeasured). Pure: events in,
markdown out. Empty for a bf16 deployment."""

from __future__ import annotations

from typing import Any

import numpy as np

from registry.model_fold import DeploymentView
from registry.text import fixed, table


def implementation_figures(v: DeploymentView) -> dict[str, Any] | None:
    """KL mean / max, top-5 agreement and worst perplexity ratio over the latest Phase 3 token gates."""
    gates = [e for e in v.of("TokenGateChecked") if e.payload.get("context") == "phase3"]
    if not gates:
        return None
    last = {}
    for g in gates:  # the latest record of each prompt
        last[g.payload["prompt_index"]] = g.payload
    kls = [k for p in last.values() for k in p.get("tf_kl_per_step") or []]
    both = [o[0] in r and r[0] in o for p in last.values()
            for o, r in zip(p.get("tf_topk_ours") or [], p.get("tf_topk_ref") or []) if o and r]
    ratios = [p["tf_ppl_ratio"] for p in last.values() if p.get("tf_ppl_ratio") is not None]
    return {"kl_mean": float(np.mean(kls)) if kls else None, "kl_max": float(np.max(kls)) if kls else None,
            "top5_agreement": float(np.mean(both)) if both else None, "ppl_ratio_max": max(ratios, default=None),
            "n_prompts": len(last), "passed": all(p.get("passed") for p in last.values()),
            "executor": next(iter(last.values())).get("executor", "")}


def render_split(v: DeploymentView) -> str:
    """The two tables' section, or '' when the deployment is not 4-bit."""
    budget = v.latest("QuantisationBudgetMeasured")
    if budget is None:
        return ""
    q = budget.payload
    impl = implementation_figures(v)
    read = v.latest("QuantisedBundleRead")
    layout = read.payload.get("layout") if read else "?"
    padded = ", ".join(read.payload.get("padded") or []) if read else ""
    device = bool(read) and read.payload.get("style") == "device"
    weights = ("the dequantised weights (prefill) and the decode's re-quantised ones (on-device style, "
               "decode.requant)" if device else "the dequantised weights")
    line = (f"implementation: KL mean {fixed(impl['kl_mean'], 4) if impl else 'not measured yet'} vs dequantised; "
            f"quantisation: KL mean {fixed(q.get('kl_mean'), 4)} vs bf16")
    rows = []
    if impl:
        rows.append(["implementation", f"{impl['executor']} vs HF transformers on {weights}",
                     impl["n_prompts"], fixed(impl["kl_mean"], 4), fixed(impl["kl_max"], 3),
                     fixed(impl["top5_agreement"], 3), fixed(impl["ppl_ratio_max"], 3),
                     "CPU emulator (Phase 3 token gate)" if impl["executor"] == "emulated" else impl["executor"],
                     "PASS" if impl["passed"] else "FAIL"])
    rows.append(["Q4NX codec/layout check", f"{'dequantised + re-quantised' if device else 'dequantised'} vs original bf16 "
                                 f"(HF transformers both; Q4NX {layout})",
                 q.get("n_prompts"), fixed(q.get("kl_mean"), 4), fixed(q.get("kl_max"), 3),
                 fixed(q.get("top5_agreement"), 3), fixed(q.get("ppl_ratio_max"), 3),
                 f"CPU, HF transformers (Phase 0, seq {budget.seq})", "PASS" if q.get("passed") else "FAIL"])
    t = q.get("thresholds") or {}
    out = ["## Implementation and quantisation, apart\n", f"**{line}**\n",
           table(["figure", "what against what", "prompts", "KL mean", "KL max", "top-5 agreement", "PPL ratio max",
                  "source", "verdict"], rows),
           f"The implementation is judged by the token gate's thresholds against the dequantised reference. The "
           f"Q4NX codec/layout check (QUANT_BUDGET: KL mean <= {t.get('kl_mean')}, KL max <= {t.get('kl_max')}, top-5 "
           f"agreement >= {t.get('top5_agreement_min')}, PPL ratio <= {t.get('ppl_ratio_max')}) catches a broken codec "
           f"or a wrong weight layout: its limits were set between faithful and broken 4-bit models with random "
           f"weights (npu_kernels/thresholds.py), so passing it **does not grade the quantised model's quality**; judge "
           f"that on the real model's task metrics. Zero-padded to whole 32x256 blocks: {padded or 'none'}.\n"]
    return "\n".join(out)
