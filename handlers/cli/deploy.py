"""CLI commands of the deployment lifecycle written by hand: init, advance, audit (and the evaluator's hidden
fresh-process command, evaluate). resume, lesson, status, history and graph are rows of handlers.verbs."""

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
from handlers.queries import deployment_config
from handlers.uow import DeploymentError, DeploymentUnit
from handlers.workbench import next_steps
from npu_kernels.backends.kernel_runners import DEPLOYMENT_EXECUTORS
from npu_kernels.model.host_memory import available_memory_bytes, machine_memory_bytes, memory_line, memory_need
from npu_kernels.model.speculative import DEFAULT_BLOCK
from ledger.canonical import dumps
from registry.model_docs import model_dir_name
from registry.text import escaped, ledger_command, shown


@click.command("init")
@click.argument("model", type=click.Path())
@click.option("--name", help="deployment name (default: the folder name, lower-cased, non-alphanumerics to _)")
@click.option("--target", type=click.Choice(["npu2", "npu1"]), default="npu2", show_default=True)
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "q4nx"]), default=None,
              help="bf16 (default), q4nx (MODEL is a Q4NX bundle; the default with --base); fp16 is refused")
@click.option("--base", type=click.Path(exists=True, file_okay=False),
              help="with a Q4NX bundle as MODEL: the bf16 HF folder giving its config and tokenizer")
@click.option("--q4nx-style", type=click.Choice(["host", "device"]), default="host", show_default=True,
              help="with --base: host (dequantised at load, the bf16 pipeline) or device (4-bit decode GEMVs on the "
                   "NPU, fused one-dispatch decode)")
@click.option("--executor", type=click.Choice(list(DEPLOYMENT_EXECUTORS)), default="emulated", show_default=True)
@click.option("--drafter", type=click.Path(), default=None,
              help="a smaller HF folder with MODEL's tokenizer: Phase 5 accepts speculative decoding with it only if "
                   "its greedy tokens equal those without it on every gate prompt")
@click.option("--draft-block", type=int, default=DEFAULT_BLOCK, show_default=True,
              help="with --drafter: tokens drafted per round (a verify pass checks one more)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def init_cmd(app: App, model: str, name: str | None, target: str, dtype: str | None, base: str | None,
             q4nx_style: str, executor: str, drafter: str | None, draft_block: int, as_json: bool) -> None:
    """Start a deployment of MODEL (a local HF folder or a config.json; a Q4NX bundle with --base)."""
    dtype = dtype or ("q4nx" if base else "bf16")
    try:
        created = deploy.init(app.ledger, model, name=name, target=target, dtype=dtype, executor=executor,
                              workspace=app.workspace, base=base, q4nx_style=q4nx_style, drafter=drafter,
                              draft_block=draft_block)
    except deploy.OutOfScope as e:
        click.echo(f"rejected: {e}", err=True)
        sys.exit(3)
    notes = list(deployment_config(app.ledger, created).arch.notes)  # e.g. a multimodal folder's text decoder
    memory = memory_line(memory_need(deployment_config(app.ledger, created), executor), machine_memory_bytes(),
                         available_memory_bytes())
    click.echo(json.dumps({**results.init_json(created, executor, target, dtype), "notes": notes}) if as_json else
               "\n".join([memory, f"deployment {shown(created)} recorded ({executor}/{target}, {dtype}); next: "
                           f"{next_steps(created, executor)}", *(f"note: {escaped(n)}" for n in notes)]))
    refresh_if_recorded(app, created)  # the registry and the new deployment's docs


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


@click.command("audit")
@click.argument("name")
@click.option("--against", help="a checkpoint SIZE:HASH kept elsewhere (detects truncation/rewrite)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def audit_cmd(app: App, name: str, against: str | None, as_json: bool) -> None:
    """Phase 7: the independent evaluator (fresh process; reads only the ledger, the workspace's checkpoints
    and the model folder). On a read-only ledger it prints its verdict and records nothing."""
    try:
        with reporting(None if as_json else TerminalProgress()):
            report = deploy.audit(app.ledger, name, workspace=app.workspace, checkpoint=against)
    finally:
        if not app.opened_read_only:
            refresh_if_recorded(app, name)
    if as_json:
        click.echo(json.dumps(results.audit_json(name, report), indent=1, default=str))
    else:
        for f in report.findings:
            where = f"seq {f['seq']}" if f.get("seq") is not None else "—"
            click.echo(f"  [{f['severity']}] {where}: {f['check']}: {f['message']}")
        click.echo(f"{shown(name)}: evaluation {report.verdict} ({len(report.findings)} findings); status {report.status}")
        if report.recorded:
            click.echo(f"report: {app.workspace / 'llms' / model_dir_name(name) / 'docs' / 'evaluation_report.md'}")
        else:
            click.echo(f"{report.not_recorded_because}: nothing was recorded")
    if report.verdict == "FAIL":
        sys.exit(1)


commands = [audit_cmd, evaluate_cmd, init_cmd, advance_cmd]  # resume, lesson, status, history, graph, plan: handlers.verbs
