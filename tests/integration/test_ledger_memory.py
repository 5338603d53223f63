"""The recorder contract on the in-memory store (ledger.memory), with threads where the databases' suite races
processes, and the verbs' handlers run against it in this process."""

from __future__ import annotations

import threading
import uuid

import pytest

from ledger import ConcurrencyError, LedgerError, NewEvent, open_ledger
from ledger.events import LessonRecorded
from ledger.memory import forget_store, memory_store
from tests.integration.ledger_contract import LedgerContract


def _lesson(i: int) -> LessonRecorded:
    return LessonRecorded(text=f"lesson {i}")


class TestMemoryLedger(LedgerContract):
    @pytest.fixture(autouse=True)
    def _fresh(self):
        self.url = f"memory://{uuid.uuid4().hex}"
        yield
        forget_store(self.url)

    # a superuser's edits: the rows themselves, behind the recorder's back
    def edit_payload(self, seq: int, payload: str) -> None:
        rows = memory_store(self.url).rows
        i = next(i for i, r in enumerate(rows) if r[0] == seq)
        rows[i] = rows[i][:5] + (payload,) + rows[i][6:]

    def delete_from(self, seq: int) -> None:
        rows = memory_store(self.url).rows
        rows[:] = [r for r in rows if r[0] < seq]

    def delete_seq(self, seq: int) -> None:
        rows = memory_store(self.url).rows
        rows[:] = [r for r in rows if r[0] != seq]

    def assert_rows_cannot_be_changed(self, ledger) -> None:
        """No verb updates or deletes, and nothing a reader is handed reaches the stored row."""
        assert not any(hasattr(ledger, verb) for verb in ("update", "delete", "truncate", "execute"))
        record = ledger.read_all()[0]
        record.payload["text"] = "forged"
        with pytest.raises(AttributeError):
            record.seq = 99  # a frozen record
        assert ledger.read_all()[0].payload["text"] == "lesson 1"

    # the databases' suite races processes; one process's memory is raced by threads
    def test_eight_processes_racing_for_the_same_version_exactly_one_wins(self, tmp_path):
        go = threading.Event()
        outcomes: list[str] = []

        def race():
            ledger = open_ledger(self.url)
            go.wait()
            try:
                ledger.append("deployment:race", 0, [_lesson(0)])
                outcomes.append("WIN")
            except ConcurrencyError:
                outcomes.append("LOSE")

        threads = [threading.Thread(target=race) for _ in range(8)]
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["LOSE"] * 7 + ["WIN"]
        assert len(open_ledger(self.url).read_stream("deployment:race")) == 1

    def _writers(self, streams: list[str], batches: int, size: int) -> list[threading.Thread]:
        def write(stream: str):
            ledger = open_ledger(self.url)
            for b in range(batches):
                ledger.append(stream, b * size, [_lesson(i) for i in range(size)])

        return [threading.Thread(target=write, args=(s,)) for s in streams]

    def test_two_writers_of_1000_events_never_interleave_inside_a_batch(self, tmp_path):
        threads = self._writers(["deployment:w0", "deployment:w1"], 50, 20)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        events = open_ledger(self.url).read_all()
        assert [e.seq for e in events] == list(range(1, 2001))
        for i in range(0, 2000, 20):
            assert len({e.stream_id for e in events[i : i + 20]}) == 1
        assert open_ledger(self.url).verify().ok

    def test_a_reader_tailing_while_writers_append_sees_every_seq_once(self, tmp_path):
        threads = self._writers(["deployment:t0", "deployment:t1"], 40, 5)
        reader = open_ledger(self.url)
        seen: list[int] = []
        for t in threads:
            t.start()
        while True:
            running = any(t.is_alive() for t in threads)
            batch = reader.read_all(after=seen[-1] if seen else 0, limit=37)
            seen.extend(e.seq for e in batch)
            if not running and not batch:
                break
        assert seen == list(range(1, 401))

    def test_a_writer_killed_mid_batch_leaves_whole_batches_only(self):
        """A process's memory dies with it; what remains to promise is that a batch failing part-way (an event
        id recorded already, next to a new one) leaves nothing of itself."""
        ledger = open_ledger(self.url)
        first = NewEvent(event=_lesson(1))
        ledger.append("deployment:k", 0, [first])
        with pytest.raises(LedgerError, match="partly recorded"):
            ledger.append("deployment:k", 1, [NewEvent(event=_lesson(2)), first])
        assert [e.version for e in ledger.read_stream("deployment:k")] == [1]
        assert ledger.verify().ok


def test_read_only_refuses_to_append():
    url = f"memory://{uuid.uuid4().hex}"
    with pytest.raises(Exception, match="read-only"):
        open_ledger(url, read_only=True).append("deployment:a", 0, [_lesson(1)])
    forget_store(url)
