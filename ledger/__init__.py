"""The immutable, hash-chained event ledger (SQLite by default, PostgreSQL for teams).

Its public names are re-exported here; `recorder` holds the logic both databases share, `sqlite` / `postgres`
what differs (and the PostgreSQL roles), `schema` the table, `chain` the chain check. Imports nothing above it.
"""

from ledger.errors import ConcurrencyError, LedgerError, LedgerUnavailable, LedgerWriteError  # noqa: F401
from ledger.events import NewEvent  # noqa: F401
from ledger.record import Checkpoint, Identity, RecordedEvent, VerifyResult  # noqa: F401
from ledger.recorder import Ledger, default_url, open_ledger  # noqa: F401
