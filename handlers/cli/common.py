"""What the click command modules share: refreshing the projections after a command recorded something."""

from __future__ import annotations

import click

from handlers.bootstrap import App
from handlers.uow import stream_id


def refresh_projections(app: App) -> None:
    """Rebuild the registry and model docs after a change, and remember the ledger's new checkpoint
    (`App.refresh_projections`); its warnings go to stderr."""
    for line in app.refresh_projections():
        click.echo(line, err=True)


def refresh_if_recorded(app: App, name: str) -> None:
    """`refresh_projections` after a command on deployment NAME, only when the ledger holds NAME: a misspelt name
    recorded nothing, so it writes no kernel_registry/ or llms/ into the folder either."""
    if app.ledger.stream_version(stream_id(name)):  # the stream's version, not its events: advance folded it already
        refresh_projections(app)
