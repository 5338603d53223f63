"""What the click command modules share: refreshing the projections after a command recorded something, and
opening a deployment (its unit of work and the `GateRun` an on-demand measurement takes)."""

from __future__ import annotations

import os

import click

from handlers.bootstrap import App
from handlers.gates import GateRun
from handlers.narrate import TerminalProgress
from handlers.uow import DeploymentUnit
from kernels.mlir_air.checkout import is_twin
from ledger import Checkpoint


def refresh_projections(app: App) -> None:
    """Rebuild the registry and model docs after a change, and remember the ledger's new checkpoint
    (`App.refresh_projections`); its warnings go to stderr."""
    for line in app.refresh_projections():
        click.echo(line, err=True)


def open_deployment(app: App, name: str, progress=None) -> tuple[DeploymentUnit, GateRun]:
    """NAME's unit of work (folded now) and a `GateRun` on it with the ledger and workspace of `app`;
    `progress` defaults to the terminal's."""
    unit = DeploymentUnit(app.ledger, name)
    return unit, GateRun(state=unit.state, workspace=app.workspace, ledger=app.ledger,
                         progress=progress or TerminalProgress())


def figure_source(executor: str, mlir_air_dir: str | None = None) -> str:
    """Where a timed figure of `executor` comes from, as every output labels it: `measured NPU2` (mlir-air on a
    real checkout), or `CPU emulator` (the emulated / torch / fp32 executors, and mlir-air's stand-in)."""
    if executor == "mlir-air" and not is_twin(mlir_air_dir or os.environ.get("MLIR_AIR_DIR")):
        return "measured NPU2"
    if executor == "mlir-air":
        return "CPU emulator (the mlir-air stand-in, not NPU2)"
    return f"CPU emulator ({executor}, not NPU2)"
