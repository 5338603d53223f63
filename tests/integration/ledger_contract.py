"""The recorder's promises (docs/design.md "The ledger"), as one suite run against every backend.

`LedgerContract` is not collected on its own: `test_ledger_sqlite.py`, `test_ledger_postgres.py` and
`test_ledger_memory.py` subclass it and provide `url` (a fresh, empty ledger per test) and the ways a superuser
changes rows behind the recorder's back: `tamper(sql)` on a database (the SQL runs behind the immutability
triggers' back), which `edit_payload`, `delete_from` and `delete_seq` use; the in-memory store overrides those
three, and replaces the tests that need a second process with threads (see its module).
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger import Checkpoint, ConcurrencyError, NewEvent, open_ledger
from ledger.events import KernelVerified, LessonRecorded, PhaseStarted

WORKER = str(Path(__file__).with_name("ledger_worker.py"))


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, WORKER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lesson(i: int) -> LessonRecorded:
    return LessonRecorded(text=f"lesson {i}")


class LedgerContract:
    url: str

    def tamper(self, sql: str) -> None:  # pragma: no cover - provided by subclasses
        raise NotImplementedError

    def edit_payload(self, seq: int, payload: str) -> None:
        self.tamper(f"UPDATE events SET payload = '{payload}' WHERE seq = {seq}")

    def delete_from(self, seq: int) -> None:
        self.tamper(f"DELETE FROM events WHERE seq >= {seq}")

    def delete_seq(self, seq: int) -> None:
        self.tamper(f"DELETE FROM events WHERE seq = {seq}")

    def assert_rows_cannot_be_changed(self, ledger) -> None:
        import sqlalchemy as sa

        for sql in ("UPDATE events SET payload = '{}'", "DELETE FROM events"):
            with pytest.raises(sa.exc.DBAPIError, match="immutable"):
                with ledger.engine.begin() as conn:
                    conn.exec_driver_sql(sql)

    # --- promise 1: atomic expected-version append ---------------------------------------------------

    def test_append_returns_consecutive_seqs_and_reads_back_typed_events(self):
        ledger = open_ledger(self.url)
        seqs = ledger.append("deployment:a", 0, [PhaseStarted(phase=0, attempt=1), _lesson(1)])
        assert seqs == [1, 2]
        events = ledger.read_stream("deployment:a")
        assert [e.version for e in events] == [1, 2]
        assert events[0].event == PhaseStarted(phase=0, attempt=1)

    def test_append_recorded_returns_the_records_as_a_fresh_reader_reads_them_and_extends_the_cache(self):
        ledger = open_ledger(self.url)
        ledger.append("deployment:b", 0, [_lesson(0)])
        assert [e.seq for e in ledger.all_events()] == [1]  # the whole read: the cache starts
        batch = [NewEvent(event=PhaseStarted(phase=0, attempt=1)), NewEvent(event=_lesson(1))]
        seqs, records = ledger.append_recorded("deployment:a", 0, batch)
        assert seqs == [2, 3] and records == open_ledger(self.url).read_stream("deployment:a")
        assert records[0].event == PhaseStarted(phase=0, attempt=1) and records[1].hash
        assert ledger.all_events() == open_ledger(self.url).read_all()  # the cache holds the appended records
        assert ledger.append_recorded("deployment:a", 0, batch) == ([2, 3], None)  # a retry: recorded earlier

    def test_a_stale_expected_version_raises_and_writes_nothing(self):
        ledger = open_ledger(self.url)
        ledger.append("deployment:a", 0, [_lesson(1)])
        with pytest.raises(ConcurrencyError):
            ledger.append("deployment:a", 0, [_lesson(2), _lesson(3)])
        assert len(ledger.read_all()) == 1
        assert ledger.verify().ok

    def test_eight_processes_racing_for_the_same_version_exactly_one_wins(self, tmp_path):
        open_ledger(self.url, create=True)  # schema exists before the race
        go = tmp_path / "go"
        procs = [_spawn(self.url, "race", "deployment:race", str(go)) for _ in range(8)]
        time.sleep(1.0)
        go.touch()
        outs = [p.communicate(timeout=120)[0].strip() for p in procs]
        assert sorted(outs) == ["LOSE"] * 7 + ["WIN"], outs
        ledger = open_ledger(self.url)
        assert len(ledger.read_stream("deployment:race")) == 1
        assert ledger.verify().ok

    # --- promise 2: global order = commit order -------------------------------------------------------

    def test_two_writers_of_1000_events_never_interleave_inside_a_batch(self, tmp_path):
        open_ledger(self.url, create=True)
        go = tmp_path / "go"
        procs = [_spawn(self.url, "batches", f"deployment:w{i}", "50", "20", str(go)) for i in range(2)]
        time.sleep(1.0)
        go.touch()
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
        ledger = open_ledger(self.url)
        events = ledger.read_all()
        assert len(events) == 2000
        assert [e.seq for e in events] == list(range(1, 2001))
        for i in range(0, 2000, 20):  # every batch of 20 is one contiguous run of seqs from one stream
            assert len({e.stream_id for e in events[i : i + 20]}) == 1
        assert ledger.verify().ok

    def test_a_reader_tailing_while_writers_append_sees_every_seq_once(self, tmp_path):
        open_ledger(self.url, create=True)
        go = tmp_path / "go"
        procs = [_spawn(self.url, "batches", f"deployment:t{i}", "40", "5", str(go)) for i in range(2)]
        reader = open_ledger(self.url)
        seen: list[int] = []
        time.sleep(1.0)
        go.touch()
        while True:
            running = any(p.poll() is None for p in procs)
            batch = reader.read_all(after=seen[-1] if seen else 0, limit=37)
            seen.extend(e.seq for e in batch)
            if not running and not batch:
                break
        for p in procs:
            assert p.returncode == 0, p.stderr.read()
        assert seen == list(range(1, 401))

    def test_read_all_pages_in_global_order(self):
        ledger = open_ledger(self.url)
        for i in range(5):
            ledger.append(f"deployment:s{i % 2}", ledger.stream_version(f"deployment:s{i % 2}"), [_lesson(i)])
        page1 = ledger.read_all(limit=3)
        page2 = ledger.read_all(after=page1[-1].seq)
        assert [e.seq for e in page1 + page2] == [1, 2, 3, 4, 5]

    # --- promise 3: idempotency -----------------------------------------------------------------------

    def test_reappending_the_same_events_is_a_no_op_returning_the_original_seqs(self):
        ledger = open_ledger(self.url)
        batch = [NewEvent(event=_lesson(1)), NewEvent(event=_lesson(2))]
        first = ledger.append("deployment:a", 0, batch)
        again = ledger.append("deployment:a", 0, batch)
        assert first == again == [1, 2]
        assert len(ledger.read_all()) == 2

    # --- promise 4: immutability ----------------------------------------------------------------------

    def test_update_and_delete_are_refused_by_the_database(self):
        ledger = open_ledger(self.url)
        ledger.append("deployment:a", 0, [_lesson(1)])
        self.assert_rows_cannot_be_changed(ledger)
        assert ledger.verify().ok

    # --- promise 5: hash chain and checkpoints ----------------------------------------------------------

    def test_a_row_edited_behind_the_triggers_back_is_found_by_verify_with_its_seq(self):
        ledger = open_ledger(self.url)
        for i in range(5):
            ledger.append("deployment:a", i, [_lesson(i)])
        assert ledger.verify().ok
        self.edit_payload(3, '{"phase":null,"text":"forged"}')
        result = ledger.verify()
        assert not result.ok and result.first_bad_seq == 3
        assert "edited" in result.reason

    def test_truncation_since_a_checkpoint_is_detected(self):
        ledger = open_ledger(self.url)
        for i in range(4):
            ledger.append("deployment:a", i, [_lesson(i)])
        checkpoint = ledger.head()
        assert checkpoint.size == 4 and ledger.verify(against=checkpoint).ok
        self.delete_from(3)
        assert ledger.verify().ok  # the shortened chain is internally consistent ...
        result = ledger.verify(against=str(checkpoint))  # ... but the checkpoint catches it
        assert not result.ok and result.first_bad_seq == 3 and "truncated" in result.reason

    def test_a_rewritten_history_fails_the_checkpoint(self):
        ledger = open_ledger(self.url)
        ledger.append("deployment:a", 0, [_lesson(1), _lesson(2)])
        old = ledger.head()
        self.delete_seq(2)
        ledger.append("deployment:b", 0, [_lesson(9)])  # a different event takes seq 2
        result = ledger.verify(against=old)
        assert not result.ok and result.first_bad_seq == 2 and "rewritten" in result.reason
        assert Checkpoint.parse(str(old)) == old

    def test_non_finite_numbers_round_trip_as_evidence(self):
        ledger = open_ledger(self.url)
        ev = KernelVerified(
            kernel="gemm", shape={"M": 8, "K": 8, "N": 8}, contract="bf16-out-high", executor="emulated",
            verdict="FAIL", rtol=1.6e-2, atol=1.5e-3, mean_rel_L1=float("nan"), max_abs=float("inf"), nan_count=64,
        )
        ledger.append("deployment:a", 0, [ev])
        back = ledger.read_all()[0].event
        assert math.isnan(back.mean_rel_L1) and back.max_abs == float("inf") and back.nan_count == 64
        assert ledger.verify().ok

    # --- promise 6: durability ------------------------------------------------------------------------

    def test_a_writer_killed_mid_batch_leaves_whole_batches_only(self):
        open_ledger(self.url, create=True)
        proc = _spawn(self.url, "forever", "deployment:k", "500")
        committed = 0
        deadline = time.monotonic() + 60
        while committed < 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("COMMITTED"):
                committed = int(line.split()[1])
        time.sleep(0.05)  # let it get into the middle of the next batch
        proc.kill()
        proc.wait()
        ledger = open_ledger(self.url)
        n = len(ledger.read_stream("deployment:k"))
        assert committed >= 3 and n % 500 == 0 and n >= committed * 500
        assert ledger.verify().ok
        ledger.append("deployment:k", n, [_lesson(0)])  # and the ledger is writable afterwards
        assert ledger.verify().ok

