"""The evaluator's hidden fresh-process command, `evaluate` (started by audit / Phase 7 only; no MCP tool). The
lifecycle's verbs (init, advance, audit, resume, lesson, status, history, graph, plan) are rows of handlers.verbs."""

from __future__ import annotations

from pathlib import Path

import click

from handlers.bootstrap import App
from handlers.gates import GateRun
from handlers.gates.evaluation import evaluate
from handlers.lifeline import die_with_parent
from handlers.narrate import ProgressLines, reporting
from handlers.uow import DeploymentError, DeploymentUnit
from ledger.canonical import dumps


@click.command("evaluate", hidden=True)
@click.argument("name")
@click.option("--against", help="a checkpoint SIZE:HASH kept elsewhere")
@click.pass_obj
def evaluate_cmd(app: App, name: str, against: str | None) -> None:
    """(internal) The independent evaluator's fresh process: prints its evidence as JSON, records nothing.

    It dies with the process that started it (handlers.lifeline): a killed `advance` leaves no evaluator."""
    die_with_parent()
    app.read_only = True
    state = DeploymentUnit(app.ledger, name).state
    ctx = GateRun(state=state, workspace=app.workspace, ledger=app.ledger)
    with reporting(ProgressLines()):  # to the parent
        rerun, evaluation = evaluate(ctx, against, app.checkpoint_record)
    click.echo(dumps({"rerun": [g.to_payload() for g in rerun], "evaluation": evaluation.to_payload()}))


commands = [evaluate_cmd]  # every other lifecycle verb is a row of handlers.verbs
