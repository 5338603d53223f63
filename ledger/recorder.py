"""The recorder: one append-only, hash-chained table of events on SQLite or PostgreSQL.

Promises (each has a test in the shared contract suite, run on both dialects):

1. `append(stream, expected_version, events)` is atomic; a stale `expected_version` raises
   `ConcurrencyError` and writes nothing.
2. Global order (`seq`) equals commit order: writers are serialised (SQLite `BEGIN IMMEDIATE`;
   PostgreSQL an EXCLUSIVE table lock inside the append transaction) and the recorder assigns
   `seq = last + 1` under that lock, so a reader tailing `read_all(after=seq)` sees every event once.
3. `UNIQUE(event_id)`: re-appending an already recorded batch is a no-op returning the original seqs.
4. Rows are immutable: database triggers refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL).
5. Every row carries `prev_hash` and `hash`; `verify()` walks the chain and names the first bad seq;
   `head()` gives a checkpoint `(size, hash)` that `verify(against=...)` checks for truncation or rewrite.
   Limit: someone with superuser rights can rewrite the whole chain consistently; only a checkpoint
   kept elsewhere catches that.
6. SQLite runs in WAL mode with `synchronous=FULL` and a busy timeout: a process killed mid-append
   leaves the whole batch or nothing.
7. Opening never writes: the schema (table + triggers) is created by the first `append`, so read-only
   commands leave a database without one as it was (a missing SQLite file is not even created). A
   database that has the table but lacks a trigger is not repaired silently: `verify()` fails naming it.
8. A database error while writing (disk full, I/O error) is raised as `LedgerWriteError` naming the
   database's own error; the batch is not recorded.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import sqlalchemy as sa
from sqlalchemy import event as sa_event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError
from sqlmodel import Field, SQLModel

from ledger.canonical import GENESIS_HASH, chain_hash, dumps, loads
from ledger.events import Event, NewEvent
from ledger.record import RecordedEvent

BUSY_TIMEOUT_S = 30.0


class LedgerError(Exception):
    """Raised when the ledger cannot do what was asked (base class of the ledger's own errors)."""


class ConcurrencyError(LedgerError):
    """Raised when `append` is called with an `expected_version` that is no longer the stream's version."""


class LedgerUnavailable(LedgerError):
    """Raised when the database URL is unsupported, the server cannot be reached or the file is not a ledger."""


class LedgerWriteError(LedgerUnavailable):
    """Raised when the database refuses a write (disk full, I/O error, read-only file); nothing was recorded."""


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
_COLS = ("seq", "stream_id", "version", "event_id", "type", "payload", "recorded_at", "prev_hash", "hash")
_SELECT = f"SELECT {', '.join(_COLS)} FROM events"

_SQLITE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'ledger events are immutable: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'ledger events are immutable: DELETE refused'); END",
)
_PG_TRIGGERS = (
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
class VerifyResult:
    ok: bool
    first_bad_seq: int | None = None
    reason: str = ""
    checked: int = 0
    missing_triggers: tuple[str, ...] = ()  # immutability triggers the database lacks (then ok is False)


def _new_event_id() -> str:
    """A random (version 4) UUID, formatted without the uuid module's overhead."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _utcnow() -> str:
    """UTC now as ISO-8601 with microseconds and a Z (the exact text that is hashed)."""
    now = time.time()
    seconds = int(now)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{int((now - seconds) * 1e6):06d}Z"


def _first_line(exc: BaseException) -> str:
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    line = text[0] if text else type(inner).__name__
    code = getattr(inner, "sqlite_errorname", None) or getattr(inner, "sqlstate", None)
    return f"{line} ({code})" if code and str(code) not in line else line


def _safe_close(cur) -> None:
    try:
        cur.close()
    except Exception:  # the connection is gone already; the caller reports the original error
        pass


def _row_to_event(row: Sequence) -> RecordedEvent:
    seq, stream_id, version, event_id, type_, payload, recorded_at, prev_hash, digest = row
    return RecordedEvent(int(seq), stream_id, int(version), event_id, type_, loads(payload), recorded_at, prev_hash, digest)


class Ledger:
    """An open ledger. Create with `open_ledger(url)`."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url
        self.dialect = engine.dialect.name
        self._lock = threading.Lock()
        self._raw = None
        self._mark = "?" if self.dialect == "sqlite" else "%s"
        marks = ",".join([self._mark] * len(_COLS))
        self._sql_insert = f"INSERT INTO events ({', '.join(_COLS)}) VALUES ({marks})"
        self._sql_begin = "BEGIN IMMEDIATE" if self.dialect == "sqlite" else "LOCK TABLE events IN EXCLUSIVE MODE"
        self._schema_ready = False  # set by open_ledger; the first append creates the schema when False
        self._sql_state = (
            f"SELECT (SELECT MAX(version) FROM events WHERE stream_id = {self._mark}), "
            "(SELECT seq FROM events ORDER BY seq DESC LIMIT 1), (SELECT hash FROM events ORDER BY seq DESC LIMIT 1)"
        )

    # --- writing ------------------------------------------------------------------------------------

    def append(self, stream_id: str, expected_version: int, events: Iterable[NewEvent | Event]) -> list[int]:
        """Append `events` to `stream_id` if its version is still `expected_version`; return their seqs.

        All or nothing. Re-appending a batch whose event ids are all recorded already returns the
        original seqs and writes nothing (idempotent retry). The hot path runs on the driver's own
        connection with prepared SQL: one lookup, one executemany, one commit.
        """
        # every event field is a JSON-native value (str, number, bool, None, list, dict), so the validated
        # field dict is the payload as it is; canonical JSON sorts it
        encoded = [
            (e.event_id, e.event.type_name, dumps(e.event.__dict__))
            if isinstance(e, NewEvent)
            else (_new_event_id(), e.type_name, dumps(e.__dict__))
            for e in events
        ]
        if not encoded:
            return []
        ids = [eid for eid, _, _ in encoded]
        dbapi = self.engine.dialect.dbapi
        with self._lock:
            if not self._schema_ready:
                self._create_schema()
            conn = self._writer()
            cur = conn.cursor()
            try:
                cur.execute(self._sql_begin)
                cur.execute(self._sql_state, (stream_id,))
                current, seq, prev = cur.fetchone()
                current, seq, prev = int(current or 0), int(seq or 0), prev or GENESIS_HASH
                if current != expected_version:
                    conn.rollback()
                    already = self._recorded_seqs(conn, ids)
                    if already is not None:
                        return already
                    raise ConcurrencyError(
                        f"stream {stream_id} is at version {current}, not the expected {expected_version}"
                    )
                now = _utcnow()
                rows = []
                for version, (eid, type_, payload) in enumerate(encoded, start=expected_version + 1):
                    seq += 1
                    digest = chain_hash(prev, seq, stream_id, version, eid, type_, payload, now)
                    rows.append((seq, stream_id, version, eid, type_, payload, now, prev, digest))
                    prev = digest
                if len(rows) == 1:
                    cur.execute(self._sql_insert, rows[0])
                else:
                    cur.executemany(self._sql_insert, rows)
                conn.commit()
                return [r[0] for r in rows]
            except dbapi.IntegrityError as e:
                conn.rollback()
                already = self._recorded_seqs(conn, ids)
                if already is not None:
                    return already
                raise ConcurrencyError(f"stream {stream_id} moved past version {expected_version}: {_first_line(e)}") from e
            except dbapi.Error as e:
                # the cursor first: once the connection is dropped, closing it would raise "Cannot operate on
                # a closed database" and hide the database's own error (disk full, I/O)
                _safe_close(cur)
                _safe_rollback(conn)
                self._drop_writer()
                raise LedgerWriteError(f"could not write to the ledger: {_first_line(e)}; nothing was recorded") from e
            except BaseException:
                _safe_rollback(conn)
                raise
            finally:
                _safe_close(cur)

    def _recorded_seqs(self, conn, ids: list[str]) -> list[int] | None:
        """Seqs of `ids` if every one is recorded already (an idempotent retry); None if none is.

        A batch of which only a part is recorded cannot come from a retry: that is an error."""
        cur = conn.cursor()
        try:
            marks = ",".join([self._mark] * len(ids))
            cur.execute(f"SELECT event_id, seq FROM events WHERE event_id IN ({marks})", ids)
            found = dict(cur.fetchall())
        finally:
            cur.close()
            conn.rollback()
        if not found:
            return None
        if len(found) != len(ids):
            raise LedgerError(f"batch is partly recorded already ({len(found)} of {len(ids)} event ids)")
        return [int(found[i]) for i in ids]

    def _create_schema(self) -> None:
        try:
            _create_schema(self.engine)
        except DBAPIError as e:
            raise LedgerWriteError(f"could not create the ledger's schema: {_first_line(e)}") from e
        self._schema_ready = True

    def has_schema(self) -> bool:
        """Whether the events table exists (without creating anything)."""
        if not self._schema_ready:
            self._schema_ready = _has_schema(self.engine)
        return self._schema_ready

    def missing_triggers(self) -> tuple[str, ...]:
        """The immutability triggers (REQUIRED_TRIGGERS) the events table lacks; () for a ledger without one."""
        if not self.has_schema():
            return ()
        with self._read() as conn:
            if self.dialect == "postgresql":
                rows = conn.execute(sa.text(
                    "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass('events') AND NOT tgisinternal")).all()
            else:
                rows = conn.execute(sa.text(
                    "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'")).all()
        present = {r[0] for r in rows}
        return tuple(t for t in REQUIRED_TRIGGERS.get(self.dialect, ()) if t not in present)

    def _writer(self):
        """The driver connection appends run on, kept open (SQLite: autocommit mode with explicit BEGIN)."""
        if self._raw is None:
            self._raw = self.engine.raw_connection()
        return self._raw.driver_connection

    def _drop_writer(self) -> None:
        if self._raw is not None:
            try:
                self._raw.invalidate()
            finally:
                self._raw = None

    # --- reading ------------------------------------------------------------------------------------

    def read_stream(self, stream_id: str, after_version: int = 0) -> list[RecordedEvent]:
        if not self.has_schema():
            return []
        return self._query(
            f"{_SELECT} WHERE stream_id = :s AND version > :v ORDER BY version", {"s": stream_id, "v": after_version}
        )

    def read_all(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
        if not self.has_schema():
            return []
        sql = f"{_SELECT} WHERE seq > :a ORDER BY seq"
        params: dict = {"a": after}
        if limit is not None:
            sql += " LIMIT :n"
            params["n"] = int(limit)
        return self._query(sql, params)

    def stream_version(self, stream_id: str) -> int:
        if not self.has_schema():
            return 0
        with self._read() as conn:
            v = conn.execute(sa.text("SELECT MAX(version) FROM events WHERE stream_id = :s"), {"s": stream_id}).scalar()
        return int(v or 0)

    def streams(self, prefix: str = "") -> list[str]:
        if not self.has_schema():
            return []
        with self._read() as conn:
            rows = conn.execute(
                sa.text("SELECT stream_id, MIN(seq) AS first FROM events WHERE stream_id LIKE :p GROUP BY stream_id ORDER BY first"),
                {"p": prefix.replace("%", r"\%") + "%"},
            ).all()
        return [r[0] for r in rows]

    def head(self) -> Checkpoint:
        if not self.has_schema():
            return Checkpoint(0, GENESIS_HASH)
        with self._read() as conn:
            row = conn.execute(sa.text("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")).first()
        return Checkpoint(int(row[0]), row[1]) if row else Checkpoint(0, GENESIS_HASH)

    def _query(self, sql: str, params: dict) -> list[RecordedEvent]:
        try:
            with self._read() as conn:
                return [_row_to_event(r) for r in conn.execute(sa.text(sql), params)]
        except OperationalError as e:
            raise LedgerUnavailable(f"could not read the ledger: {_first_line(e)}") from e

    def _read(self):
        return self.engine.connect().execution_options(sqlite_begin="DEFERRED")

    def _raw_chunks(self, chunk: int = 20000) -> Iterator[list[tuple]]:
        """Every row in seq order, in chunks, straight from the driver (no per-row SQLAlchemy processing)."""
        if not self.has_schema():
            return
        raw = self.engine.raw_connection()
        try:
            cur = raw.driver_connection.cursor()
            cur.execute(f"{_SELECT} ORDER BY seq")
            while rows := cur.fetchmany(chunk):
                yield rows
            cur.close()
        finally:
            raw.rollback()
            raw.close()

    # --- verification -------------------------------------------------------------------------------

    def verify(self, against: Checkpoint | str | None = None) -> VerifyResult:
        """Walk the whole chain; return the first seq whose hash, link or position is wrong."""
        if isinstance(against, str):
            against = Checkpoint.parse(against)
        prev, expect_seq = GENESIS_HASH, 1
        checkpoint_hash, checkpoint_seq = None, against.size if against is not None else -1
        link = chain_hash
        try:
            for rows in self._raw_chunks():
                for seq, stream_id, version, event_id, type_, payload, recorded_at, prev_hash, digest in rows:
                    if seq != expect_seq:
                        return VerifyResult(False, expect_seq, f"seq {expect_seq} is missing (found {seq} next)",
                                            expect_seq - 1)
                    if prev_hash != prev:
                        return VerifyResult(False, seq, "prev_hash does not link to the previous event", seq - 1)
                    if link(prev, seq, stream_id, version, event_id, type_, payload, recorded_at) != digest:
                        return VerifyResult(False, seq, "hash does not match the row's contents (row edited)", seq - 1)
                    if seq == checkpoint_seq:
                        checkpoint_hash = digest
                    prev = digest
                    expect_seq += 1
        except self.engine.dialect.dbapi.Error as e:
            raise LedgerUnavailable(f"could not read the ledger: {_first_line(e)}") from e
        n = expect_seq - 1
        missing = self.missing_triggers()
        if against is not None and against.size > 0:
            if n < against.size:
                return VerifyResult(False, n + 1, f"ledger holds {n} events, checkpoint says {against.size}: truncated",
                                    n, missing)
            if checkpoint_hash != against.hash:
                return VerifyResult(
                    False, against.size, f"event {against.size} differs from the checkpoint: history rewritten", n,
                    missing,
                )
        if missing:
            return VerifyResult(False, None, f"immutability trigger {', '.join(missing)} is missing: rows can be "
                                             "rewritten", n, missing)
        return VerifyResult(True, None, "intact", n)

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        self.engine.dispose()


def _safe_rollback(conn) -> None:
    try:
        conn.rollback()
    except Exception:  # the connection may be gone already; the caller reports the original error
        pass


def _sqlite_engine(url) -> Engine:
    db = url.database
    if db and db != ":memory:":
        if Path(db).exists() and Path(db).stat().st_size > 0:
            with open(db, "rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    raise LedgerUnavailable(f"{db} is not a SQLite database (corrupt or foreign file)")
    engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False})

    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = FULL")
        cur.close()

    @sa_event.listens_for(engine, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get('sqlite_begin', 'IMMEDIATE')}")

    return engine


def _sqlite_file(engine: Engine) -> Path | None:
    db = engine.url.database
    return Path(db) if db and db != ":memory:" else None


def _has_schema(engine: Engine) -> bool:
    """Whether the events table exists; never creates anything (a missing SQLite file stays missing)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT to_regclass('events')").scalar() is not None
    path = _sqlite_file(engine)
    if path is not None and (not path.exists() or path.stat().st_size == 0):
        return False  # connecting would switch an empty file to WAL, i.e. write to it
    with engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
        return conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").first() is not None


def _create_schema(engine: Engine) -> None:
    path = _sqlite_file(engine) if engine.dialect.name == "sqlite" else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7345901)")  # concurrent first opens
            exists = conn.exec_driver_sql("SELECT to_regclass('events')").scalar()
            if exists is None:
                EVENTS.create(conn)
                for ddl in _PG_TRIGGERS:
                    conn.exec_driver_sql(ddl)
        elif conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").first() is None:
            EVENTS.create(conn)
            for ddl in _SQLITE_TRIGGERS:
                conn.exec_driver_sql(ddl)


def open_ledger(url: str, *, create: bool = False) -> Ledger:
    """Open the ledger at `url`: `sqlite:///path` or `postgresql+psycopg://...`.

    Nothing is written until the first append creates the schema, unless `create` asks for it now."""
    try:
        parsed = make_url(url)
    except ArgumentError as e:
        raise LedgerUnavailable(f"not a database URL: {url!r}") from e
    backend = parsed.get_backend_name()
    try:
        if backend == "sqlite":
            engine = _sqlite_engine(parsed)
        elif backend == "postgresql":
            if parsed.get_driver_name() not in ("psycopg",):
                parsed = parsed.set(drivername="postgresql+psycopg")
            engine = sa.create_engine(parsed, connect_args={"connect_timeout": 5})
        else:
            raise LedgerUnavailable(
                f"unsupported database URL scheme {parsed.drivername!r}: use sqlite:///PATH or postgresql+psycopg://..."
            )
        schema = _has_schema(engine)  # connects: an unreachable server or foreign file fails here
    except (OperationalError, DBAPIError) as e:
        where = parsed.render_as_string(hide_password=True)
        raise LedgerUnavailable(f"cannot open the ledger at {where}: {_first_line(e)}") from e
    except NoSuchModuleError as e:
        raise LedgerUnavailable(f"no driver for {parsed.drivername!r}") from e
    ledger = Ledger(engine, parsed.render_as_string(hide_password=False))
    ledger._schema_ready = schema
    if create and not schema:
        ledger._create_schema()
    return ledger


def default_url(workspace: str | os.PathLike | None = None) -> str:
    """`LEDGER_DB` if set, else SQLite at `<workspace>/.ledger/ledger.db` (workspace: arg, `LEDGER_HOME`, or cwd)."""
    if os.environ.get("LEDGER_DB"):
        return os.environ["LEDGER_DB"]
    ws = Path(workspace or os.environ.get("LEDGER_HOME") or os.getcwd()).resolve()
    return f"sqlite:///{ws / '.ledger' / 'ledger.db'}"
