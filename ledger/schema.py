"""The events table, its immutability triggers, and the engines that reach it (no `Ledger` here).

`sqlite_engine(url, read_only)` builds a SQLite engine (WAL, synchronous=FULL, busy timeout; or, read-only,
a `mode=ro` / `immutable=1` URI that never writes); `has_schema` looks without creating anything;
`create_schema` creates the table and its triggers once (the recorder calls it on the first append).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import event as sa_event
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel

from ledger.errors import LedgerUnavailable

BUSY_TIMEOUT_S = 30.0
# PostgreSQL writers' lock: a transaction advisory lock (key space of two int4 keys) on the events table's oid
WRITE_LOCK_SQL = "SELECT pg_advisory_xact_lock(7345903, to_regclass('events')::oid::int)"


class EventsRow(SQLModel, table=True):
    """The event envelope. `seq` is assigned by the recorder under the write lock (never by the database)."""

    __tablename__ = "events"
    __table_args__ = (sa.UniqueConstraint("stream_id", "version", name="events_stream_version_key"),)

    seq: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False))
    stream_id: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    version: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    event_id: str = Field(sa_column=sa.Column(sa.Text, nullable=False, unique=True))
    type: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    payload: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    recorded_at: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    prev_hash: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    hash: str = Field(sa_column=sa.Column(sa.Text, nullable=False))


EVENTS = EventsRow.__table__
COLS = ("seq", "stream_id", "version", "event_id", "type", "payload", "recorded_at", "prev_hash", "hash")
SELECT_ALL = f"SELECT {', '.join(COLS)} FROM events"

SQLITE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'ledger events are immutable: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'ledger events are immutable: DELETE refused'); END",
)
PG_TRIGGERS = (
    "CREATE OR REPLACE FUNCTION events_immutable() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN RAISE EXCEPTION 'ledger events are immutable: %% refused', TG_OP; END $$",
    "CREATE OR REPLACE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events "
    "FOR EACH ROW EXECUTE FUNCTION events_immutable()",
    "CREATE OR REPLACE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
    "FOR EACH STATEMENT EXECUTE FUNCTION events_immutable()",
)
# the immutability triggers `verify()` requires on each dialect (promise 3)
REQUIRED_TRIGGERS = {
    "sqlite": ("events_no_update", "events_no_delete"),
    "postgresql": ("events_no_update_delete", "events_no_truncate"),
}


def sqlite_engine(url, read_only: bool = False) -> Engine:
    db = url.database
    if db and db != ":memory:":
        if Path(db).exists() and Path(db).stat().st_size > 0:
            with open(db, "rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    raise LedgerUnavailable(f"{db} is not a SQLite database (corrupt or foreign file)")
    if read_only and db and db != ":memory:":
        uri = read_only_uri(Path(db))
        engine = sa.create_engine(url, creator=lambda: sqlite3.connect(
            uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False))
    else:
        engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False})

    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if not read_only:  # both write the file (a read-only connection reads the journal mode the file has)
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = FULL")
        cur.close()

    @sa_event.listens_for(engine, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get('sqlite_begin', 'IMMEDIATE')}")

    return engine


def read_only_uri(path: Path) -> str:
    """A SQLite URI that never writes: `mode=ro`; `immutable=1` where the folder cannot be written (a read-only
    copy: SQLite could not create the WAL index there) and no write-ahead log holds events the file lacks."""
    wal = Path(f"{path}-wal")
    quoted = quote(str(path.absolute()))
    if not os.access(path.parent, os.W_OK) and not (wal.exists() and wal.stat().st_size > 0):
        return f"file:{quoted}?immutable=1"
    return f"file:{quoted}?mode=ro"


def sqlite_file(engine: Engine) -> Path | None:
    db = engine.url.database
    return Path(db) if db and db != ":memory:" else None


def has_schema(engine: Engine) -> bool:
    """Whether the events table exists; never creates anything (a missing SQLite file stays missing)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT to_regclass('events')").scalar() is not None
    path = sqlite_file(engine)
    if path is not None and (not path.exists() or path.stat().st_size == 0):
        return False  # connecting would switch an empty file to WAL, i.e. write to it
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        return conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").first() is not None


def create_schema(engine: Engine) -> None:
    path = sqlite_file(engine) if engine.dialect.name == "sqlite" else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7345901)")  # concurrent first opens
            exists = conn.exec_driver_sql("SELECT to_regclass('events')").scalar()
            if exists is None:
                EVENTS.create(conn)
                for ddl in PG_TRIGGERS:
                    conn.exec_driver_sql(ddl)
        elif conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").first() is None:
            EVENTS.create(conn)
            for ddl in SQLITE_TRIGGERS:
                conn.exec_driver_sql(ddl)
