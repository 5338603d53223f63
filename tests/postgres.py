"""The PostgreSQL server the tests use, in one place: its address, whether it answers, a schema per test.

The server is `NPU_LEDGER_TEST_PG` (a libpq connection string, `host=... port=... dbname=... user=...`, or a
`postgresql://user@host:port/db` URI); default the local trust-auth server, database `test`. Every test gets
its own schema (`pg_schema`, a fixture in tests/conftest.py) and reaches it through the connection's
search_path (`schema_url`), so runs never see each other's rows. A test marked `needs_pg` is skipped, with
the reason shown, only when no server answers.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

PG_DSN = os.environ.get("NPU_LEDGER_TEST_PG", "host=127.0.0.1 port=5432 dbname=test user=postgres")


@lru_cache(maxsize=1)
def why_not() -> str | None:
    """None when the server answers, else the first line of why not (asked once per session)."""
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
        return None
    except psycopg.Error as e:
        return str(e).strip().splitlines()[0]


# skip (saying why) when no server answers; a module of PostgreSQL tests: pytestmark = [pytest.mark.postgres, needs_pg]
needs_pg = pytest.mark.skipif(why_not() is not None, reason=f"no PostgreSQL server answers at {PG_DSN}: {why_not()}")


def schema_url(schema: str) -> str:
    """The SQLAlchemy URL of `schema` on the test server (what `open_ledger` and `ledger --db` take)."""
    c = conninfo_to_dict(PG_DSN)
    auth = quote(c.get("user", "postgres")) + (f":{quote(c['password'])}" if c.get("password") else "")
    return (f"postgresql+psycopg://{auth}@{c.get('host', '127.0.0.1')}:{c.get('port', '5432')}/"
            f"{c.get('dbname', 'test')}?options=-csearch_path%3D{schema}")


def execute(sql: str, params=(), schema: str | None = None) -> list[tuple]:
    """Run one statement on the test server (autocommit), inside `schema` when given; rows if it returns any."""
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        if schema:
            conn.execute(f"SET search_path TO {schema}")
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


@contextmanager
def fresh_schema(prefix: str = "t_") -> Iterator[str]:
    """An empty schema on the test server, dropped (with everything in it) afterwards."""
    schema = f"{prefix}{uuid.uuid4().hex[:12]}"
    execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        execute(f"DROP SCHEMA {schema} CASCADE")
