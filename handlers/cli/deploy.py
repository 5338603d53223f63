"""CLI commands of the deployment lifecycle written by hand: advance (and the evaluator's hidden fresh-process
command, evaluate). init, audit, resume, lesson, status, history, graph and plan are rows of handlers.verbs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from handlers import deploy, results
from handlers.bootstrap import App
from handlers.cli.common import refresh_if_recorded
from handlers.doctor import advance_refusal
from handlers.gates import GateOptions, GateRun
from handlers.gates.evaluation import evaluate
from handlers.lifeline import die_with_parent
from handlers.narrate import ProgressLines, TerminalProgress, reporting
from handlers.uow import DeploymentError, DeploymentUnit
from ledger.canonical import dumps
from registry.text import escaped, ledger_command, shown


@click.command("advance")
@click.argument("name")
@click.option("--until", type=click.IntRange(0, 7), help="stop after this phase (0-7)")
@click.option("--full", is_flag=True, help="token gate on all 8 prompts instead of 2")
@click.option("--prefill-len", type=click.IntRange(8, 8192), default=None,
              help="prompt length of the Phases 4-5 emulator wall-time runs (information only; default the "
                   "canonical prompt, which Phase 6 times)")
@click.option("--distribute", is_flag=True,
              help="Phase 1 rows as jobs for `ledger worker` hosts (PostgreSQL ledger); judged when all are in")
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=None,
              help="with --distribute: give up watching after this many seconds (the jobs go on)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def advance_cmd(app: App, name: str, until: int | None, full: bool, prefill_len: int | None, distribute: bool,
                wait_s: float | None, as_json: bool) -> None:
    """Run the next phase gate(s) of NAME, as far as the gates go or up to --until."""
    shown_now: list[dict] = []  # each verdict printed as its phase is judged: a Ctrl-C later leaves it on the terminal

    def on_verdict(r: dict) -> None:
        shown_now.append(r)
        print_verdict(name, r)

    # the refusal (no usable mlir-air checkout) is judged on advance's own fold, before any attempt is opened
    request = deploy.AdvanceRequest(name, app.workspace, until=until, options=GateOptions(full=full, prefill_len=prefill_len),
                                    preflight=lambda state: advance_refusal(state, name),
                                    on_verdict=None if as_json else on_verdict)
    try:
        with reporting(None if as_json else TerminalProgress()):
            if distribute:
                # here, not at the top: the workers need psycopg + procrastinate, which the CLI starts without
                from handlers.workers.coordinator import advance_distributed

                report = advance_distributed(app.ledger, request, wait_s=wait_s)
            else:
                report = deploy.advance(app.ledger, request)
    finally:
        refresh_if_recorded(app, name)
    if as_json:
        click.echo(json.dumps(results.advance_json(report)))
    else:
        for r in report.ran:
            if not any(r is p for p in shown_now):  # the distributed path reports its verdicts at the end
                print_verdict(name, r)
        if report.stopped:
            click.echo(report.stopped)
        click.echo(f"{shown(name)}: {report.status}")
    if report.failed:
        sys.exit(1)


def print_verdict(name: str, r: dict) -> None:
    """One phase's verdict as `ledger advance` prints it (a failure on stderr, with the blocker it raised)."""
    if r["passed"]:
        click.echo(escaped(f"phase {r['phase']} PASSED (attempt {r['attempt']}): {r['summary']}"))
        return
    if r.get("inconclusive"):  # no verdict: its device run timed out on every try (neither a pass nor a failure)
        click.echo(escaped(f"phase {r['phase']} INCONCLUSIVE (attempt {r['attempt']}, {r['tries']} tries): "
                           f"{'; '.join(r['reasons'])}"), err=True)
    else:
        click.echo(escaped(f"phase {r['phase']} FAILED (attempt {r['attempt']}): {'; '.join(r['reasons'])}"), err=True)
    if r.get("blocked"):
        click.echo(f"blocker raised: {shown(name)} needs human review; after a fix: "
                   f"{ledger_command('resume', name, '--note', '...')}", err=True)


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


commands = [evaluate_cmd, advance_cmd]  # init, audit, resume, lesson, status, history, graph, plan: handlers.verbs
