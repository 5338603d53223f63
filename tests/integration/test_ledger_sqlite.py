"""The recorder contract on SQLite, plus SQLite-specific durability settings and bad-input handling."""

import sqlite3

import pytest

from ledger import LedgerUnavailable, open_ledger
from ledger.sqlite import SQLITE_TRIGGERS
from tests.integration.ledger_contract import LedgerContract


class TestSqliteLedger(LedgerContract):
    @pytest.fixture(autouse=True)
    def _fresh(self, tmp_path):
        self.path = tmp_path / ".ledger" / "ledger.db"
        self.url = f"sqlite:///{self.path}"

    def tamper(self, sql: str) -> None:
        conn = sqlite3.connect(self.path)
        conn.executescript(
            "DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;"
            f"{sql};"
        )
        for ddl in SQLITE_TRIGGERS:  # put them back, as PostgreSQL's tamper re-enables its own
            conn.execute(ddl)
        conn.close()


def test_sqlite_runs_in_wal_with_full_synchronous_and_a_busy_timeout(tmp_path):
    ledger = open_ledger(f"sqlite:///{tmp_path}/l.db")
    with ledger.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000


def test_a_file_that_is_not_a_database_is_refused_with_a_clear_error(tmp_path):
    bad = tmp_path / "ledger.db"
    bad.write_bytes(b"this is not sqlite at all" * 10)
    with pytest.raises(LedgerUnavailable, match="not a SQLite database"):
        open_ledger(f"sqlite:///{bad}")


def test_an_unknown_url_scheme_is_refused():
    with pytest.raises(LedgerUnavailable, match="unsupported database URL scheme"):
        open_ledger("mysql://root@localhost/test")
