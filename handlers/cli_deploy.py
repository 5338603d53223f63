"""CLI commands of the deployment lifecycle: init, advance, resume, lesson, status, history, graph, plan."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from handlers import deploy
from handlers.bootstrap import App
from handlers.narrate import TerminalProgress, describe
from ledger import Checkpoint


def _refresh_projections(app: App) -> None:
    """Rebuild the registry and model docs after a change, and remember the ledger's new checkpoint.

    The command's events are committed already: a refresh that fails (a full disk, a path in the way) is a
    warning, not a failure -- the projections are rebuilt in full by the next command (or `ledger registry
    build`), and no temporary file is left behind."""
    from handlers.registry_ops import build_projections

    try:
        events = app.ledger.read_all()
        build_projections(events, app.workspace)
        if events:
            app.remember_checkpoint(Checkpoint(events[-1].seq, events[-1].hash))
    except Exception as e:  # noqa: BLE001 - the commit stands; say what failed and move on
        line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        click.echo(f"warning: recorded, but refreshing the projections failed ({line}); they are rebuilt on the "
                   "next command or by `ledger registry build`", err=True)


@click.command("init")
@click.argument("model", type=click.Path())
@click.option("--name", help="deployment name (default: the folder name, lower-cased, non-alphanumerics to _)")
@click.option("--target", type=click.Choice(["npu2", "npu1"]), default="npu2", show_default=True)
@click.option("--dtype", type=click.Choice(["bf16", "fp16"]), default="bf16", show_default=True)
@click.option("--executor", type=click.Choice(["emulated", "torch", "mlir-air"]), default="emulated", show_default=True)
@click.pass_obj
def init_cmd(app: App, model: str, name: str | None, target: str, dtype: str, executor: str) -> None:
    """Start a deployment of MODEL (a local HF folder or a config.json)."""
    try:
        created = deploy.init(app.ledger, model, name=name, target=target, dtype=dtype, executor=executor)
    except deploy.OutOfScope as e:
        click.echo(f"rejected: {e}", err=True)
        sys.exit(3)
    click.echo(f"deployment {created} recorded ({executor}/{target}, {dtype}); next: ledger advance {created}")
    _refresh_projections(app)


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
    progress = (lambda m: None) if as_json else TerminalProgress()
    options = {"full": full, "prefill_len": prefill_len}
    try:
        if distribute:
            from handlers.workers.coordinator import advance_distributed

            report = advance_distributed(app.ledger, name, until=until, workspace=app.workspace, progress=progress,
                                         options=options, wait_s=wait_s)
        else:
            report = deploy.advance(app.ledger, name, until=until, workspace=app.workspace, progress=progress,
                                    options=options)
    finally:
        _refresh_projections(app)
    if as_json:
        click.echo(json.dumps({"name": report.name, "ran": report.ran, "stopped": report.stopped, "status": report.status}))
    else:
        for r in report.ran:
            if r["passed"]:
                click.echo(f"phase {r['phase']} PASSED (attempt {r['attempt']}): {r['summary']}")
            else:
                click.echo(f"phase {r['phase']} FAILED (attempt {r['attempt']}): {'; '.join(r['reasons'])}", err=True)
                if r.get("blocked"):
                    click.echo(f"blocker raised: {name} needs human review; after a fix: ledger resume {name} --note ...", err=True)
        if report.stopped:
            click.echo(report.stopped)
        click.echo(f"{name}: {report.status}")
    if report.failed:
        sys.exit(1)


@click.command("resume")
@click.argument("name")
@click.option("--note", required=True, help="what the human fixed")
@click.pass_obj
def resume_cmd(app: App, name: str, note: str) -> None:
    """Record a human's fix after a blocker; allows one more attempt."""
    deploy.resume(app.ledger, name, note)
    click.echo(f"{name} resumed; next: ledger advance {name}")
    _refresh_projections(app)


@click.command("lesson")
@click.argument("name")
@click.argument("text")
@click.option("--phase", type=click.IntRange(0, 7))
@click.pass_obj
def lesson_cmd(app: App, name: str, text: str, phase: int | None) -> None:
    """Record a lesson learned for NAME."""
    seq = deploy.lesson(app.ledger, name, text, phase)
    click.echo(f"lesson recorded at seq {seq}")
    _refresh_projections(app)


@click.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def status_cmd(app: App, name: str | None, as_json: bool) -> None:
    """Every deployment (or NAME) with its phase, last verdict, blockers and triage."""
    rows = deploy.status(app.ledger, name)
    broken = [r for r in rows if r["status"] == "unreplayable"]
    if as_json:
        click.echo(json.dumps(rows if name is None else rows[0], indent=1))
        if broken:
            sys.exit(1)
        return
    if not rows:
        click.echo("no deployments yet (ledger init MODEL)")
    for r in rows:
        if r["status"] == "unreplayable":
            click.echo(f"{r['name']:<28} unreplayable: {r['error']}", err=True)
            continue
        passed = ",".join(map(str, r["phases_passed"])) or "-"
        click.echo(f"{r['name']:<28} {r['status']:<20} passed [{passed}]  {r['executor']}/{r['target']}  {r['last_verdict']}")
        for b in r["blockers"]:
            click.echo(f"    blocker (seq {b['seq']}, phase {b['phase']}): {b['reason']}")
        if r["triage"]:
            click.echo(f"    triage of seq {r['triage']['subject_seq']}: {r['triage']['summary']}")
            for m in r["triage"]["matches"]:
                click.echo(f"      - {m['rule_id']} ({m['confidence']:.2f}): {m['root_cause']} -> {m['remedy']}")
    if broken:
        sys.exit(1)


@click.command("history")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def history_cmd(app: App, name: str, as_json: bool) -> None:
    """NAME's events as a readable timeline."""
    rows = deploy.history(app.ledger, name)
    if as_json:
        click.echo(json.dumps(rows, indent=1, default=str))
        return
    for r in rows:
        click.echo(f"{r['seq']:>6}  {r['at'][:19]}  {r['type']:<24} {describe(r['type'], r['payload'])}")


@click.command("graph")
def graph_cmd() -> None:
    """Print the lifecycle as a Mermaid diagram (generated from the transitions table)."""
    from statemachine.mermaid import mermaid

    click.echo(mermaid())


@click.command("plan")
@click.argument("target_")
@click.option("--target", type=click.Choice(["npu2", "npu1"]), default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def plan_cmd(app: App, target_: str, target: str | None, as_json: bool) -> None:
    """The (kernel, shape, role) list for a deployment NAME or a CONFIG (config.json or HF folder)."""
    from kernels.model.architecture import load_raw_config, resolve
    from kernels.model.plan import plan

    if Path(target_).exists():
        cfg, tgt = resolve(load_raw_config(target_)), target or "npu2"
    else:
        from handlers.gates import GateRun
        from handlers.uow import DeploymentUnit

        state = DeploymentUnit(app.ledger, target_).state
        if not state.config:
            raise click.ClickException(f"{target_} has no resolved config (out of scope?)")
        cfg, tgt = GateRun(state=state, workspace=app.workspace).config, target or state.target
    rows = plan(cfg, target=tgt)
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=1))
        return
    for r in rows:
        shape = ",".join(f"{k}={v}" for k, v in r.shape.items())
        j = r.to_json()
        tile = j.get("tile", {})
        click.echo(f"{r.phase:<8} {r.kernel:<16} {shape:<44} {r.role:<22} {json.dumps(tile.get('tile', tile))}")
        for w in j.get("warnings", []):
            click.echo(f"{'':<8} warning: {w}")


@click.command("evaluate", hidden=True)
@click.argument("name")
@click.option("--against", help="a checkpoint SIZE:HASH kept elsewhere")
@click.pass_obj
def evaluate_cmd(app: App, name: str, against: str | None) -> None:
    """(internal) The independent evaluator's fresh process: prints its evidence as JSON, records nothing."""
    from handlers.gates import GateRun
    from handlers.gates.phase7 import evaluate
    from handlers.uow import DeploymentUnit
    from ledger.canonical import dumps

    state = DeploymentUnit(app.ledger, name).state
    ctx = GateRun(state=state, workspace=app.workspace, ledger=app.ledger, progress=TerminalProgress())
    rerun, evaluation = evaluate(ctx, against)
    click.echo(dumps({"rerun": [g.to_payload() for g in rerun], "evaluation": evaluation.to_payload()}))


@click.command("audit")
@click.argument("name")
@click.option("--against", help="a checkpoint SIZE:HASH kept elsewhere (detects truncation/rewrite)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def audit_cmd(app: App, name: str, against: str | None, as_json: bool) -> None:
    """Phase 7: the independent evaluator (fresh process; reads only the ledger and the model folder)."""
    progress = (lambda m: None) if as_json else TerminalProgress()
    try:
        report = deploy.audit(app.ledger, name, workspace=app.workspace, checkpoint=against, progress=progress)
    finally:
        _refresh_projections(app)
    if as_json:
        click.echo(json.dumps({"name": name, "verdict": report.verdict, "findings": report.findings,
                               "remeasured": report.remeasured, "status": report.status}, indent=1, default=str))
    else:
        for f in report.findings:
            where = f"seq {f['seq']}" if f.get("seq") is not None else "—"
            click.echo(f"  [{f['severity']}] {where}: {f['check']}: {f['message']}")
        click.echo(f"{name}: evaluation {report.verdict} ({len(report.findings)} findings); status {report.status}")
        if report.recorded:
            click.echo(f"report: {app.workspace / 'llms' / name / 'docs' / 'evaluation_report.md'}")
        else:
            click.echo("the stream cannot be replayed: nothing was recorded")
    if report.verdict == "FAIL":
        sys.exit(1)


commands = [audit_cmd, evaluate_cmd, init_cmd, advance_cmd, resume_cmd, lesson_cmd, status_cmd, history_cmd, graph_cmd, plan_cmd]


# --- on-demand measurements --------------------------------------------------------------------------------


def _ctx(app: App, name: str, progress=None):
    from handlers.gates import GateRun
    from handlers.uow import DeploymentUnit

    unit = DeploymentUnit(app.ledger, name)
    return unit, GateRun(state=unit.state, workspace=app.workspace, ledger=app.ledger,
                         progress=progress or TerminalProgress())


@click.command("run")
@click.argument("name")
@click.option("--prompt", required=True)
@click.option("--n-tokens", type=click.IntRange(1, 4096), default=32, show_default=True)
@click.option("--profile", is_flag=True, help="per-stage breakdown: setup, prefill, decode, LM head, top kernels")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def run_cmd(app: App, name: str, prompt: str, n_tokens: int, profile: bool, as_json: bool) -> None:
    """Generate with the deployment's integrated runner; prints TTFT and tokens/s (setup not timed)."""
    import numpy as np

    from handlers.gates.runtime import model_backend
    from kernels.toolchain import current_toolchain
    from ledger.events import PerformanceMeasured

    unit, ctx = _ctx(app, name, (lambda m: None) if as_json else None)
    backend = model_backend(ctx.state, ctx.config)
    tok = backend.tokenizer()
    if getattr(tok, "chat_template", None):
        from kernels.model.prompts import _ids

        ids = _ids(tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True))
    else:
        ids = list(tok(prompt)["input_ids"])
    r = backend.integrated_run(np.asarray(ids, np.int64), n_tokens)
    text = tok.decode(r["tokens"], skip_special_tokens=True)
    unit.commit([PerformanceMeasured(phase=6, executor=ctx.state.executor, pipeline=r["pipeline"],
                                     n_prompt_tokens=len(ids), n_tokens=n_tokens, ttft_s=r["ttft_s"],
                                     tokens_per_s=r["tokens_per_s"], ms_per_token=r["ms_per_token"],
                                     prefill_s=r["prefill_s"], setup_s=r["setup_s"],
                                     profile=r["profile"] if profile else {},
                                     toolchain=current_toolchain(ctx.state.executor))])
    if as_json:
        click.echo(json.dumps({"text": text, **{k: r[k] for k in ("tokens", "setup_s", "ttft_s", "tokens_per_s",
                                                                    "ms_per_token")},
                               **({"profile": r["profile"]} if profile else {})}, default=str))
        return
    click.echo(text)
    click.echo(f"\nsetup {r['setup_s']:.3f} s (not timed) | TTFT {r['ttft_s'] * 1e3:.1f} ms | "
               f"{r['tokens_per_s'] or 0:.2f} tokens/s | {r['ms_per_token'] or 0:.2f} ms/token | {len(ids)} prompt tokens")
    if profile:
        p = r["profile"]
        decode = p["decode_s_per_token"]
        click.echo(f"{'stage':<28}{'seconds':>10}")
        click.echo(f"{'setup':<28}{p['setup_s']:>10.4f}")
        click.echo(f"{'prefill':<28}{p['prefill_s']:>10.4f}")
        click.echo(f"{'decode per token (median)':<28}{(sorted(decode)[len(decode) // 2] if decode else 0):>10.4f}")
        click.echo(f"{'LM head (all calls)':<28}{p['lm_head_s']:>10.4f}")
        for k in p["top_kernels"]:
            click.echo(f"  kernel {k['kernel']:<19}{k['seconds']:>10.4f}  ({k['calls']} calls)")


@click.command("verify-model")
@click.argument("name")
@click.option("--full", is_flag=True, help="all 8 prompts")
@click.option("--inject", metavar="FAULT", default=None,
              help="a gate drill: the same gate with one test fault switched on ('--inject list' names them); "
                   "recorded as context drill:FAULT, never as the deployment's evidence")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def verify_model_cmd(app: App, name: str, full: bool, inject: str | None, as_json: bool) -> None:
    """The token gate on demand (upstream's `make verify` plus the teacher-forced walk), recorded in the ledger.

    With --inject FAULT it is a drill: the exit status is 0 when the gate failed on every prompt (it caught
    the fault), 1 when some prompt passed."""
    from handlers.gates.phase23 import token_gate_events
    from handlers.gates.runtime import model_backend
    from kernels.model.compare import token_gate_failure
    from kernels.model.pipeline import FAULT_HELP, FAULTS

    if inject == "list":
        for fault in sorted(FAULTS):
            click.echo(f"{fault:<26} {FAULT_HELP[fault]}")
        return
    if inject is not None and inject not in FAULTS:
        raise click.BadParameter(f"unknown fault {inject!r}; known: {', '.join(sorted(FAULTS))}", param_hint="--inject")
    unit, ctx = _ctx(app, name, (lambda m: None) if as_json else None)
    backend = model_backend(ctx.state, ctx.config, {"faults": [inject]} if inject else None)
    gates = token_gate_events(ctx, backend, f"drill:{inject}" if inject else "verify-model", full=full)
    unit.commit(gates)
    ok = all(g.passed for g in gates)
    caught = sum(1 for g in gates if not g.passed)
    caught_first = sum(1 for g in gates if g.first_divergence_passed is False)
    if as_json:
        click.echo(json.dumps({"passed": ok, "drill": inject, "caught": caught if inject else None,
                               "prompts": [g.to_payload() for g in gates]}, default=str))
    else:
        for g in gates:
            click.echo(describe("TokenGateChecked", g.to_payload()))
            if not g.passed:
                click.echo(f"    why: {token_gate_failure(g)}")
        if inject:
            click.echo(f"[drill] {inject}: the gate failed {caught}/{len(gates)} prompts "
                       f"(first divergence alone {caught_first}/{len(gates)})")
        else:
            click.echo(f"[verify] {'PASS' if ok else 'FAIL'}")
    if (inject and caught < len(gates)) or (not inject and not ok):
        sys.exit(1)


@click.command("diagnose")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def diagnose_cmd(app: App, name: str, as_json: bool) -> None:
    """Per-layer cosine of the deployment's pipeline vs HF bf16 (recorded; never fails a phase)."""
    from handlers.gates.phase23 import diagnosis_events
    from handlers.gates.runtime import model_backend

    unit, ctx = _ctx(app, name, (lambda m: None) if as_json else None)
    layers = diagnosis_events(ctx, model_backend(ctx.state, ctx.config))
    unit.commit(layers)
    if as_json:
        click.echo(json.dumps([x.to_payload() for x in layers]))
        return
    click.echo(f"{'layer':>5} {'cos min':>9} {'p5':>9} {'median':>9} {'mean':>9} {'max_abs':>10} {'mean_abs':>10}")
    for x in layers:
        click.echo(f"{x.layer:>5} {x.cos_min:>9.5f} {x.cos_p5:>9.5f} {x.cos_median:>9.5f} {x.cos_mean:>9.5f} "
                   f"{x.max_abs:>10.4g} {x.mean_abs:>10.4g}")


@click.group("record")
def record_group() -> None:
    """Ingest results produced elsewhere (an NPU machine) into the ledger."""


@record_group.command("harness")
@click.argument("name")
@click.option("--kernel", required=True)
@click.option("--shape", required=True, help="e.g. M=2048,K=2048,N=2048")
@click.option("--contract", default=None)
@click.option("--file", "file_", required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--role", default="")
@click.pass_obj
def record_harness_cmd(app: App, name: str, kernel: str, shape: str, contract: str | None, file_: str, role: str) -> None:
    """Record a `make run` transcript from an NPU2 machine as KernelVerified(source=harness)."""
    from handlers.record import record_harness

    text = sys.stdin.read() if file_ == "-" else Path(file_).read_text(encoding="utf-8", errors="replace")
    seq, event = record_harness(app.ledger, name, kernel=kernel, shape=shape, contract=contract, text=text,
                                file_label=Path(file_).name if file_ != "-" else "<stdin>", role=role)
    click.echo(f"{kernel} {shape}: {event.verdict} recorded at seq {seq} (sha256 {event.provenance['output_sha256'][:12]})")
    _refresh_projections(app)


commands += [run_cmd, verify_model_cmd, diagnose_cmd, record_group]
