"""What the click command modules share: the post-commit projection step (`handlers.verbs.post_commit`, the one
the MCP tools take too), its warnings on stderr."""

from __future__ import annotations

import click

from handlers.bootstrap import App
from handlers.verbs import VerbCall, post_commit
from registry.text import escaped


def cli_call(app: App) -> VerbCall:
    """The command's App with its warnings going to stderr, the lines it tells as the work goes printed escaped."""
    return VerbCall(app, warn=lambda line: click.echo(line, err=True),
                    tell=lambda line, err=False: click.echo(escaped(line), err=err))


def refresh_projections(app: App) -> None:
    """`post_commit` after a command that recorded something: the projections rebuilt, the checkpoint kept."""
    post_commit(cli_call(app))


def refresh_if_recorded(app: App, name: str) -> None:
    """`post_commit` after a command on deployment NAME, only when the ledger holds NAME."""
    post_commit(cli_call(app), name)
