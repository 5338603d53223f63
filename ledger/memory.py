"""The ledger in memory: the recorder's promises kept by plain Python objects, for tests of the verbs.

`open_ledger("memory://NAME")` opens the in-process store named NAME (created on first use, shared by every
handle opened on the same name in this process, gone with the process). It keeps the same rows as the
database recorders (ledger.schema.COLS order: seq, stream id, version, event id, type, canonical payload,
timestamp, prev hash, hash), built by the same functions (`ledger.record.encode_batch`,
`ledger.chain.chain_batch`) and checked by the same walk (`ledger.chain.walk_chain`). So the contract suite
(tests/integration/ledger_contract.py) runs on it as on SQLite and PostgreSQL, except what needs a second
process (a race between processes, a writer killed mid-batch): threads stand in for the first, and the second
has nothing to test: a process's memory dies with it.

What keeps each promise here: one lock serialises appends (1, 2: seq = last + 1 under it), an index of event
ids makes a retry a no-op (3), rows are tuples of strings and numbers and every read decodes a fresh payload, so
nothing a reader holds can change a stored row (4), and the chain and checkpoints are the database recorders'
own (5). Like pyeventsourcing's POPO recorder, it is real code that passes the contract, not a mock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from ledger.canonical import GENESIS_HASH
from ledger.chain import chain_batch, judge_chain, walk_chain
from ledger.errors import ConcurrencyError, LedgerError, LedgerWriteError
from ledger.events import Event, NewEvent
from ledger.guards import TriggerState
from ledger.record import Checkpoint, Identity, ReadsEverything, RecordedEvent, VerifyResult, encode_batch

SCHEME = "memory://"


@dataclass
class MemoryStore:
    """The rows of one in-memory ledger and the indexes an append needs. Tests that play a superuser edit
    `rows` directly, behind the recorder's back."""

    rows: list[tuple] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)  # event id -> seq
    versions: dict[str, int] = field(default_factory=dict)  # stream id -> version
    lock: threading.Lock = field(default_factory=threading.Lock)


_STORES: dict[str, MemoryStore] = {}
_STORES_LOCK = threading.Lock()


def memory_store(url: str) -> MemoryStore:
    """The store `url` (memory://NAME) names, created empty on first use."""
    with _STORES_LOCK:
        return _STORES.setdefault(url[len(SCHEME):], MemoryStore())


def forget_store(url: str) -> None:
    """Drop the store `url` names (a test's teardown)."""
    with _STORES_LOCK:
        _STORES.pop(url[len(SCHEME):], None)


class MemoryLedger(ReadsEverything):
    """An open in-memory ledger: the public interface of `ledger.recorder.Ledger`."""

    dialect = "memory"

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only
        self._store = memory_store(url)

    @property
    def where(self) -> str:
        return self.url

    def append(self, stream_id: str, expected_version: int, events: Iterable[NewEvent | Event]) -> list[int]:
        return self._append(stream_id, expected_version, events)[0]

    def append_recorded(self, stream_id: str, expected_version: int,
                        events: Iterable[NewEvent | Event]) -> tuple[list[int], list[RecordedEvent] | None]:
        """As `ledger.recorder.Ledger.append_recorded`: (seqs, the records as stored; None for an idempotent retry)."""
        return self._append(stream_id, expected_version, events)

    def _append(self, stream_id: str, expected_version: int,
                events: Iterable[NewEvent | Event]) -> tuple[list[int], list[RecordedEvent] | None]:
        encoded = encode_batch(events)
        if not encoded:
            return [], []
        if self.read_only:
            raise LedgerWriteError(f"the ledger at {self.where} was opened read-only; nothing was recorded")
        store = self._store
        with store.lock:
            found = [store.ids[eid] for eid, _, _ in encoded if eid in store.ids]
            if found:  # a retry of a recorded batch returns its seqs; a half-recorded batch cannot be a retry
                if len(found) != len(encoded):
                    raise LedgerError(f"batch is partly recorded already ({len(found)} of {len(encoded)} event ids)")
                return found, None
            current = store.versions.get(stream_id, 0)
            if current != expected_version:
                raise ConcurrencyError(f"stream {stream_id} is at version {current}, not the expected {expected_version}")
            last_seq, last_hash = (store.rows[-1][0], store.rows[-1][8]) if store.rows else (0, GENESIS_HASH)
            rows = chain_batch(stream_id, expected_version, last_seq, last_hash, encoded)
            store.rows.extend(rows)
            store.ids.update((row[3], row[0]) for row in rows)
            store.versions[stream_id] = rows[-1][2]
        return [row[0] for row in rows], self.recorded(rows)

    # --- reading ------------------------------------------------------------------------------------

    def _snapshot(self) -> list[tuple]:
        with self._store.lock:
            return list(self._store.rows)

    def read_stream(self, stream_id: str, after_version: int = 0) -> list[RecordedEvent]:
        return [RecordedEvent.from_row(r) for r in self._snapshot() if r[1] == stream_id and r[2] > after_version]

    def read_all(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
        rows = [r for r in self._snapshot() if r[0] > after]
        return [RecordedEvent.from_row(r) for r in (rows if limit is None else rows[:int(limit)])]

    def stream_version(self, stream_id: str) -> int:
        return max((r[2] for r in self._snapshot() if r[1] == stream_id), default=0)

    def streams(self, prefix: str = "") -> list[str]:
        seen: dict[str, None] = {}
        for r in self._snapshot():
            if r[1].startswith(prefix):
                seen.setdefault(r[1])
        return list(seen)

    def head(self) -> Checkpoint:
        rows = self._snapshot()
        return Checkpoint(rows[-1][0], rows[-1][8]) if rows else Checkpoint(0, GENESIS_HASH)

    def identity(self) -> Identity | None:
        first = next((r for r in self._snapshot() if r[0] == 1), None)
        return Identity(first[3], first[8]) if first else None

    def hashes_at(self, seqs: Iterable[int]) -> dict[int, str]:
        wanted = {int(s) for s in seqs}
        return {r[0]: r[8] for r in self._snapshot() if r[0] in wanted}

    def has_schema(self) -> bool:
        return True

    def trigger_state(self) -> TriggerState:
        return TriggerState()  # no triggers to lift: only this process's code reaches the rows

    def _raw_chunks(self) -> Iterator[list[tuple]]:
        yield self._snapshot()

    def verify(self, against: Checkpoint | str | None = None) -> VerifyResult:
        if isinstance(against, str):
            against = Checkpoint.parse(against)
        broken, n, checkpoint_hash = walk_chain(self._raw_chunks(), against.size if against is not None else -1)
        return broken if broken is not None else judge_chain(n, checkpoint_hash, against, self.trigger_state())

    def close(self) -> None:
        pass
