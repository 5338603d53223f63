"""`ledger record ...`: the group that ingests results produced elsewhere; `record harness` (an NPU2 machine's
transcript) is a row of handlers.verbs, as are the other on-demand verbs (run, verify-model, diagnose)."""

from __future__ import annotations

import click

from handlers.cli.verbs import group_commands


@click.group("record")
def record_group() -> None:
    """Ingest results produced elsewhere (an NPU machine) into the ledger."""


for _command in group_commands("record"):  # record harness: a row of handlers.verbs
    record_group.add_command(_command)


commands = [record_group]
