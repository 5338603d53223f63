"""The quantisation budget of a 4-bit deployment: the dequantised model against the original bf16 model, both
run by HF transformers from local folders (Phase 0; issue #26).

Every prompt of the instruct set (when the tokenizer has a chat template) and of the base set is walked
teacher-forced exactly as the token gate walks (`npu_kernels.model.compare.token_gate`: both sides fed the bf16
model's greedy tokens for TOKEN_GATE_STEPS steps): per-step KL(bf16 || dequantised), top-5 inclusion of both
argmaxes, perplexity ratio PPL(dequantised) / PPL(bf16). `budget` aggregates them (KL mean over every step of
every prompt, KL max, top-5 agreement = fraction of steps where both argmaxes sit in the other's top-5, the
worst prompt's perplexity ratio) and judges them against `npu_kernels.thresholds.QUANT_BUDGET`. The budget says how
good the 4-bit model is; it never decides whether the NPU runs it faithfully (that is Phases 1-7, against the
dequantised model).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npu_kernels.model.compare import token_gate
from npu_kernels.model.prompts import prompt_set
from npu_kernels.thresholds import QUANT_BUDGET, TOKEN_GATE_STEPS, TOKEN_GATE_TOP_K, quant_budget_problems


def budget_rows(dequantised, original, tokenizer) -> list[dict[str, Any]]:
    """One row per prompt: set, index, KL mean/max, inclusion, perplexity ratio (dequantised vs bf16)."""
    kinds = (["instruct"] if getattr(tokenizer, "chat_template", None) else []) + ["base"]
    rows = []
    for kind in kinds:
        for p in prompt_set(tokenizer, kind):
            g = token_gate(dequantised, original, p.tokens, n_tokens=TOKEN_GATE_STEPS, k=TOKEN_GATE_TOP_K,
                           prompt_index=p.index, prompt=p.text, context="quant_budget")
            s = g.tf_stats()
            rows.append({"set": kind, "prompt_index": p.index, "steps": g.tf_steps, "kl_mean": s["kl_mean"],
                         "kl_max": s["kl_max"], "top5_agreement": s["inclusion"], "ppl_ratio": g.tf_ppl_ratio,
                         "kl_per_step": list(g.tf_kl_per_step)})
    return rows


def budget(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The aggregate the gate judges, with the thresholds and the verdict (fields of QuantisationBudgetMeasured)."""
    kls = [k for r in rows for k in r["kl_per_step"]]
    steps = sum(r["steps"] for r in rows)
    agree = sum(r["top5_agreement"] * r["steps"] for r in rows if r["top5_agreement"] is not None)
    ratios = [r["ppl_ratio"] for r in rows if r["ppl_ratio"] is not None]
    fig = {"kl_mean": float(np.mean(kls)) if kls else None, "kl_max": float(np.max(kls)) if kls else None,
           "top5_agreement": agree / steps if steps else None, "ppl_ratio_max": max(ratios) if ratios else None,
           "n_prompts": len(rows), "n_steps": steps}
    problems = quant_budget_problems(fig)
    return {**fig, "rows": [{k: v for k, v in r.items() if k != "kl_per_step"} for r in rows],
            "thresholds": dict(QUANT_BUDGET), "passed": not problems, "problems": problems}
