"""`ledger registry ...`: the group; its verbs (lookup, import, build) are rows of handlers.verbs."""

from __future__ import annotations

import click

from handlers.cli.verbs import group_commands


@click.group("registry")
def registry() -> None:
    """The kernel registry: lookups, mlir-air imports, projections."""


for _command in group_commands("registry"):  # registry lookup / import / build: rows of handlers.verbs
    registry.add_command(_command)


commands = [registry]
