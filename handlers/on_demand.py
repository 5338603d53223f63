"""On-demand measurements outside the phase gates: the token gate (`verify-model`, gate drills) and the
per-layer diagnosis (`diagnose`), for the CLI and the MCP server to share.

Each opens the deployment's unit of work, measures through its model backend (`handlers.gates.runtime`) and
appends the measurement with `expected_version`. Neither records a phase verdict: a token gate run here has the
context `verify-model` (or `drill:FAULT`, never evidence) and a phase gate counts only its own attempt's
evidence. Imports: handlers.gates, handlers.uow, npu_kernels.model.options, ledger.events.
"""

from __future__ import annotations

from pathlib import Path

from handlers.gates import GateRun
from handlers.gates.block_and_tokens import diagnosis_events, token_gate_events
from handlers.gates.runtime import model_backend
from handlers.uow import DeploymentUnit
from npu_kernels.model.options import FAULTS
from ledger.events import LayerDiagnosed, TokenGateChecked



class UnknownFault(ValueError):
    """Raised when a gate drill names a test fault that `npu_kernels.model.options.FAULTS` does not have."""


def open_run(ledger, workspace: Path, name: str) -> tuple[DeploymentUnit, GateRun]:
    """NAME's unit of work, folded now, and a `GateRun` on it: what every measurement outside the phase gates
    starts from (this module's, and handlers.runs')."""
    unit = DeploymentUnit(ledger, name)
    return unit, GateRun(state=unit.state, workspace=workspace, ledger=ledger)


def verify_model(ledger, workspace: Path, name: str, *, full: bool = False, inject: str | None = None) -> list[TokenGateChecked]:
    """The token gate on NAME's pipeline (2 prompts, 8 with `full`), one recorded TokenGateChecked per prompt.

    With `inject` it is a drill: the same gate with one test fault switched on, recorded as context
    `drill:FAULT`. Raises `UnknownFault` before anything is opened."""
    if inject is not None and inject not in FAULTS:
        raise UnknownFault(f"unknown fault {inject!r}; known: {', '.join(sorted(FAULTS))}")
    unit, ctx = open_run(ledger, workspace, name)
    backend = model_backend(ctx.state, ctx.config, {"faults": [inject]} if inject else None)
    gates = token_gate_events(ctx, backend, f"drill:{inject}" if inject else "verify-model", full=full)
    unit.commit(gates)
    return gates


def diagnose(ledger, workspace: Path, name: str) -> list[LayerDiagnosed]:
    """Per-layer cosines of NAME's pipeline vs HF bf16 on the canonical prompt, recorded (never a verdict)."""
    unit, ctx = open_run(ledger, workspace, name)
    layers = diagnosis_events(ctx, model_backend(ctx.state, ctx.config))
    unit.commit(layers)
    return layers
