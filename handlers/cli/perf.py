"""The `ledger perf` group. Its verbs are rows of handlers.verbs: `perf export-history` / `perf import-history FILE`
(the ledger's figures in mlir-air's nightly history format, and the nightly's files read into the ledger:
handlers.nightly_ops, registry.nightly_history); `perf calibrate` (the NPU2 model fitted to the ledger's own
NPU2-measured runs: handlers.calibrate)."""

from __future__ import annotations

import click

from handlers.cli.verbs import group_commands


@click.group("perf")
def perf_group() -> None:
    """mlir-air's nightly perf history (history / sweep_history / prefill_sweep_history.ndjson) in and out of the
    ledger; the model calibrated to this machine's runs."""


for _command in group_commands("perf"):  # rows of handlers.verbs
    perf_group.add_command(_command)


commands = [perf_group]
