"""`ledger run` (the integrated runner on a prompt) and `ledger optimise` (an engineer's change on hardware,
measured and gated), for the CLI and the MCP server to share. Each opens the deployment's unit of work, measures
through its model backend and appends what it measured with `expected_version`; neither records a phase verdict.

Imports: handlers (gates, on_demand), npu_kernels, ledger.events, registry.text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from handlers.gates.block_and_tokens import token_gate_events
from handlers.gates.performance import measure, performance_event
from handlers.gates.runtime import backend_class, model_backend
from handlers.on_demand import open_run
from npu_kernels.backends.kernel_runners import figure_source
from npu_kernels.provenance import LABELS, figure_provenance
from npu_kernels.model.prompts import token_ids
from npu_kernels.toolchain import current_toolchain
from ledger.events import OptimizationTried, PerformanceMeasured
from registry.text import ledger_command
from ledger.streams import deployment_stream


def generate(ledger, workspace: Path, name: str, prompt: str, n_tokens: int, *, profile: bool = False) -> dict[str, Any]:
    """`ledger run NAME --prompt P --n-tokens N`: generate with the integrated runner, record the run's
    PerformanceMeasured(phase 6) and return `ledger run --json`'s value (plus `n_prompt_tokens`)."""
    unit, ctx = open_run(ledger, workspace, name)
    backend = model_backend(ctx.state, ctx.config)
    tok = backend.tokenizer()
    if getattr(tok, "chat_template", None):
        ids = token_ids(tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                                tokenize=True))
    else:
        ids = list(tok(prompt)["input_ids"])
    r = backend.integrated_run(np.asarray(ids, np.int64), n_tokens)
    unit.commit([PerformanceMeasured(phase=6, executor=ctx.state.executor, pipeline=r.pipeline,
                                     n_prompt_tokens=len(ids), n_tokens=n_tokens, ttft_s=r.ttft_s,
                                     tokens_per_s=r.tokens_per_s, ms_per_token=r.ms_per_token,
                                     prefill_s=r.prefill_s, setup_s=r.setup_s, profile=r.profile if profile else {},
                                     toolchain=current_toolchain(ctx.state.executor))])
    facts = (r.profile or {}).get("provenance")  # a model directory's run: what ran decides, not MLIR_AIR_DIR
    source = LABELS[figure_provenance("mlir-air-profile", facts)] if facts else figure_source(ctx.state.executor)
    return {"text": tok.decode(r.tokens, skip_special_tokens=True), "source": source,
            "tokens": r.tokens, "setup_s": r.setup_s, "ttft_s": r.ttft_s, "tokens_per_s": r.tokens_per_s,
            "ms_per_token": r.ms_per_token, "n_prompt_tokens": len(ids), **({"profile": r.profile} if profile else {})}


def optimise(ledger, workspace: Path, name: str, what: str, phase: int = 4) -> dict[str, Any]:
    """`ledger optimise NAME --what TEXT`: on hardware, measure (`make profile`), re-run the token gate and record
    the OptimizationTried against the phase's last measured figure; returns what was recorded. ValueError (nothing
    recorded) for a deployment that is not on the mlir-air path or has no figure of the phase to compare with."""
    unit, ctx = open_run(ledger, workspace, name)
    if not backend_class(ctx.state).hardware:
        raise ValueError("`ledger optimise` records an engineer's change on the mlir-air path; emulated and torch "
                         "deployments optimise inside `ledger advance`")
    before = [e for e in ledger.read_stream(deployment_stream(name))
              if e.type == "PerformanceMeasured" and e.payload.get("phase") == phase]
    if not before:
        raise ValueError(f"no phase {phase} PerformanceMeasured to compare with: "
                         f"`{ledger_command('advance', name)}` first")
    key = "prefill_s" if phase == 4 else "ms_per_token"
    before_s = before[-1].payload[key] / (1 if phase == 4 else 1e3)
    backend = model_backend(ctx.state, ctx.config)
    m = measure(backend, phase, ctx)
    gates = token_gate_events(ctx, backend, f"phase{phase}:{what}", full=False)
    ok = all(g.passed for g in gates)
    outcome = "applied" if ok and m.median_s < before_s else "reverted"
    event = OptimizationTried(phase=phase, optimisation=what, outcome=outcome, before_s=before_s, after_s=m.median_s,
                              gate_passed=ok, gate_context=f"phase{phase}:{what}",
                              reason=f"engineer's change; {key} {before_s:.6g} -> {m.median_s:.6g} s "
                                     f"({m.source}), token gate {'kept' if ok else 'broken'}",
                              samples={"after_samples_s": m.samples_s, "metric": m.metric, "source": m.source,
                                       "detail": m.detail})
    unit.commit([*gates, performance_event(ctx, phase, backend, m, "engineer"), event])
    return {"name": name, "phase": phase, "optimisation": what, "outcome": outcome, "before_s": before_s,
            "after_s": m.median_s, "gate_passed": ok, "source": m.source}
