"""`ledger perf export-history` / `ledger perf import-history FILE`: the ledger's figures in mlir-air's nightly
history format, and the nightly's files read into the ledger (handlers.nightly_ops, registry.nightly_history);
`ledger perf calibrate`: the NPU2 model fitted to the ledger's own NPU2-measured runs (handlers.calibrate)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from handlers.bootstrap import App
from handlers.cli.verbs import group_commands
from handlers.results_workbench import export_history_json, import_history_json
from handlers.nightly_ops import FILES, BadLine, export_history, import_history
from registry.text import escaped


@click.group("perf")
def perf_group() -> None:
    """mlir-air's nightly perf history (history / sweep_history / prefill_sweep_history.ndjson) in and out of the
    ledger; the model calibrated to this machine's runs."""


@perf_group.command("import-history")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print what was read and added as JSON")
@click.pass_obj
def import_history_cmd(app: App, file: str, as_json: bool) -> None:
    """Read one of mlir-air's nightly ndjson files (history / sweep_history / prefill_sweep_history) into the
    ledger as imported evidence; a line that is not a row refuses the whole file and records nothing."""
    if not (Path(file).exists() or Path(file).is_symlink()):  # a FIFO or device: refused by the reader, named
        raise BadLine(f"{file}: no such file; nothing was imported")
    try:
        out = import_history(app.ledger, file)
    except BadLine as e:  # the CLI boundary prints it as one `error: ...` line, exit 1
        raise BadLine(f"{e}; nothing was imported") from None
    if as_json:
        click.echo(json.dumps(import_history_json(out), sort_keys=True))
    else:
        kinds = ", ".join(f"{n} {FILES[s]}" for s, n in sorted(out["series"].items()))
        click.echo(f"{out['file']}: {out['read']} line(s) read ({kinds}); {out['added']} new to the ledger")


def _refuse_old_flag(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:  # it wrote modelled figures under the bare model name; the flag's every use now needs a look
        raise ValueError("--include-not-measured is gone: it wrote modelled figures under the bare model name, "
                               "which mlir-air's dashboard shows as NPU2 measurements; use --modelled (each such "
                               "line's model then names its class)")
    return value


@perf_group.command("export-history")
@click.option("--series", type=click.Choice(sorted(FILES)), default="history", show_default=True,
              help="history.ndjson, sweep_history.ndjson or prefill_sweep_history.ndjson lines")
@click.option("--model", default=None, help="only this mlir-air model directory name")
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None, help="write here instead of stdout")
@click.option("--modelled", is_flag=True,
              help="also the modelled / emulator / rehearsal figures, each line's model suffixed with its class "
                   "(e.g. 'smollm2_135m_instruct (modelled NPU2)') so mlir-air's dashboard cannot show it as measured")
@click.option("--include-not-measured", is_flag=True, hidden=True, expose_value=False, callback=_refuse_old_flag)
@click.option("--json", "as_json", is_flag=True, help="print the rows as one JSON array instead of ndjson")
@click.pass_obj
def export_history_cmd(app: App, series: str, model: str | None, out: str | None, modelled: bool,
                       as_json: bool) -> None:
    """The ledger's Phase 6 / reverify figures measured on NPU2 (runner `npu-ledger/npu2-measured`) and the imported
    nightly rows, as lines of mlir-air's nightly history schema."""
    app.read_only = True
    skipped: list[str] = []
    lines = export_history(app.ledger.read_all(), series, model, modelled, skipped)
    for why in skipped:  # a record whose figures cannot be lines (zero, negative, not finite): named, not written
        click.echo(escaped(f"warning: {why}"), err=True)
    text = (json.dumps(export_history_json(lines)) + "\n") if as_json else "".join(x + "\n" for x in lines)
    if out:
        Path(out).write_text(text, encoding="utf-8")
        click.echo(f"{len(lines)} {FILES[series]} line(s) written to {out}")
    else:
        click.echo(text, nl=False)


for _command in group_commands("perf"):  # perf calibrate: a row of handlers.verbs
    perf_group.add_command(_command)


commands = [perf_group]
