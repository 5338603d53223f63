"""The ledger's own errors."""

from __future__ import annotations


class LedgerError(Exception):
    """Raised when the ledger cannot do what was asked (base class of the ledger's own errors)."""


class ConcurrencyError(LedgerError):
    """Raised when `append` is called with an `expected_version` that is no longer the stream's version."""


class LedgerUnavailable(LedgerError):
    """Raised when the database URL is unsupported, the server cannot be reached or the file is not a ledger."""


class LedgerWriteError(LedgerUnavailable):
    """Raised when the database refuses a write (disk full, I/O error, read-only file); nothing was recorded."""
