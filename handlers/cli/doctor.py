"""`ledger doctor [MLIR_AIR_DIR]`: check an mlir-air checkout against the contract the tool was written for.

Prints one table, file by file (status ok / differs / missing / n/a (not in a `ledger twin` directory) / new (a
tested-shapes table beyond the contract, informative) and what is absent), or `--json`; exits 1
when something the tool depends on differs or is missing. A toolchain below the contract's floor (the Peano
version, kernels.mlir_air.toolchain_floor) is refused first, in one line naming the floor and its source
(`--json`: `toolchain_refusal`, exit 1). The checks are `handlers.doctor`'s
(`kernels.mlir_air.contract` plus the registry's table headers). Read-only: no ledger is opened.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from handlers.doctor import doctor, toolchain_refusal, toolchain_warning
from kernels.mlir_air.contract import CONTRACT_COMMIT, CONTRACT_VERSION, looks_like_checkout
from kernels.mlir_air.lock import probe_toolchain


@click.command("doctor")
@click.argument("mlir_air_dir", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the findings as JSON")
def doctor_cmd(mlir_air_dir, as_json) -> None:
    """Check MLIR_AIR_DIR (default: $MLIR_AIR_DIR) against mlir-air contract CONTRACT_VERSION."""
    directory = mlir_air_dir or os.environ.get("MLIR_AIR_DIR")
    if not directory:
        raise click.ClickException("no checkout given and MLIR_AIR_DIR is not set")
    if not Path(directory).is_dir() or not looks_like_checkout(directory):
        raise click.ClickException(f"{directory} is not an mlir-air checkout (no programming_examples/llms/verify/"
                                   "verify_runner.py)")
    refused = toolchain_refusal(directory)
    if refused and not as_json:  # below the toolchain floor: nothing built with it is usable, one line says why
        raise click.ClickException(refused)
    warning = toolchain_warning(directory)
    if warning and not as_json:
        click.echo(f"warning: {warning}", err=True)
    findings = doctor(directory)
    failing = [f for f in findings if f.fails]
    probed = dict(probe_toolchain(directory))
    commit = probed.get("mlir_air_commit")
    if as_json:
        click.echo(json.dumps({"checkout": str(directory), "commit": commit, "contract_version": CONTRACT_VERSION,
                               "contract_commit": CONTRACT_COMMIT, "clean": not failing and not refused,
                               "toolchain": {k: probed.get(k) for k in ("llvm_aie_version", "mlir_aie_hash")},
                               "toolchain_refusal": refused, "toolchain_warning": warning,
                               "findings": [f.as_json() for f in findings]}, indent=2))
    else:
        rows = [("file", "checks", "status", "what differs")]
        for f in findings:
            absent = ", ".join(" | ".join(a) if isinstance(a, tuple) else (a if f.status == "new" else repr(a))
                               for a in f.absent)
            rows.append((f.check.file, f.check.kind, f.status, absent or ("" if f.status != "missing"
                                                                          else "file not found")))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        click.echo(f"checkout {directory} (commit {commit or 'unknown'}) against mlir-air contract "
                   f"v{CONTRACT_VERSION} (read at {CONTRACT_COMMIT[:7]})")
        for r in rows:
            click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3])
        click.echo(f"{len(failing)} difference(s) in {len({f.check.file for f in failing})} file(s)" if failing
                   else "no difference: the checkout meets the contract")
    if failing or refused:
        raise SystemExit(1)


commands = [doctor_cmd]
