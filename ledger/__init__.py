"""The immutable, hash-chained event ledger (SQLite by default, PostgreSQL for teams).

Its public names are re-exported here; `recorder` holds the logic both databases share, `sqlite` / `postgres`
what differs (and the PostgreSQL roles), `schema` the table, `chain` the chain check, `guards` the check of the
store's own triggers, of the events table's definition and of what an append stored. Imports nothing above it.
"""

from ledger.errors import (ConcurrencyError, LedgerError, LedgerUnavailable, LedgerWriteError, StoreGuardError,
                           StoreRefused)
from ledger.events import NewEvent
from ledger.record import Checkpoint, Identity, RecordedEvent, VerifyResult
from ledger.recorder import Ledger, default_url, open_ledger

__all__ = [
    "Checkpoint", "ConcurrencyError", "Identity", "Ledger", "LedgerError", "LedgerUnavailable", "LedgerWriteError",
    "NewEvent", "RecordedEvent", "StoreGuardError", "StoreRefused", "VerifyResult", "default_url", "open_ledger",
]
