"""The quantisation budget's verdict (npu_kernels.thresholds.quant_budget_problems) and the evaluator's re-derivation
of a recorded budget from its rows (handlers.evaluator.quantised.check_budget)."""

from __future__ import annotations

from handlers.evaluator.quantised import check_budget
from npu_kernels.model.q4nx_budget import budget
from npu_kernels.thresholds import QUANT_BUDGET, quant_budget_problems
from ledger.record import RecordedEvent


def _rows(kl_per_prompt, agreement=1.0, ppl=1.01):
    return [{"set": "base", "prompt_index": i, "steps": len(kls), "kl_mean": sum(kls) / len(kls), "kl_max": max(kls),
             "top5_agreement": agreement, "ppl_ratio": ppl, "kl_per_step": kls} for i, kls in enumerate(kl_per_prompt)]


def _recorded(payload) -> RecordedEvent:
    return RecordedEvent(1, "deployment:x", 1, "e", "QuantisationBudgetMeasured", payload, "2026-12-02T00:00:00", "", "")


def test_a_budget_inside_the_limits_passes_and_one_over_any_limit_fails():
    ok = budget(_rows([[0.1, 0.2], [0.3, 0.4, 0.5]]))
    assert ok["passed"] and ok["kl_mean"] == 0.3 and ok["kl_max"] == 0.5 and ok["n_steps"] == 5
    assert not budget(_rows([[QUANT_BUDGET["kl_max"] * 1.01]]))["passed"]
    assert not budget(_rows([[0.1]], agreement=QUANT_BUDGET["top5_agreement_min"] - 0.01))["passed"]
    assert not budget(_rows([[0.1]], ppl=QUANT_BUDGET["ppl_ratio_max"] + 0.1))["passed"]
    assert quant_budget_problems({"kl_mean": float("nan"), "kl_max": 0, "top5_agreement": 1, "ppl_ratio_max": 1})


def test_the_evaluator_rederives_a_budget_from_its_rows_and_catches_a_doctored_aggregate():
    rec = budget(_rows([[0.1, 0.2], [0.3, 0.4, 0.5]]))
    assert check_budget(_recorded(rec)) == []
    doctored = {**rec, "kl_mean": 0.01}
    assert any("kl_mean" in p for p in check_budget(_recorded(doctored)))
    over = budget(_rows([[QUANT_BUDGET["kl_mean"] * 3] * 4]))
    assert any("recorded as passed" in p for p in check_budget(_recorded({**over, "passed": True})))
