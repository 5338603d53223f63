"""The recorder: one append-only, hash-chained table of events, the same logic on every database.

Promises (each has a test in the contract suite tests/integration/ledger_contract.py, run on both dialects):

1. `append(stream, expected_version, events)` is atomic; a stale `expected_version` raises
   `ConcurrencyError` and writes nothing. So does a unique violation on the table's own keys (seq,
   (stream_id, version), event_id: `ledger.schema.KEYS`), another writer's row in the same place; any other
   refusal by the database (a CHECK, an index or a trigger the tool does not install) raises `StoreRefused`
   quoting the database's line, never a version race.
2. Global order (`seq`) equals commit order: writers are serialised (the dialect's `begin_write`: SQLite
   `BEGIN IMMEDIATE`, PostgreSQL an advisory lock held to the commit) and the recorder assigns
   `seq = last + 1` under that lock, so a reader tailing `read_all(after=seq)` sees every event once.
3. `UNIQUE(event_id)`: re-appending an already recorded batch is a no-op returning the original seqs.
4. Rows are immutable: database triggers refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL).
5. Every row carries `prev_hash` and `hash`; `verify()` walks the chain and names the first bad seq;
   `head()` gives a checkpoint `(size, hash)` that `verify(against=...)` checks for truncation or rewrite.
   Limit: someone with superuser rights can rewrite the whole chain consistently; only a checkpoint
   kept elsewhere catches that.
6. A process killed mid-append leaves the whole batch or nothing (SQLite: WAL, `synchronous=FULL`).
7. Opening never writes: the schema (table + triggers) is created by the first `append`, so read-only
   commands leave a database without one as it was (a missing SQLite file is not even created). A
   database that has the table but lacks a trigger, or whose trigger is disabled, is not repaired
   silently: `verify()` fails naming it. `open_ledger(url, read_only=True)` never writes (SQLite: a
   `mode=ro` / `immutable=1` opening). On PostgreSQL a writer that could switch immutability off without
   being a superuser is refused (ledger.postgres: the roles).
8. A database error while writing (disk full, I/O error) is raised as `LedgerWriteError` naming the
   database's own error; the batch is not recorded.
9. An append checks, before its commit, that the database stored what it appended (the INSERT's row count, and
   the new rows' count, last seq and hash read back); a trigger or rule that swallowed or changed them raises
   `StoreGuardError` and nothing is recorded. `verify()` compares every trigger on the events table with the
   definition the dialect installs (ledger.guards) and names one that is altered or extra, and the rest of the
   table's definition (columns, constraints, indexes, PostgreSQL row-level security and policies) with a scratch
   install of the tool's DDL, naming each object that differs (its tests, on both databases:
   tests/integration/test_store_guards.py).

What differs between the databases is a `Dialect` (ledger.schema) in `ledger.sqlite` and `ledger.postgres`.
Imported through the `ledger` package (`open_ledger`, `Ledger`, `default_url`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError

from ledger.canonical import GENESIS_HASH
from ledger.chain import chain_batch, judge_chain, walk_chain
from ledger.errors import (ConcurrencyError, LedgerError, LedgerUnavailable, LedgerWriteError, StoreGuardError,
                           StoreRefused, first_line)
from ledger.events import Event, NewEvent
from ledger.guards import TriggerState, judge_definition, judge_triggers, stored_problem
from ledger.memory import SCHEME, MemoryLedger
from ledger.postgres import POSTGRESQL
from ledger.record import Checkpoint, Identity, ReadsEverything, RecordedEvent, VerifyResult, encode_batch
from ledger.schema import COLS, KEYS, SELECT_ALL, Dialect
from ledger.sqlite import SQLITE
from npu_kernels.settings import env_get

DIALECTS: dict[str, Dialect] = {"sqlite": SQLITE, "postgresql": POSTGRESQL}


def _safe_close(cur) -> None:
    try:
        cur.close()
    except Exception:  # the connection is gone already; the caller reports the original error
        pass


class Ledger(ReadsEverything):
    """An open ledger. Create with `open_ledger(url)`."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url
        self.dialect = engine.dialect.name  # "sqlite" | "postgresql"
        self._db: Dialect = DIALECTS[self.dialect]
        self._lock = threading.Lock()
        self._raw = None
        self._mark = self._db.mark
        marks = ",".join([self._mark] * len(COLS))
        self._sql_insert = f"INSERT INTO events ({', '.join(COLS)}) VALUES ({marks})"
        self._sql_begin = self._db.begin_write  # serialises writers up to the commit (promise 2)
        self._schema_ready = False  # set by open_ledger; the first append creates the schema when False
        self.read_only = False  # set by open_ledger(read_only=True): append refuses
        self._writer_checked = self._db.writer_problem is None  # PostgreSQL: the role is checked before a write
        self._installed_definition: dict[str, str] | None = None  # the scratch install's definition, once read
        self._sql_state = (
            f"SELECT (SELECT MAX(version) FROM events WHERE stream_id = {self._mark}), "
            "(SELECT seq FROM events ORDER BY seq DESC LIMIT 1), (SELECT hash FROM events ORDER BY seq DESC LIMIT 1)"
        )
        self._sql_stored = (  # what the append stored, read back before its commit (promise 9)
            f"SELECT (SELECT COUNT(*) FROM events WHERE seq >= {self._mark}), "
            "(SELECT seq FROM events ORDER BY seq DESC LIMIT 1), (SELECT hash FROM events ORDER BY seq DESC LIMIT 1)"
        )

    # --- writing ------------------------------------------------------------------------------------

    def append(self, stream_id: str, expected_version: int, events: Iterable[NewEvent | Event]) -> list[int]:
        """Append `events` to `stream_id` if its version is still `expected_version`; return their seqs.

        All or nothing. Re-appending a batch whose event ids are all recorded already returns the
        original seqs and writes nothing (idempotent retry). The hot path runs on the driver's own
        connection with prepared SQL: one lookup, one executemany, one commit.
        """
        return self._append(stream_id, expected_version, events)[0]

    def append_recorded(self, stream_id: str, expected_version: int,
                        events: Iterable[NewEvent | Event]) -> tuple[list[int], list[RecordedEvent] | None]:
        """`append`, returning (the seqs, the records as stored: the rows this append chained and, before its commit,
        checked the store holds, promise 9), so a caller folds them without reading them back; the records are None
        for an idempotent retry (the batch was recorded earlier: read it). The `all_events` cache is extended."""
        return self._append(stream_id, expected_version, events)

    def _append(self, stream_id: str, expected_version: int,
                events: Iterable[NewEvent | Event]) -> tuple[list[int], list[RecordedEvent] | None]:
        encoded = encode_batch(events)
        if not encoded:
            return [], []
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
                        return already, None
                    raise ConcurrencyError(
                        f"stream {stream_id} is at version {current}, not the expected {expected_version}"
                    )
                rows = chain_batch(stream_id, expected_version, seq, prev, encoded)
                if len(rows) == 1:
                    cur.execute(self._sql_insert, rows[0])
                else:
                    cur.executemany(self._sql_insert, rows)
                stored = cur.rowcount
                cur.execute(self._sql_stored, (rows[0][0],))
                problem = stored_problem(stored, rows, cur.fetchone())
                if problem:  # a trigger or rule swallowed (or changed) the rows: promise 9
                    raise StoreGuardError(f"{problem} (a trigger or rule on the events table interfered; run "
                                          "`ledger verify`); nothing was recorded")
                conn.commit()
                return [r[0] for r in rows], self.recorded(rows)
            except dbapi.IntegrityError as e:
                conn.rollback()
                already = self._recorded_seqs(conn, ids)
                if already is not None:
                    return already, None
                if self._db.clash(e) in KEYS:  # another writer's row where this batch goes: a version race
                    raise ConcurrencyError(
                        f"stream {stream_id} moved past version {expected_version}: {first_line(e)}") from e
                raise StoreRefused(  # a CHECK, an index or a trigger's RAISE: not a race, retrying cannot help
                    f"the database refused the append: {first_line(e)} (not the tool's own keys: a constraint, index "
                    "or trigger on the events table the tool does not install; run `ledger verify`); nothing was "
                    "recorded") from e
            except dbapi.Error as e:
                # the cursor first: once the connection is dropped, closing it would raise "Cannot operate on
                # a closed database" and hide the database's own error (disk full, I/O)
                _safe_close(cur)
                _safe_rollback(conn)
                self._drop_writer()
                raise LedgerWriteError(f"could not write to the ledger: {first_line(e)}; nothing was recorded") from e
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
        """Refuse to write as a role that could switch immutability off (PostgreSQL: ledger.postgres)."""
        assert self._db.writer_problem is not None
        try:
            problem = self._db.writer_problem(self.engine, schema_exists=self.has_schema())
        except DBAPIError as e:
            raise LedgerUnavailable(f"cannot check the role writing to the ledger: {first_line(e)}") from e
        if problem:
            raise LedgerWriteError(f"{problem}; nothing was recorded")
        self._writer_checked = True

    def _create_schema(self) -> None:
        try:
            self._db.create_schema(self.engine)
        except DBAPIError as e:
            raise LedgerWriteError(f"could not create the ledger's schema: {first_line(e)}") from e
        self._schema_ready = True

    def has_schema(self) -> bool:
        """Whether the events table exists (without creating anything)."""
        if not self._schema_ready:
            self._schema_ready = self._db.has_schema(self.engine)
        return self._schema_ready

    def trigger_state(self) -> TriggerState:
        """The events table's triggers against those the dialect installs (ledger.guards): missing, disabled
        (PostgreSQL `tgenabled` 'D' or 'R'), altered or extra; and the rest of its definition against a scratch
        install of the tool's DDL (`definition`: every column, constraint, index, policy... that differs). All
        empty for a ledger without a table."""
        if not self.has_schema():
            return TriggerState()
        try:
            with self._read() as conn:
                state = judge_triggers(self._db.installed(), self._db.triggers(conn))
                found = self._db.definition(conn)
            if self._installed_definition is None:  # the same for the life of the engine (one server, one version)
                self._installed_definition = self._db.installed_definition(self.engine)
        except DBAPIError as e:
            raise LedgerUnavailable(f"could not read the events table's definition: {first_line(e)}") from e
        return replace(state, definition=judge_definition(self._installed_definition, found))

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
                return [RecordedEvent.from_row(r) for r in conn.execute(sa.text(sql), params)]
        except OperationalError as e:
            raise LedgerUnavailable(f"could not read the ledger: {first_line(e)}") from e

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
        """Walk the whole chain; return the first seq whose hash, link or position is wrong (ledger.chain), else
        whether the ledger was truncated or rewritten since `against`, or lacks an immutability trigger."""
        if isinstance(against, str):
            against = Checkpoint.parse(against)
        try:
            broken, n, checkpoint_hash = walk_chain(self._raw_chunks(), against.size if against is not None else -1)
        except self.engine.dialect.dbapi.Error as e:
            raise LedgerUnavailable(f"could not read the ledger: {first_line(e)}") from e
        if broken is not None:
            return broken
        return judge_chain(n, checkpoint_hash, against, self.trigger_state())

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
    `read_only`: a SQLite file is opened so that nothing can write to it (ledger.sqlite.read_only_uri); on either
    dialect `append` refuses. `memory://NAME` is the in-process store of ledger.memory (tests of the verbs)."""
    if url.startswith(SCHEME):
        return MemoryLedger(url, read_only=read_only)  # type: ignore[return-value]  # the same public interface
    try:
        parsed = make_url(url)
    except ArgumentError as e:
        raise LedgerUnavailable(f"not a database URL: {url!r}") from e
    dialect = DIALECTS.get(parsed.get_backend_name())
    if dialect is None:
        raise LedgerUnavailable(
            f"unsupported database URL scheme {parsed.drivername!r}: use sqlite:///PATH or postgresql+psycopg://..."
        )
    try:
        engine = dialect.connect(parsed, read_only)
        parsed = engine.url  # PostgreSQL: through psycopg, whatever driver the URL named
        schema = dialect.has_schema(engine)  # connects: an unreachable server or foreign file fails here
    except (OperationalError, DBAPIError) as e:
        where = parsed.render_as_string(hide_password=True)
        raise LedgerUnavailable(f"cannot open the ledger at {where}: {first_line(e)}") from e
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
    if env_get("LEDGER_DB"):
        return env_get("LEDGER_DB")
    ws = Path(workspace or env_get("LEDGER_HOME") or os.getcwd()).resolve()
    return f"sqlite:///{ws / '.ledger' / 'ledger.db'}"
