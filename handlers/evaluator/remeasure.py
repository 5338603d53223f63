"""Phase 7, measuring part: the evaluator re-measures in its own fresh process, on the deployment's executor.

* `kernel_sample`: Phase 1 rows chosen by a seed taken from the ledger's head hash at audit time (so the
  sample cannot be known when the evidence was written), re-run through the gate's own code path
  (`handlers.gates.kernel_rows.verify_once`) on the deployment's kernel runner. A row must give the same verdict and
  the figures the runner says it reproduces (`KernelRunner.remeasure_problems`): in process the mismatch count
  exactly and mean_rel_L1 within `KERNEL_REMEASURE_RTOL` (the BLAS thread count is pinned to the recorded one by
  `evaluation.evaluate_in_fresh_process`); on mlir-air within the kernel's tolerance band.
* `block_gate`: the Phase 2 layer-0 block gate re-run on the pipeline Phase 2 ran (the requested options,
  before any optimisation) and compared with the recorded BlockValidated within the backend's
  `block_remeasure_atol` (a backend without one, mlir-air's, is not re-run).

Each returns (findings, rows for the report). A mismatch is an error finding naming the recorded seq.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

from handlers.evaluator.audit import Finding
from handlers.planning import deployment_weights
from handlers.gates.kernel_rows import kernel_row, verify_once
from handlers.gates.runtime import backend_class, model_backend
from handlers import narrate
from npu_kernels.backends.kernel_runners import make_runner
from npu_kernels.backends.runner_base import relative_difference
from npu_kernels.model.plan_record import replan
from npu_kernels.thresholds import KERNEL_REMEASURE_SAMPLE
from statemachine.gate import kernel_key
from statemachine.phases import Phase


def sample_seed(head_hash: str) -> int:
    """The sampling seed: the first 64 bits of the ledger's head hash at audit time."""
    return int(head_hash[:16], 16)


def phase1_rows(state) -> list:
    """The latest KernelVerified per (kernel, shape, contract) of the passed Phase 1 attempt."""
    passed = state.passed.get(Phase.KERNELS)
    latest: dict[tuple, Any] = {}
    for ev in (passed.evidence if passed else ()):
        if type(ev.event).__name__ == "KernelVerified":
            latest[(*kernel_key(ev.event.kernel, ev.event.shape), ev.event.contract)] = ev
    return list(latest.values())


def kernel_sample(state, cfg, head_hash: str,
                  sources: dict | None = None) -> tuple[list[Finding], list[dict]]:
    rows = phase1_rows(state)
    planned = {r.key: r for r in replan(cfg, state.target, sources, deployment_weights(state))}  # as Phase 1 planned
    candidates = [ev for ev in rows if kernel_key(ev.event.kernel, ev.event.shape) in planned]
    seed = sample_seed(head_hash)
    chosen = sorted(random.Random(seed).sample(candidates, min(KERNEL_REMEASURE_SAMPLE, len(candidates))),
                    key=lambda ev: ev.seq)
    findings, table = [], []
    runner = make_runner(state.executor, state.target)
    for i, ev in enumerate(chosen, start=1):
        old = ev.event
        row = kernel_row(state, replace(planned[kernel_key(old.kernel, old.shape)], contract=old.contract))  # as measured
        shape_text = row.shape_text
        narrate.report(f"[{i}/{len(chosen)}] re-measuring Phase 1 row seq {ev.seq}: {old.kernel} {shape_text}")
        new, _ = verify_once(runner, row, "", "", int(old.provenance.get("attempt", 1)))
        rel = relative_difference(old.mean_rel_L1, new.mean_rel_L1)
        problems = []
        if new.verdict != old.verdict:
            problems.append(f"verdict {old.verdict} recorded, {new.verdict} re-measured")
        problems += runner.remeasure_problems(old, new)
        if problems:
            findings.append(Finding("error", ev.seq, "remeasure-kernel",
                                    f"KernelVerified seq {ev.seq} {old.kernel} {shape_text} is not reproduced on "
                                    f"{state.executor}: " + "; ".join(problems)))
        table.append({"seq": ev.seq, "kernel": old.kernel, "shape": shape_text, "contract": old.contract,
                      "verdict_recorded": old.verdict, "verdict_remeasured": new.verdict,
                      "mean_rel_L1_recorded": old.mean_rel_L1, "mean_rel_L1_remeasured": new.mean_rel_L1,
                      "relative_difference": rel, "blas_threads_recorded": old.provenance.get("blas_threads"),
                      "blas_threads_remeasured": new.provenance.get("blas_threads"), "agrees": not problems})
    return findings, [{"seed": seed, "head_hash": head_hash, "of_rows": len(candidates)}, *table]


def block_gate(state, cfg, events) -> tuple[list[Finding], dict | None]:
    """Re-run the layer-0 block gate on the pipeline as Phase 2 ran it; compare with its BlockValidated within the
    backend's `block_remeasure_atol` (None: not re-run, no finding and no row)."""
    band = backend_class(state).block_remeasure_atol
    if band is None:
        return [], None
    passed = state.passed.get(Phase.BLOCK)
    recorded = [e for e in (passed.evidence if passed else ()) if type(e.event).__name__ == "BlockValidated"]
    if not recorded:
        return [], None
    old_ev = recorded[-1]
    old = old_ev.event
    requested = next(e.payload.get("pipeline", {}) for e in events if e.type == "DeploymentRequested")
    at_phase2 = replace(state, pipeline=dict(requested))
    backend = model_backend(at_phase2, cfg)
    narrate.report(f"re-measuring the Phase 2 block gate (BlockValidated seq {old_ev.seq}) on {backend.name}")
    new = backend.block_gate()  # on the canonical prompt, as Phase 2 ran it
    problems = []
    if new.passed != old.passed:
        problems.append(f"recorded {'PASS' if old.passed else 'FAIL'}, re-measured {'PASS' if new.passed else 'FAIL'}")
    for name in ("cosine", "per_position_min"):
        a, b = getattr(old, name), getattr(new, name)
        if not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > band:
            problems.append(f"{name} {a:.6f} recorded, {b:.6f} re-measured (> {band:g} apart)")
    if old.n_positions != new.n_positions:
        problems.append(f"{old.n_positions} positions recorded, the canonical prompt has {new.n_positions}")
    findings = [Finding("error", old_ev.seq, "remeasure-block",
                        f"BlockValidated seq {old_ev.seq} is not reproduced: " + "; ".join(problems))] if problems else []
    row = {"seq": old_ev.seq, "passed_recorded": old.passed, "passed_remeasured": bool(new.passed),
           "cosine_recorded": old.cosine, "cosine_remeasured": new.cosine,
           "per_position_min_recorded": old.per_position_min, "per_position_min_remeasured": new.per_position_min,
           "agrees": not problems}
    return findings, row
