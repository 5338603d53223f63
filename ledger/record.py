"""What the recorder gives its readers: a stored row (`RecordedEvent`), a `Checkpoint` of the head, the
ledger's `Identity` and the result of `verify()` (`VerifyResult`). Plain frozen records; anyone may import them
(`ledger` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Sequence

from ledger.canonical import dumps, loads, new_event_id
from ledger.events import Event, NewEvent, parse_event
from ledger.guards import Deviation


@dataclass(frozen=True)
class Checkpoint:
    """The ledger's size (number of events = last seq) and the hash of its last event."""

    size: int
    hash: str

    def __str__(self) -> str:
        return f"{self.size}:{self.hash}"

    @classmethod
    def parse(cls, text: str) -> "Checkpoint":
        size, sep, digest = text.partition(":")
        if not sep or not size.isdigit() or len(digest) != 64:
            raise ValueError(f"checkpoint must be SIZE:HASH (64 hex digits), got {text!r}")
        return cls(int(size), digest.lower())


@dataclass(frozen=True)
class Identity:
    """A ledger's identity: its first event, written when the ledger was created and immutable since.

    `event_id` is the UUID the recorder drew for that event and `genesis` its chain hash (which covers the
    id and the microsecond it was recorded). A copy of the ledger has the same identity; moving it keeps it.
    Every ledger that has an event has one, ledgers written before identities were named included."""

    event_id: str
    genesis: str

    def to_json(self) -> dict[str, str]:
        return {"first_event_id": self.event_id, "genesis": self.genesis}


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    first_bad_seq: int | None = None
    reason: str = ""
    checked: int = 0
    missing_triggers: tuple[str, ...] = ()  # immutability triggers the database lacks (then ok is False)
    disabled_triggers: tuple[str, ...] = ()  # immutability triggers present but switched off (then ok is False)
    altered_triggers: tuple[str, ...] = ()  # present, but not the definition the tool installs (then ok is False)
    extra_triggers: tuple[str, ...] = ()  # on the events table, but not installed by the tool (then ok is False)
    # the rest of the events table's definition where it is not the tool's: a CHECK, an index... (then ok is False)
    schema_deviations: tuple[Deviation, ...] = ()


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

    @classmethod
    def from_row(cls, row: Sequence) -> "RecordedEvent":
        """The record of a row of the events table (its columns in ledger.schema.COLS order)."""
        seq, stream_id, version, event_id, type_, payload, recorded_at, prev_hash, digest = row
        return cls(int(seq), stream_id, int(version), event_id, type_, loads(payload), recorded_at, prev_hash, digest)

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


def encode_batch(events: Iterable[NewEvent | Event]) -> list[tuple[str, str, str]]:
    """(event_id, type, canonical JSON payload) of each event to append; a bare event gets a fresh id.

    Every event field is a JSON-native value (str, number, bool, None, list, dict), so the validated field dict is
    the payload as it is; canonical JSON sorts it."""
    return [(e.event_id, e.event.type_name, dumps(e.event.__dict__)) if isinstance(e, NewEvent)
            else (new_event_id(), e.type_name, dumps(e.__dict__)) for e in events]


class ReadsEverything:
    """`all_events()`: every event in seq order, read from the store once per open ledger and then only its
    tail (`read_all(after=last seq)`). Rows are immutable (promise 4), so what was read stays what is stored;
    a rewrite behind the recorder's back is `verify`'s to find, not a reader's. One command's readers (the
    plan's registry, triage, the projections) share one whole read this way."""

    def read_all(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:  # pragma: no cover
        raise NotImplementedError

    def all_events(self) -> list[RecordedEvent]:
        cache: list[RecordedEvent] = self.__dict__.setdefault("_everything", [])
        cache.extend(self.read_all(after=cache[-1].seq if cache else 0))
        return list(cache)

    def recorded(self, rows: Sequence[Sequence]) -> list[RecordedEvent]:
        """The records of rows this ledger has just stored (ledger.schema.COLS order); the `all_events` cache is
        extended by them when they follow it directly (no other writer between: its tail is then not read)."""
        records = [RecordedEvent.from_row(row) for row in rows]
        cache = self.__dict__.get("_everything")
        if records and cache and cache[-1].seq == records[0].seq - 1:
            cache.extend(records)
        return records
