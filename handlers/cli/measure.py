"""`ledger record harness`: an NPU2 machine's transcript recorded outside the phase gates. The other on-demand
verbs (run, verify-model, diagnose) are rows of handlers.verbs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from handlers import results
from handlers.bootstrap import App
from handlers.inputs import read_input_text
from handlers.cli.common import refresh_projections
from handlers.record import parse_toolchain, record_harness


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


commands = [record_group]  # run, verify-model, diagnose: rows of handlers.verbs
