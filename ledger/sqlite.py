"""The recorder's SQLite dialect (`SQLITE`): the engine, the immutability triggers, the schema, read-only opening.

A writable file runs in WAL mode with `synchronous=FULL` and a busy timeout, so a process killed mid-append
leaves the whole batch or nothing (promise 6 of `ledger.recorder`); writers serialise on `BEGIN IMMEDIATE`.
A read-only opening is a `mode=ro` URI (`immutable=1` in a folder nobody may write: a read-only copy) and
never writes to the file. The events table's definition (`definition`: its `sqlite_master.sql` and every index
on it) is compared with the same rows of a scratch install in memory (`installed_definition`): SQLite stores the
CREATE text as it was given, so the expected text is whatever SQLAlchemy emits for `ledger.schema.EVENTS` here,
never a copy that could drift. Imported by `ledger.recorder` (and tests that rebuild the triggers).
"""

from __future__ import annotations

import os
import re
import sqlite3
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import event as sa_event
from sqlalchemy.engine import URL, Connection, Engine

from ledger.errors import LedgerUnavailable
from ledger.schema import EVENTS, Dialect

BUSY_TIMEOUT_S = 30.0

SQLITE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'ledger events are immutable: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'ledger events are immutable: DELETE refused'); END",
)


def sqlite_engine(url: URL, read_only: bool = False) -> Engine:
    """An engine on the SQLite file of `url`; refuses (LedgerUnavailable) a file that is not a SQLite database."""
    db = url.database
    if db and db != ":memory:" and Path(db).exists() and Path(db).stat().st_size > 0:
        refuse_foreign_file(Path(db))
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
        # the recorder's reads ask for DEFERRED (execution option `sqlite_begin`); everything else is IMMEDIATE
        conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get('sqlite_begin', 'IMMEDIATE')}")

    return engine


def refuse_foreign_file(path: Path) -> None:
    """LedgerUnavailable unless `path` is a SQLite database, asked of SQLite itself on a connection that never
    writes. Never open(2)/close(2) the file from Python here: closing any descriptor of a file drops every POSIX
    lock this process holds on it, the SQLite connections' included, so a writer elsewhere could checkpoint and
    reset the WAL under this process's open readers (https://www.sqlite.org/howtocorrupt.html, 2.2). Seen as a
    tailing reader missing a writer's 200 events and then "database disk image is malformed", with the file intact
    (tests/integration/ledger_contract.py, the tailing-reader test, under load). SQLite's own close defers
    the close(2) while another connection of this process holds a lock on the same file."""
    conn = None
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True, timeout=BUSY_TIMEOUT_S)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        if "not a database" in str(e) or "malformed" in str(e):
            raise LedgerUnavailable(f"{path} is not a SQLite database (corrupt or foreign file)") from e
        raise
    finally:
        if conn is not None:
            conn.close()


def read_only_uri(path: Path) -> str:
    """A SQLite URI that never writes: `mode=ro`; `immutable=1` where the folder cannot be written (a read-only
    copy: SQLite could not create the WAL index there) and no write-ahead log holds events the file lacks."""
    wal = Path(f"{path}-wal")
    quoted = quote(str(path.absolute()))
    if not os.access(path.parent, os.W_OK) and not (wal.exists() and wal.stat().st_size > 0):
        return f"file:{quoted}?immutable=1"
    return f"file:{quoted}?mode=ro"


def sqlite_file(engine: Engine) -> Path | None:
    """The engine's database file (None in memory)."""
    db = engine.url.database
    return Path(db) if db and db != ":memory:" else None


def has_schema(engine: Engine) -> bool:
    """Whether the events table exists; never creates anything (a missing SQLite file stays missing)."""
    path = sqlite_file(engine)
    if path is not None and (not path.exists() or path.stat().st_size == 0):
        return False  # connecting would switch an empty file to WAL, i.e. write to it
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        return conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").first() is not None


def create_schema(engine: Engine) -> None:
    """The events table and its triggers, unless the table exists (the file's folder is created first)."""
    path = sqlite_file(engine)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    with engine.begin() as conn:
        if conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").first() is None:
            _install(conn)


def _install(conn: Connection) -> None:
    """The tool's DDL: the events table and its triggers (`create_schema`, and the scratch install in memory)."""
    EVENTS.create(conn)
    for ddl in SQLITE_TRIGGERS:
        conn.exec_driver_sql(ddl)


_TRIGGERS_SQL = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events' ORDER BY name"


@lru_cache(maxsize=1)
def _installed() -> tuple[tuple[str, str], ...]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE events (seq INTEGER)")
        for ddl in SQLITE_TRIGGERS:
            conn.execute(ddl)
        return tuple(conn.execute(_TRIGGERS_SQL).fetchall())
    finally:
        conn.close()


def installed() -> dict[str, str]:
    """The triggers `create_schema` installs, as SQLite stores them (`sqlite_master.sql`: read back from an
    install in memory, so SQLite's own rewriting of the text, `IF NOT EXISTS` dropped, is the same)."""
    return dict(_installed())


def triggers(conn: Connection) -> dict[str, tuple[str, str]]:
    """The events table's triggers -> ('O', stored SQL): SQLite has no disabled trigger, so every one fires."""
    return {name: ("O", sql or "") for name, sql in conn.execute(sa.text(_TRIGGERS_SQL))}


_DEFINITION_SQL = ("SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'events' AND type <> 'trigger' "
                   "ORDER BY type DESC, name")
# a table rebuilt and renamed to events is stored as CREATE TABLE "events" (SQLite quotes the new name): the same
# table, so the name's quotes are not a difference (what follows it is compared)
_RENAMED = re.compile(r"""^\s*CREATE\s+TABLE\s+(?:"events"|`events`|\[events\]|'events')""", re.IGNORECASE)
_AUTOINDEX = "(SQLite's own index of a PRIMARY KEY or UNIQUE constraint)"


def definition(conn: Connection) -> dict[str, str]:
    """The events table's `sqlite_master.sql` and every index on it (a UNIQUE or PRIMARY KEY's own index has no
    text): {"table events" | "index NAME": text}. Its triggers are `triggers`'."""
    return {f"{kind} {name}": _RENAMED.sub("CREATE TABLE events", sql) if sql else _AUTOINDEX
            for kind, name, sql in conn.execute(sa.text(_DEFINITION_SQL))}


@lru_cache(maxsize=1)
def _installed_definition() -> tuple[tuple[str, str], ...]:
    engine = sa.create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            _install(conn)
            return tuple(definition(conn).items())
    finally:
        engine.dispose()


def installed_definition(_engine: Engine | None = None) -> dict[str, str]:
    """`definition` of a scratch install of the tool's DDL (`_install`) in memory."""
    return dict(_installed_definition())


_UNIQUE = "UNIQUE constraint failed: "


def clash(exc: BaseException) -> tuple[str, ...] | None:
    """The events table's columns of a unique violation (SQLite: "UNIQUE constraint failed: events.stream_id,
    events.version"); None for any other error, or an index on an expression ("... failed: index 'NAME'")."""
    text = str(exc).strip()
    if getattr(exc, "sqlite_errorname", "SQLITE_CONSTRAINT_UNIQUE") not in (
            "SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY") or not text.startswith(_UNIQUE):
        return None
    columns = [c.strip() for c in text[len(_UNIQUE):].split(",")]
    if not all(c.startswith("events.") for c in columns):
        return None
    return tuple(c[len("events."):] for c in columns)


SQLITE = Dialect(
    name="sqlite",
    mark="?",
    begin_write="BEGIN IMMEDIATE",
    installed=installed,
    connect=sqlite_engine,
    has_schema=has_schema,
    create_schema=create_schema,
    triggers=triggers,
    definition=definition,
    installed_definition=installed_definition,
    clash=clash,
)
