"""CLI commands that measure or record on demand, outside the phase gates: run (the integrated runner),
verify-model (the token gate, or a gate drill with --inject), diagnose (per-layer cosines), record harness (an
NPU2 machine's transcript)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from handlers import on_demand, results
from handlers.bootstrap import App
from handlers.inputs import read_input_text
from handlers.cli.common import refresh_projections
from handlers.results_workbench import run_json
from handlers.runs import generate
from handlers.narrate import TerminalProgress, describe, reporting
from handlers.record import parse_toolchain, record_harness
from npu_kernels.model.compare import isolated_minima, token_gate_failure
from npu_kernels.model.options import FAULT_HELP, FAULTS


@click.command("run")
@click.argument("name")
@click.option("--prompt", required=True)
@click.option("--n-tokens", type=click.IntRange(1, 4096), default=32, show_default=True)
@click.option("--profile", is_flag=True, help="per-stage breakdown: setup, prefill, decode, LM head, top kernels")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def run_cmd(app: App, name: str, prompt: str, n_tokens: int, profile: bool, as_json: bool) -> None:
    """Generate with the deployment's integrated runner; prints TTFT and tokens/s (setup not timed)."""
    with reporting(None if as_json else TerminalProgress()):
        out = generate(app.ledger, app.workspace, name, prompt, n_tokens, profile=profile)
    if as_json:
        click.echo(json.dumps(run_json(out), default=str))
        return
    click.echo(out["text"])
    click.echo(f"\nsetup {out['setup_s']:.3f} s (not timed) | TTFT {out['ttft_s'] * 1e3:.1f} ms | "
               f"{out['tokens_per_s'] or 0:.2f} tokens/s | {out['ms_per_token'] or 0:.2f} ms/token | "
               f"{out['n_prompt_tokens']} prompt tokens | {out['source']}")
    if profile:
        p = out["profile"]
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
    if inject == "list":
        for fault in sorted(FAULTS):
            click.echo(f"{fault:<26} {FAULT_HELP[fault]}")
        return
    try:
        with reporting(None if as_json else TerminalProgress()):
            gates = on_demand.verify_model(app.ledger, app.workspace, name, full=full, inject=inject)
    except on_demand.UnknownFault as e:
        raise click.BadParameter(str(e), param_hint="--inject") from e
    ok = all(g.passed for g in gates)
    caught = sum(1 for g in gates if not g.passed)
    caught_first = sum(1 for g in gates if g.first_divergence_passed is False)
    if as_json:
        click.echo(json.dumps(results.verify_model_json(gates, inject), default=str))
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
    with reporting(None if as_json else TerminalProgress()):
        layers = on_demand.diagnose(app.ledger, app.workspace, name)
    if as_json:
        click.echo(json.dumps(results.diagnose_json(layers)))
        return
    click.echo(f"{'layer':>5} {'cos min':>9} {'p5':>9} {'median':>9} {'mean':>9} {'max_abs':>10} {'mean_abs':>10}")
    for x in layers:
        click.echo(f"{x.layer:>5} {x.cos_min:>9.5f} {x.cos_p5:>9.5f} {x.cos_median:>9.5f} {x.cos_mean:>9.5f} "
                   f"{x.max_abs:>10.4g} {x.mean_abs:>10.4g}")
    apart = isolated_minima(layers)
    if apart:
        click.echo(f"layers {', '.join(map(str, apart))}: the minimum is one position far below the rest (p5); a "
                   "massive activation under the floor-rounded residual add does this on the emulated NPU2 "
                   "(docs/emulated_numerics.md, \"Massive activations\")")


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
@click.option("--method", default="",
              help="GEMM (required): the METHOD the make run used, the name mlir-air's registry files the row under "
                   "(bf16-out-high: fused-cast / drain; bf16-out-low: direct; f32-out: external / direct)")
@click.option("--device", default=None, help="the NPU the transcript ran on, as xrt-smi names it (e.g. 'NPU Strix')")
@click.option("--toolchain", "toolchain_text", default=None,
              help="what it ran on: mlir_air_commit=SHA,aie_opt=...,air_opt=...,xrt_smi=...,peano=...")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def record_harness_cmd(app: App, name: str, kernel: str, shape: str, contract: str | None, file_: str, role: str,
                       method: str, device: str | None, toolchain_text: str | None, as_json: bool) -> None:
    """Record a `make run` transcript from an NPU2 machine as KernelVerified(source=harness)."""
    text = read_input_text(file_, "transcript")  # a regular file (or stdin) under its cap (handlers.inputs)
    seq, event = record_harness(app.ledger, name, kernel=kernel, shape=shape, contract=contract, text=text,
                                file_label=Path(file_).name if file_ != "-" else "<stdin>", role=role,
                                device=device, toolchain=parse_toolchain(toolchain_text), method=method)
    click.echo(json.dumps(results.record_harness_json(seq, event)) if as_json else
               f"{kernel} {shape}: {event.verdict} recorded at seq {seq} as {event.provenance_class} "
               f"(sha256 {event.provenance['output_sha256'][:12]})")
    refresh_projections(app)


commands = [run_cmd, verify_model_cmd, diagnose_cmd, record_group]
