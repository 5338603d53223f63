"""The events table (the same on every database) and `Dialect`, what the recorder needs of one database.

`ledger.sqlite.SQLITE` and `ledger.postgres.POSTGRESQL` are the two dialects; `ledger.recorder` chooses one
by the URL's scheme and uses nothing else of either. Imported by the ledger's own modules only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlmodel import Field, SQLModel


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
# the events table's own keys (its primary key and unique constraints) as column tuples: a unique violation on one
# of them is another writer's row in the same place (a version race); any other refusal is not (ledger.recorder)
KEYS = frozenset(tuple(c.name for c in con.columns) for con in EVENTS.constraints
                 if isinstance(con, (sa.PrimaryKeyConstraint, sa.UniqueConstraint)))


@dataclass(frozen=True)
class Dialect:
    """One database's specifics, as the recorder uses them (the promises are `ledger.recorder`'s)."""

    name: str  # SQLAlchemy's dialect name: "sqlite" | "postgresql"
    mark: str  # the driver's parameter marker in raw SQL ("?" | "%s")
    begin_write: str  # the statement that opens an append and serialises writers up to its commit (promise 2)
    installed: Callable[[], dict[str, str]]  # the immutability triggers it installs (promise 4): name -> definition
    connect: Callable[[URL, bool], Engine]  # (url, read_only) -> an engine; connects to nothing yet
    has_schema: Callable[[Engine], bool]  # whether the events table exists; creates nothing (promise 7)
    create_schema: Callable[[Engine], None]  # the table and its triggers, once
    # the events table's triggers as the database prints them: name -> (enabled flag, definition) (ledger.guards)
    triggers: Callable[[Connection], dict[str, tuple[str, str]]]
    # the rest of the events table's definition as the database prints it (ledger.guards.judge_definition):
    # object ("column type", "index i", "constraint c", ...) -> its definition
    definition: Callable[[Connection], dict[str, str]]
    # the same, read back from a scratch install of the tool's own DDL (SQLite in memory, PostgreSQL pg_temp)
    installed_definition: Callable[[Engine], dict[str, str]]
    # the columns of a unique violation as the driver reports it (None: not a unique violation, or on an expression)
    clash: Callable[[BaseException], tuple[str, ...] | None]
    # why the connected role must not write (None: it may), given whether the table exists; None: no check
    writer_problem: Callable[..., str | None] | None = None
