"""What the click command modules share: the VerbCall of a command (`cli_call`: its warnings on stderr, its lines
printed escaped), whose post-commit step (`handlers.verbs.post_commit`) the MCP tools take too."""

from __future__ import annotations

import click

from handlers.bootstrap import App
from handlers.verbs import VerbCall
from registry.text import escaped


def cli_call(app: App) -> VerbCall:
    """The command's App with its warnings going to stderr, the lines it tells as the work goes printed escaped."""
    return VerbCall(app, warn=lambda line: click.echo(line, err=True),
                    tell=lambda line, err=False: click.echo(escaped(line), err=err))

