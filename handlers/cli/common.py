"""What the click command modules share: refreshing the projections after a command recorded something, and
opening a deployment (its unit of work and the `GateRun` an on-demand measurement takes)."""

from __future__ import annotations

import os

import click

from handlers.bootstrap import App
from handlers.gates import GateRun
from handlers.narrate import TerminalProgress
from handlers.registry_ops import build_projections, link_message
from handlers.uow import DeploymentUnit
from kernels.mlir_air.checkout import is_twin
from ledger import Checkpoint


def refresh_projections(app: App) -> None:
    """Rebuild the registry and model docs after a change, and remember the ledger's new checkpoint.

    The command's events are committed already: a refresh that fails (a full disk, a path in the way) is a
    warning, not a failure -- the projections are rebuilt in full by the next command (or `ledger registry
    build`), and no temporary file is left behind."""
    try:
        events = app.ledger.read_all()
        result = build_projections(events, app.workspace)
        for rel in result.links:  # a projected folder that is a symbolic link is neither written nor followed
            click.echo(f"warning: recorded, but {link_message(app.workspace, rel)}", err=True)
        if events:
            app.remember_checkpoint(Checkpoint(events[-1].seq, events[-1].hash))
    except Exception as e:  # noqa: BLE001 - the commit stands; say what failed and move on
        line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        click.echo(f"warning: recorded, but refreshing the projections failed ({line}); they are rebuilt on the "
                   "next command or by `ledger registry build`", err=True)


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
