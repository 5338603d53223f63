"""`ledger doctor [MLIR_AIR_DIR]`: check an mlir-air checkout against the contract the tool was written for.

Prints one table, file by file (status ok / differs / missing / n/a (not in a `ledger twin` directory) / new (a
tested-shapes table beyond the contract, informative) and what is absent), or `--json`; exits 1
when something the tool depends on differs or is missing. A toolchain below the contract's floor (the Peano
version, npu_kernels.mlir_air.toolchain_floor) is refused first, in one line naming the floor and its source
(`--json`: `toolchain_refusal`, exit 1). The checks are `handlers.doctor`'s
(`npu_kernels.mlir_air.contract` plus the registry's table headers). Read-only: no ledger is opened.
"""

from __future__ import annotations

import json

import click

from handlers.results_workbench import doctor_json
from handlers.workbench import doctor_report


@click.command("doctor")
@click.argument("mlir_air_dir", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the findings as JSON")
def doctor_cmd(mlir_air_dir, as_json) -> None:
    """Check MLIR_AIR_DIR (default: $MLIR_AIR_DIR) against mlir-air contract CONTRACT_VERSION."""
    try:
        report = doctor_report(mlir_air_dir)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        click.echo(json.dumps(doctor_json(report), indent=2))
    else:
        if report["toolchain_refusal"]:  # below the toolchain floor: nothing built with it is usable, one line says why
            raise click.ClickException(report["toolchain_refusal"])
        if report["toolchain_warning"]:
            click.echo(f"warning: {report['toolchain_warning']}", err=True)
        for line in doctor_lines(report):
            click.echo(line)
    if not report["clean"]:
        raise SystemExit(1)


def doctor_lines(report: dict) -> list[str]:
    """The table `ledger doctor` prints: a line per finding; in a twin, the checks that read the stand-in's own
    copy of a file (not one in the directory) say so, and a line above the table says how many."""
    findings = report["findings"]
    rows = [("file", "checks", "status", "what differs")]
    for f in findings:
        absent = ", ".join(f["absent"] if f["status"] == "new" else map(repr, f["absent"]))
        note = f"read the twin's own copy, {f['twin_copy']}" if f["twin_copy"] else ""
        if f["status"] == "n/a" and f.get("since") and not report["twin"]:  # a file mlir-air added later
            note = (f"not in this checkout: added upstream after {report['contract_commit'][:7]} (read at "
                    f"{f['since'][:7]}): {f['what']}")
        rows.append((f["file"], f["kind"], f["status"],
                     "; ".join(x for x in (absent or ("file not found" if f["status"] == "missing" else ""), note) if x)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"checkout {report['checkout']} (commit {report['commit'] or 'unknown'}) against mlir-air contract "
             f"v{report['contract_version']} (read at {report['contract_commit'][:7]})"]
    copies = sum(1 for f in findings if f["twin_copy"])
    if report["twin"]:
        lines.append(f"a `ledger twin` stand-in: {copies} check(s) read npu-ledger's own copy of the file (named in "
                     "the last column), not a file of this directory; n/a: no such file in a twin")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3] for r in rows]
    failing = [f for f in findings if f["fails"]]
    lines.append(f"{len(failing)} difference(s) in {len({f['file'] for f in failing})} file(s)" if failing
                 else "no difference: the checkout meets the contract")
    return lines


commands = [doctor_cmd]
