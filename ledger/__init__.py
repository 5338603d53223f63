"""The immutable, hash-chained event ledger (SQLite by default, PostgreSQL for teams)."""

from ledger.events import NewEvent  # noqa: F401
from ledger.recorder import (  # noqa: F401
    Checkpoint,
    ConcurrencyError,
    Identity,
    Ledger,
    LedgerError,
    LedgerUnavailable,
    LedgerWriteError,
    VerifyResult,
    default_url,
    open_ledger,
)
from ledger.record import RecordedEvent  # noqa: F401
