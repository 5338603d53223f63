"""The names of the ledger's streams, built in one place: a deployment's events are the stream `deployment:<name>`."""

from __future__ import annotations

DEPLOYMENT_PREFIX = "deployment:"


def deployment_stream(name: str) -> str:
    """The stream of deployment `name`."""
    return f"{DEPLOYMENT_PREFIX}{name}"


def deployment_name(stream_id: str) -> str | None:
    """The deployment a stream belongs to, or None for a stream that is not a deployment's."""
    return stream_id[len(DEPLOYMENT_PREFIX):] if stream_id.startswith(DEPLOYMENT_PREFIX) else None
