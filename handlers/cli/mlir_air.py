"""`ledger twin DIR`, `ledger scaffold NAME [--stand-in emulated]`, `ledger optimise NAME --what TEXT`."""

from __future__ import annotations

import json
import os
import re

import click

from handlers.bootstrap import App
from handlers.cli.common import open_deployment
from handlers.gates.phase23 import token_gate_events
from handlers.gates.phase456 import measure, performance_event
from handlers.gates.runtime import backend_class, model_backend
from handlers.narrate import TerminalProgress
from handlers.results_workbench import scaffold_json
from handlers.workbench import scaffold_deployment
from kernels.mlir_air.scaffold import ScaffoldError
from kernels.mlir_air.toolchain_floor import TWIN_PEANO
from kernels.mlir_air.twin import write_twin
from ledger.events import OptimizationTried
from registry.text import escaped, ledger_command


@click.command("twin")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--peano", default=TWIN_PEANO, show_default=True,
              help="the Peano (llvm-aie) version the twin's toolchain record says (`ledger doctor` checks its floor)")
@click.pass_obj
def twin_cmd(app: App, directory: str, peano: str) -> None:
    """Write an mlir-air stand-in (harness Makefiles, verify runner, prompts) into DIRECTORY; point
    MLIR_AIR_DIR at it to rehearse the hardware workflow on this machine."""
    if not re.fullmatch(r"\d+(\.\d+)*([.+][0-9A-Za-z.+]*)?", peano):
        raise click.ClickException(f"--peano {escaped(peano)} is not a version (e.g. {TWIN_PEANO})")
    root = write_twin(directory, peano=peano)
    click.echo(f"mlir-air twin written to {root}; export MLIR_AIR_DIR={root}")


@click.command("scaffold")
@click.argument("name")
@click.option("--stand-in", "stand_in", type=click.Choice(["emulated"]), default=None,
              help="the adapter wraps npu-ledger's emulated pipeline (mlir-air's verify runner judges it on a CPU)")
@click.option("--json", "as_json", is_flag=True, help="print {dir, written, kept} as JSON")
@click.pass_obj
def scaffold_cmd(app: App, name: str, stand_in: str | None, as_json: bool) -> None:
    """Write programming_examples/llms/NAME/ inside MLIR_AIR_DIR (Makefile, verify_adapter.py, NAME_inference.py,
    README.md, ARCHITECTURE.md, .gitignore); files the engineer changed are kept."""
    try:
        out = scaffold_deployment(app.ledger, app.workspace, name, os.environ.get("MLIR_AIR_DIR"), stand_in)
    except (ScaffoldError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        click.echo(json.dumps(scaffold_json(out), sort_keys=True))
        return
    click.echo(f"{out['dir']}: wrote {', '.join(out['written']) or 'nothing'}"
               + (f"; kept the engineer's {', '.join(out['kept'])}" if out["kept"] else ""))


@click.command("optimise")
@click.argument("name")
@click.option("--what", required=True, help="what the engineer changed (recorded as the optimisation)")
@click.option("--phase", type=click.Choice(["4", "5"]), default="4", show_default=True)
@click.pass_obj
def optimise_cmd(app: App, name: str, what: str, phase: str) -> None:
    """On hardware: after changing the model directory's code, measure (`make profile`), re-run `make verify`
    and record the OptimizationTried against the phase's last measured figure."""
    p = int(phase)
    unit, ctx = open_deployment(app, name, TerminalProgress())
    if not backend_class(ctx.state).hardware:
        raise click.ClickException("`ledger optimise` records an engineer's change on the mlir-air path; "
                                   "emulated and torch deployments optimise inside `ledger advance`")
    before = [e for e in app.ledger.read_stream(f"deployment:{name}")
              if e.type == "PerformanceMeasured" and e.payload.get("phase") == p]
    if not before:
        raise click.ClickException(f"no phase {p} PerformanceMeasured to compare with: `{ledger_command('advance', name)}` first")
    key = "prefill_s" if p == 4 else "ms_per_token"
    before_s = before[-1].payload[key] / (1 if p == 4 else 1e3)
    backend = model_backend(ctx.state, ctx.config)
    m = measure(backend, p, ctx)
    gates = token_gate_events(ctx, backend, f"phase{p}:{what}", full=False)
    ok = all(g.passed for g in gates)
    outcome = "applied" if ok and m.median_s < before_s else "reverted"
    event = OptimizationTried(phase=p, optimisation=what, outcome=outcome, before_s=before_s, after_s=m.median_s,
                              gate_passed=ok, gate_context=f"phase{p}:{what}",
                              reason=f"engineer's change; {key} {before_s:.6g} -> {m.median_s:.6g} s "
                                     f"({m.source}), token gate {'kept' if ok else 'broken'}",
                              samples={"after_samples_s": m.samples_s, "metric": m.metric, "source": m.source,
                                       "detail": m.detail})
    unit.commit([*gates, performance_event(ctx, p, backend, m, "engineer"), event])
    click.echo(f"{what}: {outcome} ({before_s:.6g} -> {m.median_s:.6g} s, token gate {'kept' if ok else 'broken'})")


commands = [twin_cmd, scaffold_cmd, optimise_cmd]
