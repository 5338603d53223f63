"""The carried-state part of the Phase 2 page (`docs/development_progress/phase2_block.md`) of a hybrid model
(LFM2): each ConvStateChecked - in process, per short-convolution layer the state's cosine and max error against HF's
conv cache after the prefill, and the next decode step's logits cosine; on mlir-air, its `make decode-gate` run's
figures and provenance - with the thresholds it was judged against."""

from __future__ import annotations

from registry.model_fold import DeploymentView
from registry.text import fixed, sci, table


def conv_state_parts(v: DeploymentView) -> list[str]:
    checks = v.of("ConvStateChecked")
    if not checks:
        return []
    parts = ["## Carried convolution state (short-convolution layers)\n"]
    rows, gates = [], []
    for rec in checks:
        c = rec.event
        if c.method == "decode-gate":  # mlir-air's `make decode-gate`: its own table below
            gates.append(rec)
            continue
        th = ", ".join(f"{k} ≥ {c.thresholds[k]}" for k in sorted(c.thresholds))
        for x in c.layers:
            rows.append([rec.seq, x["layer"], c.executor, fixed(x["cosine"], 5), sci(x["max_abs"]),
                         fixed(c.logits_cosine, 5), "yes" if c.top1_agrees else "no", th, "PASS" if c.passed else "FAIL"])
    if rows:
        parts.append("The state the prefill hands the decode (the last taps - 1 rows of each conv layer's "
                     "pre-convolution signal) against the reference's conv cache, then one decode step's logits.\n")
        parts.append(table(["seq", "layer", "executor", "state cosine", "state max_abs", "next-token logits cosine",
                            "top-1 agrees", "thresholds", "verdict"], rows))
    if gates:
        parts.append("mlir-air's decode gate (`make decode-gate`): the tokens as one sequence, each step's logits and "
                     "every short-convolution layer's read-back state (relative L2), the drift one layer adds bounded "
                     "per model layer.\n")
        grows = []
        for rec in gates:
            c = rec.event
            th = ", ".join(f"{k} {c.thresholds[k]}" for k in sorted(c.thresholds))
            worst = max((x["rel_l2"] for x in c.layers), default=float("nan"))
            grows.append([rec.seq, c.n_positions, fixed(c.logits_cosine, 6), fixed(worst, 4), c.state_slots,
                          c.drift_layers, th, c.provenance_class or "-", ("PASS" if c.passed else "FAIL") +
                          (f" ({c.problem.replace('|', '/')})" if c.problem else "")])
        parts.append(table(["seq", "tokens", "min logits cosine", "max state rel_l2", "state rows", "layers over bound",
                            "thresholds", "provenance", "verdict"], grows))
    return parts
