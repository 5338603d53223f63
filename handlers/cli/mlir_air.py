"""`ledger optimise NAME --what TEXT` (`ledger twin DIR`, `ledger scaffold NAME`: handlers.verbs)."""

from __future__ import annotations

import json

import click

from handlers.bootstrap import App
from handlers.narrate import TerminalProgress, reporting
from handlers.results_workbench import optimise_json
from handlers.runs import optimise


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


commands = [optimise_cmd]  # twin, scaffold: rows of handlers.verbs
