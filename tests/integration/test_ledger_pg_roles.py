"""Issue #22: PostgreSQL immutability that a non-superuser owner cannot lift (docs/design.md: PostgreSQL roles).

Each test creates its own schema and roles on the server NPU_LEDGER_TEST_PG names (default 127.0.0.1:5432,
trust auth, database `test`) and drops them. Skipped, with the reason shown, only when no server answers.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from ledger import LedgerWriteError, open_ledger
from ledger.events import LessonRecorded
from tests.e2e.cli import ledger
from tests.postgres import PG_DSN, needs_pg

pytestmark = [pytest.mark.postgres, needs_pg]


def _url(role: str, schema: str) -> str:
    """A ledger URL logging in as `role` (trust auth) with `schema` first on the search path."""
    info = conninfo_to_dict(PG_DSN)
    host, port, db = info.get("host", "127.0.0.1"), info.get("port", "5432"), info.get("dbname", "test")
    return f"postgresql+psycopg://{role}@{host}:{port}/{db}?options=-csearch_path%3D{schema}"


def _as(role: str | None, schema: str) -> psycopg.Connection:
    info = {**conninfo_to_dict(PG_DSN), **({"user": role} if role else {})}
    conn = psycopg.connect(**info, autocommit=True)
    conn.execute(f"SET search_path TO {schema}")
    return conn


@pytest.fixture
def pg_roles():
    """(schema, owner, app): a fresh schema owned by the administrator, a NOLOGIN owner role, a LOGIN app role."""
    tag = uuid.uuid4().hex[:10]
    schema, owner, app = f"t_{tag}", f"own_{tag}", f"app_{tag}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE ROLE {owner} NOLOGIN NOSUPERUSER")
        conn.execute(f"CREATE ROLE {app} LOGIN NOSUPERUSER")
    yield schema, owner, app
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"DROP SCHEMA IF EXISTS {schema}_2 CASCADE")
        for role in (owner, app):
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_a_non_superuser_owner_disabling_a_trigger_is_named_by_verify_and_refused_as_a_writer(pg_roles, tmp_path):
    schema, owner, _ = pg_roles
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"ALTER ROLE {owner} LOGIN")  # the setup the issue found: the table owner can log in
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {owner}")
    admin = open_ledger(_url("postgres", schema))
    admin.append("deployment:a", 0, [LessonRecorded(text="one"), LessonRecorded(text="two")])
    with _as(None, schema) as conn:  # what running the old tool as that role left: it owned everything
        conn.execute(f"ALTER TABLE events OWNER TO {owner}")
        conn.execute(f"ALTER FUNCTION events_immutable() OWNER TO {owner}")
    with _as(owner, schema) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_no_update_delete")  # no superuser needed

    result = open_ledger(_url("postgres", schema)).verify()
    assert not result.ok and result.disabled_triggers == ("events_no_update_delete",)
    assert "events_no_update_delete is disabled" in result.reason
    proc = ledger(tmp_path, "verify", db=_url("postgres", schema))
    assert proc.returncode == 2
    assert ("ledger BROKEN: immutability trigger events_no_update_delete is disabled (postgresql): rows can be "
            "updated or deleted") in proc.stderr
    assert f"warning: role {owner} can log in and is not a superuser, but owns" in proc.stderr

    as_owner = open_ledger(_url(owner, schema))
    with pytest.raises(LedgerWriteError, match=f"refusing to write as role {owner}: it owns"):
        as_owner.append("deployment:a", 2, [LessonRecorded(text="three")])
    assert len(admin.read_all()) == 2


def test_the_documented_roles_let_the_app_write_but_not_lift_immutability(pg_roles, tmp_path):
    schema, owner, app = pg_roles
    proc = ledger(tmp_path, "db", "setup", "--owner", owner, "--app", app, db=_url("postgres", schema))
    assert proc.returncode == 0, proc.stderr
    assert f"events table owned by {owner}" in proc.stdout and "warning" not in proc.stderr

    as_app = open_ledger(_url(app, schema))
    assert as_app.append("deployment:a", 0, [LessonRecorded(text="one")]) == [1]
    assert as_app.append("deployment:a", 1, [LessonRecorded(text="two")]) == [2]
    lifts = (
        "ALTER TABLE events DISABLE TRIGGER events_no_update_delete",
        "ALTER TABLE events DISABLE TRIGGER ALL",
        "DROP TRIGGER events_no_truncate ON events",
        "CREATE OR REPLACE FUNCTION events_immutable() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$",
        "ALTER TABLE events OWNER TO CURRENT_USER",
        "DROP TABLE events",
        "DELETE FROM events",
        "UPDATE events SET payload = '{}'",
        "TRUNCATE events",
    )
    with _as(app, schema) as conn:
        for sql in lifts:
            with pytest.raises(psycopg.Error):
                conn.execute(sql)
    proc = ledger(tmp_path, "verify", db=_url(app, schema))
    assert proc.returncode == 0 and "intact: 2 events" in proc.stdout and proc.stderr == ""


def test_a_non_superuser_cannot_create_a_ledger_it_would_own(pg_roles):
    schema, _, app = pg_roles
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}_2")
        conn.execute(f"GRANT USAGE, CREATE ON SCHEMA {schema}_2 TO {app}")
    as_app = open_ledger(_url(app, f"{schema}_2"))
    with pytest.raises(LedgerWriteError, match=f"refusing to create the ledger as role {app}"):
        as_app.append("deployment:a", 0, [LessonRecorded(text="one")])
    with _as(None, f"{schema}_2") as conn:
        assert conn.execute("SELECT to_regclass('events')").fetchone()[0] is None
