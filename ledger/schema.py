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
    # why the connected role must not write (None: it may), given whether the table exists; None: no check
    writer_problem: Callable[..., str | None] | None = None
