"""The immutable, hash-chained event ledger (SQLite by default, PostgreSQL for teams)."""
