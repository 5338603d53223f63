"""The recorder contract on the PostgreSQL server at 127.0.0.1:5432 (database `test`, trust auth).

Each test gets its own schema (via the connection's search_path) so runs never see each other's rows.
Skipped, with the reason shown, only when no server answers.
"""

import os
import uuid

import psycopg
import pytest

from ledger import LedgerUnavailable, open_ledger
from tests.integration.ledger_contract import LedgerContract

PG_DSN = os.environ.get("NPU_LEDGER_TEST_PG", "host=127.0.0.1 port=5432 dbname=test user=postgres")


def _server_answers() -> str | None:
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
        return None
    except psycopg.Error as e:
        return str(e).strip().splitlines()[0]


_WHY_NOT = _server_answers()
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(_WHY_NOT is not None, reason=f"no PostgreSQL server answers at {PG_DSN}: {_WHY_NOT}"),
]


def _schema_url(schema: str) -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_schema():
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield schema
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


class TestPostgresLedger(LedgerContract):
    @pytest.fixture(autouse=True)
    def _fresh(self, pg_schema):
        self.schema = pg_schema
        self.url = _schema_url(pg_schema)

    def tamper(self, sql: str) -> None:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {self.schema}")
            conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
            conn.execute(sql)
            conn.execute("ALTER TABLE events ENABLE TRIGGER USER")


def test_truncate_is_refused_on_postgres(pg_schema):
    import sqlalchemy as sa

    ledger = open_ledger(_schema_url(pg_schema), create=True)
    with pytest.raises(sa.exc.DBAPIError, match="immutable"):
        with ledger.engine.begin() as conn:
            conn.exec_driver_sql("TRUNCATE events")


def test_an_unreachable_server_gives_one_clear_error():
    with pytest.raises(LedgerUnavailable, match="cannot open the ledger"):
        open_ledger("postgresql+psycopg://postgres@127.0.0.1:1/test")
