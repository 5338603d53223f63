"""A stored ledger row as readers see it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ledger.events import Event, parse_event


@dataclass(frozen=True)
class RecordedEvent:
    seq: int
    stream_id: str
    version: int
    event_id: str
    type: str
    payload: dict[str, Any]
    recorded_at: str  # ISO-8601 UTC, exactly as hashed
    prev_hash: str = field(default="", repr=False)
    hash: str = field(default="", repr=False)

    @cached_property
    def event(self) -> Event:
        """The typed event (validated) rebuilt from the payload."""
        return parse_event(self.type, self.payload)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "stream_id": self.stream_id,
            "version": self.version,
            "event_id": self.event_id,
            "type": self.type,
            "payload": self.payload,
            "recorded_at": self.recorded_at,
            "hash": self.hash,
        }
