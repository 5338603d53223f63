"""The workspace's checkpoint record (ledger.checkpoints) and the chain check on small real SQLite ledgers."""

from __future__ import annotations

import json
import sqlite3

from ledger import Checkpoint, open_ledger
from ledger.canonical import chain_hash
from ledger.checkpoints import KEEP, RECORDED, CheckpointRecord, check_chain
from ledger.events import LessonRecorded
from ledger.sqlite import SQLITE_TRIGGERS


def _workspace(tmp_path, n: int):
    ws = tmp_path / "ws"
    url = f"sqlite:///{ws / '.ledger' / 'ledger.db'}"
    led = open_ledger(url)
    for i in range(n):
        led.append("deployment:a", i, [LessonRecorded(text=f"lesson {i}")])
    return ws, url, led


def _rewrite(db, seq: int, text: str) -> None:
    conn = sqlite3.connect(db)
    conn.executescript("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;")
    rows = conn.execute("SELECT seq, stream_id, version, event_id, type, payload, recorded_at FROM events "
                        "ORDER BY seq").fetchall()
    prev = "0" * 64
    for s, stream, version, event_id, type_, payload, at in rows:
        if s == seq:
            payload = json.dumps({"phase": None, "text": text}, separators=(",", ":"), sort_keys=True)
        digest = chain_hash(prev, s, stream, version, event_id, type_, payload, at)
        conn.execute("UPDATE events SET payload = ?, prev_hash = ?, hash = ? WHERE seq = ?", (payload, prev, digest, s))
        prev = digest
    for ddl in SQLITE_TRIGGERS:
        conn.execute(ddl)
    conn.commit()
    conn.close()


def test_a_rewrite_is_bounded_by_the_checkpoints_around_it_even_after_a_later_one(tmp_path):
    ws, url, led = _workspace(tmp_path, 10)
    record = CheckpointRecord.for_workspace(ws, url)
    assert record.location == ".ledger/ledger.db"
    hashes = led.hashes_at([3, 6, 10])
    for size in (3, 6, 10):
        record.remember(led.identity(), Checkpoint(size, hashes[size]))
    _rewrite(ws / ".ledger" / "ledger.db", 5, "forged")
    led.append("deployment:a", 10, [LessonRecorded(text="after")])
    record.remember(led.identity(), led.head())  # a later checkpoint, of the rewritten ledger
    report = check_chain(led, None, record)
    assert not report.ok and report.first_bad_seq == 4
    [problem] = report.problems
    assert problem.source == RECORDED and problem.checkpoint.size == 6 and problem.last_seq == 6
    assert "history rewritten in seq 4..6, or this is a copy of the ledger that diverged from the original after " \
           "seq 3" in problem.reason


def test_another_ledger_where_the_workspace_recorded_one_is_named(tmp_path):
    ws, url, led = _workspace(tmp_path, 3)
    record = CheckpointRecord.for_workspace(ws, url)
    record.remember(led.identity(), led.head())
    led.close()
    for suffix in ("", "-wal", "-shm"):
        (ws / ".ledger" / f"ledger.db{suffix}").unlink(missing_ok=True)
    other = open_ledger(url)
    other.append("deployment:b", 0, [LessonRecorded(text="a fresh ledger")] * 4)
    report = check_chain(other, None, record)
    assert not report.ok and report.first_bad_seq == 1
    assert "this is not the ledger this workspace recorded at .ledger/ledger.db" in report.problems[0].reason


def test_a_format_1_record_is_adopted_by_the_ledger_identity_even_after_the_workspace_moved(tmp_path):
    ws, url, led = _workspace(tmp_path, 4)
    old = tmp_path / "gone" / ".ledger" / "ledger.db"  # where the workspace was (no longer there)
    head = led.head()
    (ws / ".ledger" / "checkpoints.json").write_text(json.dumps({f"sqlite:///{old}": str(head),
                                                                 "sqlite:////elsewhere/x.db": str(head)}))
    record = CheckpointRecord.for_workspace(ws, url)
    assert check_chain(led, None, record).ok
    assert record.checkpoints(led.identity())[0] == [head]
    led.append("deployment:a", 4, [LessonRecorded(text="five")])
    assert record.remember(led.identity(), led.head())
    data = json.loads((ws / ".ledger" / "checkpoints.json").read_text())
    assert data["format"] == 2 and data["legacy"] == {"sqlite:////elsewhere/x.db": str(head)}
    assert data["ledgers"][led.identity().genesis]["checkpoints"] == [str(head), str(led.head())]


def test_the_record_keeps_a_bounded_number_of_checkpoints_oldest_thinned(tmp_path):
    ws, url, led = _workspace(tmp_path, 1)
    record = CheckpointRecord.for_workspace(ws, url)
    for size in range(1, KEEP + 2):
        record.remember(led.identity(), Checkpoint(size, f"{size:064x}"))
    kept = record.checkpoints(led.identity())[0]
    assert len(kept) <= KEEP and kept[0].size == 1 and kept[-1].size == KEEP + 1
    assert [c.size for c in kept[-KEEP // 4:]] == list(range(KEEP + 2 - KEEP // 4, KEEP + 2))
