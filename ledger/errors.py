"""The ledger's own errors, and `first_line`: a driver error in the one line they quote. Anyone may import them."""

from __future__ import annotations


class LedgerError(Exception):
    """Raised when the ledger cannot do what was asked (base class of the ledger's own errors)."""


class ConcurrencyError(LedgerError):
    """Raised when `append` is called with an `expected_version` that is no longer the stream's version."""


class LedgerUnavailable(LedgerError):
    """Raised when the database URL is unsupported, the server cannot be reached or the file is not a ledger."""


class LedgerWriteError(LedgerUnavailable):
    """Raised when the database refuses a write (disk full, I/O error, read-only file); nothing was recorded."""


class StoreGuardError(LedgerWriteError):
    """Raised when an append finds the database did not store what it appended (a trigger or rule on the events
    table swallowed or changed the rows); the append is rolled back, nothing was recorded."""


class StoreRefused(LedgerWriteError):
    """Raised when the database refuses an append for a reason that is not another writer's row in the same place:
    a CHECK, a unique index or a trigger the tool did not install, a permission; nothing was recorded."""


def first_line(exc: BaseException) -> str:
    """The first line of a driver error (the DB-API error SQLAlchemy wraps), with its SQLite error name or
    PostgreSQL SQLSTATE when the line does not already say it."""
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    line = text[0] if text else type(inner).__name__
    code = getattr(inner, "sqlite_errorname", None) or getattr(inner, "sqlstate", None)
    return f"{line} ({code})" if code and str(code) not in line else line
