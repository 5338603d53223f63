"""`ledger scaffold NAME [--stand-in emulated]`, `ledger optimise NAME --what TEXT` (`ledger twin DIR`: handlers.verbs)."""

from __future__ import annotations

import json

import click

from handlers.bootstrap import App
from handlers.narrate import TerminalProgress, reporting
from handlers.results_workbench import optimise_json, scaffold_json
from handlers.runs import optimise
from handlers.workbench import scaffold_deployment
from npu_kernels.mlir_air.scaffold import ScaffoldError
from npu_kernels.settings import env_get


@click.command("scaffold")
@click.argument("name")
@click.option("--stand-in", "stand_in", type=click.Choice(["emulated"]), default=None,
              help="the adapter wraps npu-ledger's emulated pipeline (mlir-air's verify runner judges it on a CPU); "
                   "required on a twin, where a hardware directory cannot run")
@click.option("--json", "as_json", is_flag=True, help="print {dir, written, kept} as JSON")
@click.pass_obj
def scaffold_cmd(app: App, name: str, stand_in: str | None, as_json: bool) -> None:
    """Write programming_examples/llms/NAME/ inside MLIR_AIR_DIR (Makefile, verify_adapter.py, NAME_inference.py,
    README.md, ARCHITECTURE.md, .gitignore); files the engineer changed are kept."""
    try:
        out = scaffold_deployment(app.ledger, app.workspace, name, env_get("MLIR_AIR_DIR"), stand_in)
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
@click.option("--json", "as_json", is_flag=True, help="print what was recorded as JSON")
@click.pass_obj
def optimise_cmd(app: App, name: str, what: str, phase: str, as_json: bool) -> None:
    """On hardware: after changing the model directory's code, measure (`make profile`), re-run `make verify`
    and record the OptimizationTried against the phase's last measured figure."""
    try:
        with reporting(TerminalProgress()):
            out = optimise(app.ledger, app.workspace, name, what, int(phase))
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        click.echo(json.dumps(optimise_json(out), sort_keys=True))
        return
    ok = "kept" if out["gate_passed"] else "broken"
    click.echo(f"{what}: {out['outcome']} ({out['before_s']:.6g} -> {out['after_s']:.6g} s, token gate {ok})")


commands = [scaffold_cmd, optimise_cmd]  # twin: a row of handlers.verbs
