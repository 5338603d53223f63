"""The carried-state part of the Phase 2 page (`docs/development_progress/phase2_block.md`) of a hybrid model
(LFM2): each ConvStateChecked - per short-convolution layer the state's cosine and max error against HF's conv cache
after the prefill, and the next decode step's logits cosine - with the thresholds it was judged against."""

from __future__ import annotations

from registry.model_fold import DeploymentView
from registry.text import fixed, sci, table


def conv_state_parts(v: DeploymentView) -> list[str]:
    checks = v.of("ConvStateChecked")
    if not checks:
        return []
    parts = ["## Carried convolution state (short-convolution layers)\n",
             "The state the prefill hands the decode (the last taps - 1 rows of each conv layer's pre-convolution "
             "signal) against the reference's conv cache, then one decode step's logits.\n"]
    rows = []
    for rec in checks:
        c = rec.event
        th = ", ".join(f"{k} ≥ {c.thresholds[k]}" for k in sorted(c.thresholds))
        for x in c.layers:
            rows.append([rec.seq, x["layer"], c.executor, fixed(x["cosine"], 5), sci(x["max_abs"]),
                         fixed(c.logits_cosine, 5), "yes" if c.top1_agrees else "no", th, "PASS" if c.passed else "FAIL"])
    parts.append(table(["seq", "layer", "executor", "state cosine", "state max_abs", "next-token logits cosine",
                        "top-1 agrees", "thresholds", "verdict"], rows))
    return parts
