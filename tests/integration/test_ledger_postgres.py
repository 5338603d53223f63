"""The recorder contract on the test PostgreSQL server (tests/postgres.py: 127.0.0.1:5432, database `test`,
trust auth, unless NPU_LEDGER_TEST_PG says otherwise).

Each test gets its own schema (via the connection's search_path) so runs never see each other's rows.
Skipped, with the reason shown, only when no server answers.
"""

import psycopg
import pytest

from ledger import LedgerUnavailable, open_ledger
from tests.integration.ledger_contract import LedgerContract
from tests.postgres import PG_DSN, needs_pg, schema_url

pytestmark = [pytest.mark.postgres, needs_pg]


class TestPostgresLedger(LedgerContract):
    @pytest.fixture(autouse=True)
    def _fresh(self, pg_schema):
        self.schema = pg_schema
        self.url = schema_url(pg_schema)

    def tamper(self, sql: str) -> None:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {self.schema}")
            conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
            conn.execute(sql)
            conn.execute("ALTER TABLE events ENABLE TRIGGER USER")


def test_truncate_is_refused_on_postgres(pg_schema):
    import sqlalchemy as sa

    ledger = open_ledger(schema_url(pg_schema), create=True)
    with pytest.raises(sa.exc.DBAPIError, match="immutable"):
        with ledger.engine.begin() as conn:
            conn.exec_driver_sql("TRUNCATE events")


def test_an_unreachable_server_gives_one_clear_error():
    with pytest.raises(LedgerUnavailable, match="cannot open the ledger"):
        open_ledger("postgresql+psycopg://postgres@127.0.0.1:1/test")
