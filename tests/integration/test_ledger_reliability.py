"""The recorder under real failures: a full database, dropped triggers, a database without a schema."""

import pytest

from ledger import LedgerError, open_ledger
from ledger.events import LessonRecorded
from tests.postgres import execute, needs_pg, schema_url


def test_a_full_sqlite_database_raises_a_ledger_error_naming_sqlite_full_and_records_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = open_ledger(url)
    ledger.append("deployment:a", 0, [LessonRecorded(text="fits")])
    conn = ledger._writer()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own limit: the next page allocation is SQLITE_FULL
    with pytest.raises(LedgerError, match=r"database or disk is full.*SQLITE_FULL") as caught:
        ledger.append("deployment:a", 1, [LessonRecorded(text="x" * 200_000)])
    assert "closed database" not in str(caught.value)
    again = open_ledger(url)
    assert [e.payload["text"] for e in again.read_all()] == ["fits"] and again.verify().ok
    assert ledger.append("deployment:a", 1, [LessonRecorded(text="after")]) == [2]  # a fresh connection writes


def test_reading_a_sqlite_ledger_without_a_schema_creates_nothing(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path in (empty, tmp_path / "absent" / "ledger.db"):
        ledger = open_ledger(f"sqlite:///{path}")
        assert ledger.read_all() == [] and ledger.streams() == [] and ledger.head().size == 0
        assert ledger.verify().ok
        ledger.close()
    assert empty.stat().st_size == 0 and not (tmp_path / "absent").exists()


def test_verify_fails_naming_a_dropped_sqlite_trigger_and_opening_does_not_recreate_it(tmp_path):
    import sqlite3

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_ledger(url).append("deployment:a", 0, [LessonRecorded(text="one")])
    conn = sqlite3.connect(tmp_path / "ledger.db")
    conn.execute("DROP TRIGGER events_no_update")
    conn.close()
    result = open_ledger(url).verify()
    assert not result.ok and result.missing_triggers == ("events_no_update",)
    assert open_ledger(url).verify().missing_triggers == ("events_no_update",)  # still missing: not repaired


def _has_events_table(schema: str) -> bool:
    return execute("SELECT to_regclass(%s)", (f"{schema}.events",))[0][0] is not None


@needs_pg
def test_verify_fails_naming_a_dropped_postgres_trigger(pg_schema):
    ledger = open_ledger(schema_url(pg_schema))
    ledger.append("deployment:a", 0, [LessonRecorded(text="one")])
    execute(f"DROP TRIGGER events_no_truncate ON {pg_schema}.events")
    result = open_ledger(schema_url(pg_schema)).verify()
    assert not result.ok and result.missing_triggers == ("events_no_truncate",)
    assert "events_no_truncate" in result.reason


@needs_pg
def test_reading_a_postgres_database_without_a_schema_creates_nothing(pg_schema):
    ledger = open_ledger(schema_url(pg_schema))
    assert ledger.read_all() == [] and ledger.head().size == 0 and ledger.verify().ok
    assert not _has_events_table(pg_schema)
    ledger.append("deployment:a", 0, [LessonRecorded(text="first write creates it")])
    assert _has_events_table(pg_schema) and ledger.verify().ok
