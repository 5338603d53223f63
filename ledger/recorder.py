"""The recorder: one append-only, hash-chained table of events on SQLite or PostgreSQL.

Promises (each has a test in the shared contract suite, run on both dialects):

1. `append(stream, expected_version, events)` is atomic; a stale `expected_version` raises
   `ConcurrencyError` and writes nothing.
2. Global order (`seq`) equals commit order: writers are serialised (SQLite `BEGIN IMMEDIATE`;
   PostgreSQL a transaction advisory lock keyed by the events table, taken first in the append
   transaction and held to its commit) and the recorder assigns
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
   database that has the table but lacks a trigger, or whose trigger is disabled, is not repaired
   silently: `verify()` fails naming it. `open_ledger(url, read_only=True)` opens a SQLite file with
   `mode=ro` (and `immutable=1` in a folder nobody may write, a read-only copy), never writing to it.
   On PostgreSQL a writer that could switch immutability off without being a superuser is refused
   (ledger.postgres: the roles).
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
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError

from ledger.canonical import GENESIS_HASH, chain_hash, dumps, loads
from ledger.errors import ConcurrencyError, LedgerError, LedgerUnavailable, LedgerWriteError  # noqa: F401
from ledger.events import Event, NewEvent
from ledger.record import RecordedEvent
from ledger.schema import (  # noqa: F401 - EVENTS, BUSY_TIMEOUT_S: the recorder's public names before the split
    BUSY_TIMEOUT_S,
    COLS,
    EVENTS,
    REQUIRED_TRIGGERS,
    SELECT_ALL,
    SQLITE_TRIGGERS,
    WRITE_LOCK_SQL,
    create_schema,
    has_schema,
    sqlite_engine,
)

_SQLITE_TRIGGERS = SQLITE_TRIGGERS  # the name tests/integration/test_ledger_sqlite.py imports
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
        marks = ",".join([self._mark] * len(COLS))
        self._sql_insert = f"INSERT INTO events ({', '.join(COLS)}) VALUES ({marks})"
        # PostgreSQL serialises writers on a transaction advisory lock keyed by the events table (a role granted
        # SELECT and INSERT only may not take an EXCLUSIVE table lock; ledger.postgres: the roles)
        self._sql_begin = "BEGIN IMMEDIATE" if self.dialect == "sqlite" else WRITE_LOCK_SQL
        self._schema_ready = False  # set by open_ledger; the first append creates the schema when False
        self.read_only = False  # set by open_ledger(read_only=True): append refuses
        self._writer_checked = self.dialect != "postgresql"  # PostgreSQL: the role is checked before a write
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
        if self.read_only:
            raise LedgerWriteError(f"the ledger at {self.where} was opened read-only; nothing was recorded")
        with self._lock:
            if not self._writer_checked:
                self._check_writer()
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

    @property
    def where(self) -> str:
        """The database URL without its password (for messages)."""
        return self.engine.url.render_as_string(hide_password=True)

    def _check_writer(self) -> None:
        """Refuse to write as a PostgreSQL role that could switch immutability off (ledger.postgres)."""
        from ledger.postgres import writer_problem

        try:
            problem = writer_problem(self.engine, schema_exists=self.has_schema())
        except DBAPIError as e:
            raise LedgerUnavailable(f"cannot check the role writing to the ledger: {_first_line(e)}") from e
        if problem:
            raise LedgerWriteError(f"{problem}; nothing was recorded")
        self._writer_checked = True

    def _create_schema(self) -> None:
        try:
            create_schema(self.engine)
        except DBAPIError as e:
            raise LedgerWriteError(f"could not create the ledger's schema: {_first_line(e)}") from e
        self._schema_ready = True

    def has_schema(self) -> bool:
        """Whether the events table exists (without creating anything)."""
        if not self._schema_ready:
            self._schema_ready = has_schema(self.engine)
        return self._schema_ready

    def trigger_state(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(missing, disabled): the immutability triggers (REQUIRED_TRIGGERS) the events table lacks, and those
        it has but that do not fire (PostgreSQL `tgenabled` 'D', or 'R': replica sessions only); ((), ()) for a
        ledger without a table."""
        if not self.has_schema():
            return (), ()
        with self._read() as conn:
            if self.dialect == "postgresql":
                rows = conn.execute(sa.text(
                    "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = to_regclass('events') "
                    "AND NOT tgisinternal")).all()
            else:
                rows = conn.execute(sa.text(
                    "SELECT name, 'O' FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'")).all()
        state = {r[0]: str(r[1]) for r in rows}
        required = REQUIRED_TRIGGERS.get(self.dialect, ())
        return (tuple(t for t in required if t not in state),
                tuple(t for t in required if state.get(t) in ("D", "R")))

    def missing_triggers(self) -> tuple[str, ...]:
        """The immutability triggers (REQUIRED_TRIGGERS) the events table lacks; () for a ledger without one."""
        return self.trigger_state()[0]

    def identity(self) -> Identity | None:
        """The ledger's identity: its first event (None while it has none); see `Identity`."""
        if not self.has_schema():
            return None
        with self._read() as conn:
            row = conn.execute(sa.text("SELECT event_id, hash FROM events WHERE seq = 1")).first()
        return Identity(row[0], row[1]) if row else None

    def hashes_at(self, seqs: Iterable[int]) -> dict[int, str]:
        """{seq: hash} of the events at `seqs` that exist."""
        wanted = sorted({int(s) for s in seqs if int(s) > 0})
        if not wanted or not self.has_schema():
            return {}
        with self._read() as conn:
            rows = conn.execute(sa.text("SELECT seq, hash FROM events WHERE seq IN :seqs")
                                .bindparams(sa.bindparam("seqs", expanding=True)), {"seqs": wanted}).all()
        return {int(seq): digest for seq, digest in rows}

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
            f"{SELECT_ALL} WHERE stream_id = :s AND version > :v ORDER BY version", {"s": stream_id, "v": after_version}
        )

    def read_all(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
        if not self.has_schema():
            return []
        sql = f"{SELECT_ALL} WHERE seq > :a ORDER BY seq"
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
            cur.execute(f"{SELECT_ALL} ORDER BY seq")
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
        missing, disabled = self.trigger_state()
        if against is not None and against.size > 0:
            if n < against.size:
                return VerifyResult(False, n + 1, f"ledger holds {n} events, checkpoint says {against.size}: truncated",
                                    n, missing, disabled)
            if checkpoint_hash != against.hash:
                return VerifyResult(
                    False, against.size, f"event {against.size} differs from the checkpoint: history rewritten", n,
                    missing, disabled,
                )
        if missing:
            return VerifyResult(False, None, f"immutability trigger {', '.join(missing)} is missing: rows can be "
                                             "rewritten", n, missing, disabled)
        if disabled:
            return VerifyResult(False, None, f"immutability trigger {', '.join(disabled)} is disabled: rows can be "
                                             "rewritten", n, missing, disabled)
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


def open_ledger(url: str, *, create: bool = False, read_only: bool = False) -> Ledger:
    """Open the ledger at `url`: `sqlite:///path` or `postgresql+psycopg://...`.

    Nothing is written until the first append creates the schema, unless `create` asks for it now.
    `read_only`: a SQLite file is opened so that nothing can write to it (`_read_only_uri`); on either
    dialect `append` refuses."""
    try:
        parsed = make_url(url)
    except ArgumentError as e:
        raise LedgerUnavailable(f"not a database URL: {url!r}") from e
    backend = parsed.get_backend_name()
    try:
        if backend == "sqlite":
            engine = sqlite_engine(parsed, read_only)
        elif backend == "postgresql":
            if parsed.get_driver_name() not in ("psycopg",):
                parsed = parsed.set(drivername="postgresql+psycopg")
            engine = sa.create_engine(parsed, connect_args={"connect_timeout": 5})
        else:
            raise LedgerUnavailable(
                f"unsupported database URL scheme {parsed.drivername!r}: use sqlite:///PATH or postgresql+psycopg://..."
            )
        schema = has_schema(engine)  # connects: an unreachable server or foreign file fails here
    except (OperationalError, DBAPIError) as e:
        where = parsed.render_as_string(hide_password=True)
        raise LedgerUnavailable(f"cannot open the ledger at {where}: {_first_line(e)}") from e
    except NoSuchModuleError as e:
        raise LedgerUnavailable(f"no driver for {parsed.drivername!r}") from e
    ledger = Ledger(engine, parsed.render_as_string(hide_password=False))
    ledger._schema_ready = schema
    ledger.read_only = read_only
    if create and not schema:
        if not ledger._writer_checked:
            ledger._check_writer()  # PostgreSQL: a non-superuser would own the table (ledger.postgres)
        ledger._create_schema()
    return ledger


def default_url(workspace: str | os.PathLike | None = None) -> str:
    """`LEDGER_DB` if set, else SQLite at `<workspace>/.ledger/ledger.db` (workspace: arg, `LEDGER_HOME`, or cwd)."""
    if os.environ.get("LEDGER_DB"):
        return os.environ["LEDGER_DB"]
    ws = Path(workspace or os.environ.get("LEDGER_HOME") or os.getcwd()).resolve()
    return f"sqlite:///{ws / '.ledger' / 'ledger.db'}"
