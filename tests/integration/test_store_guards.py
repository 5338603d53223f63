"""The store checks its own guards (issue 35 item 3), on SQLite and PostgreSQL.

Someone with DDL rights on the events table (a SQLite file's owner; on PostgreSQL the table's owner) can leave
the immutability triggers in place but make them never fire (`WHEN 0`), add a trigger that swallows appends
(`BEFORE INSERT ... RAISE(IGNORE)`), drop one, disable one or replace the trigger function's body. `ledger
verify` names each of them and exits 2; an append whose rows were swallowed raises instead of reporting a seq.

Issue 45 item 4: the rest of the table's definition too. A CHECK, a unique or expression index, an extra,
generated or retyped column, a default, a foreign key, row-level security or a policy, UNLOGGED, an inheriting
table: `verify` names each (exit 2) against a scratch install of the tool's DDL. An append such an object refuses
raises `StoreRefused` quoting the database (never a version race), and an attempt is not left open unannounced:
a refused evidence batch records no PhaseStarted; a refused verdict says the attempt is open and the next
`advance` judges it without re-running the gate.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from ledger import ConcurrencyError, StoreGuardError, StoreRefused, open_ledger
from ledger.events import LessonRecorded
from ledger.recorder import DIALECTS
from ledger.schema import COLS, KEYS
from ledger.sqlite import SQLITE_TRIGGERS, installed_definition
from handlers.uow import DeploymentUnit
from tests.e2e.cli import in_process, ledger
from tests.integration.test_ledger_pg_roles import _url, pg_roles  # noqa: F401 - the fixture, used by name
from tests.postgres import execute, fresh_schema, needs_pg, schema_url

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"


@dataclass
class Store:
    dialect: str
    url: str
    run: Callable[..., None]  # SQL statements run as the database's owner would, behind the tool's back
    update_rowcount: Callable[[], int]  # rows `UPDATE events SET payload = payload WHERE seq = 1` changed


def _sqlite_store(tmp_path: Path) -> Store:
    path = tmp_path / ".ledger" / "ledger.db"

    def run(*statements: str) -> None:
        conn = sqlite3.connect(path)
        conn.executescript(";".join(statements))
        conn.close()

    def update_rowcount() -> int:
        conn = sqlite3.connect(path)
        try:
            return conn.execute("UPDATE events SET payload = payload WHERE seq = 1").rowcount
        finally:
            conn.commit()
            conn.close()

    return Store("sqlite", f"sqlite:///{path}", run, update_rowcount)


def _pg_store(schema: str) -> Store:
    def run(*statements: str) -> None:
        for sql in statements:
            execute(sql, schema=schema)

    def update_rowcount() -> int:
        execute("UPDATE events SET payload = payload WHERE seq = 1", schema=schema)
        return 1  # no exception: the no-update trigger did not fire

    return Store("postgresql", schema_url(schema), run, update_rowcount)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, needs_pg])])
def store(request, tmp_path):
    """A ledger with two lessons in it, on each database."""
    if request.param == "sqlite":
        s = _sqlite_store(tmp_path)
        _two_lessons(s.url)
        yield s
    else:
        with fresh_schema() as schema:
            s = _pg_store(schema)
            _two_lessons(s.url)
            yield s


def _two_lessons(url: str) -> None:
    led = open_ledger(url)
    led.append("notes", 0, [LessonRecorded(text="one"), LessonRecorded(text="two")])
    led.close()


# per dialect: the no-update trigger replaced by one that never fires (same name), a trigger swallowing appends
NEUTERED = {
    "sqlite": ("events_no_update", [
        "DROP TRIGGER events_no_update",
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON events WHEN 0 "
        "BEGIN SELECT RAISE(ABORT, 'ledger events are immutable: UPDATE refused'); END"]),
    "postgresql": ("events_no_update_delete", [
        "CREATE OR REPLACE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events FOR EACH ROW "
        "WHEN (false) EXECUTE FUNCTION events_immutable()"]),
}
SWALLOW = {
    "sqlite": ["CREATE TRIGGER swallow BEFORE INSERT ON events BEGIN SELECT RAISE(IGNORE); END"],
    "postgresql": ["CREATE FUNCTION swallow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
                   "CREATE TRIGGER swallow BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION swallow()"],
}
DROPPED = {"sqlite": ("events_no_delete", "DROP TRIGGER events_no_delete"),
           "postgresql": ("events_no_truncate", "DROP TRIGGER events_no_truncate ON events")}


def _verify_cli(store: Store, tmp_path: Path):
    proc = in_process(tmp_path / "ws", "verify", db=store.url)
    as_json = json.loads(in_process(tmp_path / "ws", "verify", "--json", db=store.url).stdout)
    return proc, as_json


def test_a_fresh_ledger_has_exactly_the_triggers_the_tool_installs_as_the_database_prints_them(store):
    """The installed definitions are the text each database stores for them (not blind: the other tests here
    change one word and are caught)."""
    led = open_ledger(store.url)
    state = led.trigger_state()
    assert state.ok and led.verify().ok, state.reason()
    led.close()


def test_a_no_update_trigger_that_never_fires_is_named_by_verify_which_exits_2(store, tmp_path):
    name, neuter = NEUTERED[store.dialect]
    store.run(*neuter)
    assert store.update_rowcount() == 1  # the attack is real: UPDATE goes through (the row is left as it was)
    result = open_ledger(store.url).verify()
    assert not result.ok and result.altered_triggers == (name,) and result.checked == 2
    proc, as_json = _verify_cli(store, tmp_path)
    assert proc.returncode == 2
    assert f"immutability trigger {name} is not the definition the tool installs ({store.dialect})" in proc.stderr
    assert as_json["altered_triggers"] == [name] and not as_json["ok"]


def test_an_extra_trigger_swallowing_appends_is_named_by_verify_and_an_append_raises_recording_nothing(
        store, tmp_path):
    store.run(*SWALLOW[store.dialect])
    led = open_ledger(store.url)
    head = led.head()
    with pytest.raises(StoreGuardError, match="stored 0 of the 1 events appended"):
        led.append("notes", 2, [LessonRecorded(text="three")])
    with pytest.raises(StoreGuardError, match="stored 0 of the 2 events appended"):
        led.append("other", 0, [LessonRecorded(text="a"), LessonRecorded(text="b")])
    assert led.head() == head and led.stream_version("notes") == 2
    result = led.verify()
    assert not result.ok and result.extra_triggers == ("swallow",) and result.altered_triggers == ()
    led.close()
    proc, as_json = _verify_cli(store, tmp_path)
    assert proc.returncode == 2 and "trigger swallow on the events table is not one the tool installs" in proc.stderr
    assert as_json["extra_triggers"] == ["swallow"]


def test_a_dropped_trigger_is_named_by_verify_which_exits_2(store, tmp_path):
    name, drop = DROPPED[store.dialect]
    store.run(drop)
    proc, as_json = _verify_cli(store, tmp_path)
    assert proc.returncode == 2 and f"immutability trigger {name} is missing ({store.dialect})" in proc.stderr
    assert as_json["missing_triggers"] == [name]


def test_the_lesson_command_refuses_in_one_line_when_an_extra_trigger_swallows_its_append(store, tmp_path):
    ws = tmp_path / "ws"
    proc = in_process(ws, "init", str(CONFIGS / "smollm2-135m-instruct.json"), "--name", "m", db=store.url)
    assert proc.returncode == 0, proc.stderr
    store.run(*SWALLOW[store.dialect])
    head = open_ledger(store.url).head()
    proc = in_process(ws, "lesson", "m", "a lesson", db=store.url)
    assert proc.returncode == 1 and "recorded at seq" not in proc.stdout
    assert proc.stderr.strip().startswith("error: the database stored 0 of the 1 events appended")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert open_ledger(store.url).head() == head


# --- PostgreSQL only: a disabled trigger, a replaced trigger function, a rule ----------------------------------

@pytest.fixture
def pg_store():
    with fresh_schema() as schema:
        s = _pg_store(schema)
        _two_lessons(s.url)
        yield s


@pytest.mark.postgres
@needs_pg
def test_a_disabled_postgres_trigger_is_named_by_verify_which_exits_2(pg_store, tmp_path):
    pg_store.run("ALTER TABLE events DISABLE TRIGGER events_no_update_delete")
    proc, as_json = _verify_cli(pg_store, tmp_path)
    assert proc.returncode == 2
    assert "immutability trigger events_no_update_delete is disabled (postgresql)" in proc.stderr
    assert as_json["disabled_triggers"] == ["events_no_update_delete"] and as_json["altered_triggers"] == []


@pytest.mark.postgres
@needs_pg
def test_a_replaced_trigger_function_body_is_named_by_verify_for_both_triggers_that_call_it(pg_store, tmp_path):
    pg_store.run("CREATE OR REPLACE FUNCTION events_immutable() RETURNS trigger LANGUAGE plpgsql AS "
                 "$$ BEGIN RETURN OLD; END $$")
    assert pg_store.update_rowcount() == 1  # the attack is real
    proc, as_json = _verify_cli(pg_store, tmp_path)
    assert proc.returncode == 2
    for name in ("events_no_update_delete", "events_no_truncate"):
        assert f"immutability trigger {name} is not the definition the tool installs" in proc.stderr
    assert as_json["altered_triggers"] == ["events_no_update_delete", "events_no_truncate"]


@pytest.mark.postgres
@needs_pg
def test_a_trigger_pointed_at_a_lookalike_function_in_another_schema_is_named_by_verify(pg_store, tmp_path):
    """Same name, same body text, but a function the tool did not install: the definition keeps its schema."""
    with fresh_schema("other_") as other:
        pg_store.run(f"CREATE FUNCTION {other}.events_immutable() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$ BEGIN RAISE EXCEPTION 'ledger events are immutable: %% refused', TG_OP; END $$",
                     "CREATE OR REPLACE TRIGGER events_no_truncate BEFORE TRUNCATE ON events FOR EACH STATEMENT "
                     f"EXECUTE FUNCTION {other}.events_immutable()")
        proc, as_json = _verify_cli(pg_store, tmp_path)
        pg_store.run("DROP TRIGGER events_no_truncate ON events")  # before the other schema goes
    assert proc.returncode == 2 and as_json["altered_triggers"] == ["events_no_truncate"]


@pytest.mark.postgres
@needs_pg
def test_a_rule_that_swallows_appends_is_named_by_verify_and_an_append_raises(pg_store, tmp_path):
    pg_store.run("CREATE RULE quiet AS ON INSERT TO events DO INSTEAD NOTHING")
    led = open_ledger(pg_store.url)
    with pytest.raises(StoreGuardError, match="stored 0 of the 1 events appended"):
        led.append("notes", 2, [LessonRecorded(text="three")])
    led.close()
    proc, as_json = _verify_cli(pg_store, tmp_path)
    assert proc.returncode == 2 and as_json["extra_triggers"] == ["quiet (rule)"]


@pytest.mark.postgres
@needs_pg
def test_a_trigger_that_rewrites_the_appended_hash_is_caught_by_the_append_read_back(pg_store):
    """The row count is right; the row stored is not the one appended."""
    pg_store.run("CREATE FUNCTION rehash() RETURNS trigger LANGUAGE plpgsql AS "
                 "$$ BEGIN NEW.hash := repeat('0', 64); RETURN NEW; END $$",
                 "CREATE TRIGGER rehash BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION rehash()")
    led = open_ledger(pg_store.url)
    head = led.head()
    with pytest.raises(StoreGuardError, match="not 1 ending at seq 3 with the appended hash"):
        led.append("notes", 2, [LessonRecorded(text="three")])
    assert led.head() == head
    led.close()


# --- the rest of the events table's definition (issue 45 item 4) ------------------------------------------------

def _sqlite_rebuild(store: Store, extra: str = "") -> None:
    """Redefine the events table the way SQLite's ALTER TABLE documentation does it (a new table, the rows copied,
    the old one dropped, the new one renamed, the triggers made again): the tool's own table plus `extra` in its
    column list (an attacker's CHECK), or exactly the tool's when `extra` is empty."""
    table = installed_definition()["table events"].rstrip()
    new = table[:-1].rstrip() + f", {extra})" if extra else table
    store.run(new.replace("CREATE TABLE events", "CREATE TABLE events_new", 1),
              "INSERT INTO events_new SELECT * FROM events", "DROP TABLE events",
              "ALTER TABLE events_new RENAME TO events", *SQLITE_TRIGGERS)


def _add_check(store: Store, name: str, condition: str) -> None:
    if store.dialect == "sqlite":
        _sqlite_rebuild(store, f"CONSTRAINT {name} CHECK ({condition})")
    else:
        store.run(f"ALTER TABLE events ADD CONSTRAINT {name} CHECK ({condition})")


def _drop_check(store: Store, name: str) -> None:
    if store.dialect == "sqlite":
        _sqlite_rebuild(store)
    else:
        store.run(f"ALTER TABLE events DROP CONSTRAINT {name}")


# what a CHECK added to the events table is named by: SQLite keeps it in the table's text, PostgreSQL in pg_constraint
CHECK_NAMED = {"sqlite": ("table events", "altered"), "postgresql": ("constraint no_blocked", "extra")}
# the CHECK as verify's line shows it (SQLite: the part of the table's text that differs)
CHECK_TEXT = {"sqlite": "it has ', CONSTRAINT no_blocked CHECK (stream_id <> 'blocked')' where the tool's has nothing",
              "postgresql": "CHECK ((stream_id <> 'blocked'::text))"}
# the database's own line when the CHECK refuses a row
CHECK_REFUSES = {"sqlite": "CHECK constraint failed: no_blocked",
                 "postgresql": 'violates check constraint "no_blocked"'}


def test_a_check_constraint_added_to_the_events_table_is_named_by_verify_which_exits_2(store, tmp_path):
    _add_check(store, "no_blocked", "stream_id <> 'blocked'")
    what, kind = CHECK_NAMED[store.dialect]
    result = open_ledger(store.url).verify()
    assert not result.ok and [(d.what, d.kind) for d in result.schema_deviations] == [(what, kind)]
    assert result.altered_triggers == result.extra_triggers == result.missing_triggers == ()  # triggers made again
    proc, as_json = _verify_cli(store, tmp_path)
    assert proc.returncode == 2
    line = next(x for x in proc.stderr.splitlines() if "no_blocked" in x)
    assert line.startswith(f"ledger BROKEN ({store.dialect}): ") and CHECK_TEXT[store.dialect] in line, line
    assert [(d["object"], d["problem"]) for d in as_json["schema_deviations"]] == [(what, kind)]
    assert not as_json["ok"]


def test_a_check_constraint_refusing_an_append_is_reported_as_itself_never_as_a_version_race(store):
    _add_check(store, "no_blocked", "stream_id <> 'blocked'")
    led = open_ledger(store.url)
    head = led.head()
    with pytest.raises(StoreRefused) as refused:
        led.append("blocked", 0, [LessonRecorded(text="refused")])
    assert not isinstance(refused.value, ConcurrencyError)
    assert CHECK_REFUSES[store.dialect] in str(refused.value) and "moved past version" not in str(refused.value)
    assert led.head() == head and led.stream_version("blocked") == 0
    assert led.append("notes", 2, [LessonRecorded(text="three")]) == [3]  # the CHECK is selective: others append
    led.close()
    _drop_check(store, "no_blocked")  # put back exactly: SQLite's rename quotes the name, which is no difference
    assert open_ledger(store.url).verify().ok, open_ledger(store.url).verify().schema_deviations


def test_the_lesson_command_names_a_check_that_refuses_its_append_not_someone_else_advancing(store, tmp_path):
    ws = tmp_path / "ws"
    proc = in_process(ws, "init", str(CONFIGS / "smollm2-135m-instruct.json"), "--name", "m", db=store.url)
    assert proc.returncode == 0, proc.stderr
    _add_check(store, "no_blocked", "type <> 'LessonRecorded' OR stream_id = 'notes'")
    head = open_ledger(store.url).head()
    proc = in_process(ws, "lesson", "m", "a lesson", db=store.url)
    assert proc.returncode == 1 and "someone else advanced" not in proc.stderr
    assert proc.stderr.strip().startswith("error: the database refused the append: ")
    assert CHECK_REFUSES[store.dialect] in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert open_ledger(store.url).head() == head


# per dialect: (id, statements run behind the tool's back, the object verify names, how)
OBJECTS = {
    "sqlite": [
        ("partial unique index", ["CREATE UNIQUE INDEX one_blocked ON events (stream_id) WHERE stream_id = 'blocked'"],
         "index one_blocked", "extra"),
        ("expression index", ["CREATE UNIQUE INDEX lower_type ON events (lower(payload))"], "index lower_type",
         "extra"),
        ("extra column with a default", ["ALTER TABLE events ADD COLUMN note TEXT NOT NULL DEFAULT 'x'"],
         "table events", "altered"),
        ("generated column", ["ALTER TABLE events ADD COLUMN shout TEXT GENERATED ALWAYS AS (upper(type)) VIRTUAL"],
         "table events", "altered"),
        ("foreign key", ["CREATE TABLE kinds (name TEXT PRIMARY KEY)",
                         "ALTER TABLE events ADD COLUMN kind TEXT REFERENCES kinds (name)"], "table events", "altered"),
    ],
    "postgresql": [
        ("partial unique index", ["CREATE UNIQUE INDEX one_blocked ON events (stream_id) WHERE stream_id = 'blocked'"],
         "index one_blocked", "extra"),
        ("extra not-null column", ["ALTER TABLE events ADD COLUMN note text NOT NULL DEFAULT 'x'"], "column note",
         "extra"),
        ("a default", ["ALTER TABLE events ALTER COLUMN type SET DEFAULT 'x'"], "column type", "altered"),
        ("a narrower type", ["ALTER TABLE events ALTER COLUMN type TYPE varchar(40)"], "column type", "altered"),
        ("generated column", ["ALTER TABLE events ADD COLUMN shout text GENERATED ALWAYS AS (upper(type)) STORED"],
         "column shout", "extra"),
        ("foreign key", ["CREATE TABLE kinds (name text PRIMARY KEY)",
                         "ALTER TABLE events ADD CONSTRAINT kind_known FOREIGN KEY (type) REFERENCES kinds (name) "
                         "NOT VALID"], "constraint kind_known", "extra"),
        ("row-level security", ["ALTER TABLE events ENABLE ROW LEVEL SECURITY"], "row-level security", "altered"),
        ("a policy", ["CREATE POLICY no_blocked ON events FOR INSERT WITH CHECK (stream_id <> 'blocked')"],
         "policy no_blocked", "extra"),
        ("unlogged", ["ALTER TABLE events SET UNLOGGED"], "table events", "altered"),
        ("an inheriting table", ["CREATE TABLE shadow () INHERITS (events)"], "inheritance child shadow", "extra"),
    ],
}


def _objects():
    for dialect, cases in OBJECTS.items():
        marks = [pytest.mark.postgres, needs_pg] if dialect == "postgresql" else []
        for case in cases:
            yield pytest.param(dialect, *case[1:], id=f"{dialect}-{case[0]}", marks=marks)


@pytest.mark.parametrize("dialect,statements,what,kind", list(_objects()))
def test_any_object_added_to_the_events_table_is_named_by_verify_which_exits_2(
        dialect, statements, what, kind, tmp_path):
    with (fresh_schema() if dialect == "postgresql" else nullcontext()) as schema:
        store = _pg_store(schema) if schema else _sqlite_store(tmp_path)
        _two_lessons(store.url)
        store.run(*statements)
        proc, as_json = _verify_cli(store, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert (what, kind) in [(d["object"], d["problem"]) for d in as_json["schema_deviations"]], as_json
    assert f"ledger BROKEN ({dialect}): " in proc.stderr


def test_a_unique_violation_is_a_version_race_only_on_the_tables_own_keys(store):
    """The classifier on the database's real errors: a row at a taken (stream_id, version), seq or event_id is
    another writer's; a clash on an index the tool does not install is a refusal."""
    led = open_ledger(store.url)
    first = led.read_all()[0]
    row = (first.seq, first.stream_id, first.version, first.event_id, first.type, "{}", first.recorded_at,
           first.prev_hash, first.hash)
    db = DIALECTS[store.dialect]
    seen = []
    for change, key in ((dict(seq=99, event_id="x"), ("stream_id", "version")), (dict(version=99, event_id="y"),
                        ("seq",)), (dict(seq=99, version=99), ("event_id",))):
        values = dict(zip(COLS, row)) | change
        seen.append((_insert_error(store, values, db), key))
    store.run("CREATE UNIQUE INDEX one_type ON events (type) WHERE seq > 1")  # the second lesson's type, once
    values = dict(zip(COLS, row)) | dict(seq=99, version=99, event_id="z")
    assert db.clash(_insert_error(store, values, db)) == ("type",)
    for error, key in seen:
        assert db.clash(error) == key and key in KEYS
    led.close()


def _insert_error(store: Store, values: dict, db) -> Exception:
    """The driver's own error of inserting `values` as a row of the events table."""
    sql = f"INSERT INTO events ({', '.join(COLS)}) VALUES ({', '.join([db.mark] * len(COLS))})"
    if store.dialect == "sqlite":
        conn = sqlite3.connect(store.url.removeprefix("sqlite:///"))
        try:
            conn.execute(sql, tuple(values[c] for c in COLS))
        except sqlite3.IntegrityError as e:
            return e
        finally:
            conn.close()
    else:
        import psycopg
        from tests.postgres import PG_DSN
        schema = store.url.rsplit("%3D", 1)[1]
        with psycopg.connect(PG_DSN) as conn:
            conn.execute(f"SET search_path TO {schema}")
            try:
                conn.execute(sql, tuple(values[c] for c in COLS))
            except psycopg.errors.UniqueViolation as e:
                return e
            finally:
                conn.rollback()
    raise AssertionError(f"the insert of {values} was not refused")


# --- a refused append never leaves an attempt open unannounced (Phase 0 on a tiny real Llama) ---------------------

def _attempts(url: str) -> tuple[object, list[str]]:
    """The deployment's open attempt (None when none is) and its stream's event types."""
    led = open_ledger(url)
    try:
        return DeploymentUnit(led, "tiny").state.open_attempt, [e.type for e in led.read_stream("deployment:tiny")]
    finally:
        led.close()


def _error_line(proc) -> str:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def test_a_refused_evidence_batch_opens_no_attempt_and_verify_names_what_refused_it(store, tmp_path, tiny_llama):
    ws = tmp_path / "ws"
    assert ledger(ws, "init", str(tiny_llama), "--name", "tiny", db=store.url).returncode == 0
    _add_check(store, "no_blocked", "type <> 'ReferenceBaselineRecorded'")
    head = open_ledger(store.url).head()
    proc = ledger(ws, "advance", "tiny", "--until", "0", db=store.url)
    line = _error_line(proc)
    assert proc.returncode == 1 and "someone else advanced" not in proc.stderr
    assert line.startswith("error: the database refused the append: ") and CHECK_REFUSES[store.dialect] in line
    assert open_ledger(store.url).head() == head  # PhaseStarted and its evidence are one batch: none of it
    open_attempt, types = _attempts(store.url)
    assert open_attempt is None and "PhaseStarted" not in types
    status = json.loads(in_process(ws, "status", "tiny", "--json", db=store.url).stdout)
    assert status["phases_passed"] == [] and status["status"] == "phase0"
    proc, as_json = _verify_cli(store, tmp_path)
    assert proc.returncode == 2 and "no_blocked" in proc.stderr
    assert [d["object"] for d in as_json["schema_deviations"]] == [CHECK_NAMED[store.dialect][0]]


def test_a_refused_verdict_leaves_the_attempt_open_says_so_and_the_next_advance_judges_it_without_rerunning(
        store, tmp_path, tiny_llama):
    """PhasePassed cites its evidence's seqs, so it is appended after them: a refused verdict leaves the attempt
    as a crash after its evidence does, and `advance` says so; once the store takes appends, the next `advance`
    judges that attempt from its recorded evidence (one PhaseStarted, the gate not run again)."""
    ws = tmp_path / "ws"
    assert ledger(ws, "init", str(tiny_llama), "--name", "tiny", db=store.url).returncode == 0
    _add_check(store, "no_blocked", "type <> 'PhasePassed'")
    proc = ledger(ws, "advance", "tiny", "--until", "0", db=store.url)
    line = _error_line(proc)
    assert proc.returncode == 1 and "someone else advanced" not in proc.stderr
    assert line.startswith("error: tiny phase 0 attempt 1 is open: its evidence is recorded (seq ")
    assert CHECK_REFUSES[store.dialect] in line and "`ledger advance tiny` judges this attempt" in line
    open_attempt, types = _attempts(store.url)
    assert open_attempt is not None and open_attempt.number == 1 and open_attempt.evidence
    assert types.count("PhaseStarted") == 1 and "PhasePassed" not in types
    evidence = [e.seq for e in open_attempt.evidence]
    proc, as_json = _verify_cli(store, tmp_path)
    assert proc.returncode == 2 and "no_blocked" in proc.stderr
    _drop_check(store, "no_blocked")
    proc = ledger(ws, "advance", "tiny", "--until", "0", db=store.url)
    assert proc.returncode == 0, proc.stderr
    open_attempt, types = _attempts(store.url)
    assert open_attempt is None and types.count("PhaseStarted") == 1 and types.count("PhasePassed") == 1
    led = open_ledger(store.url)
    passed = next(e for e in led.read_stream("deployment:tiny") if e.type == "PhasePassed")
    assert passed.payload["evidence_seqs"] == evidence and passed.payload["attempt"] == 1
    led.close()
    assert _verify_cli(store, tmp_path)[0].returncode == 0


@pytest.mark.postgres
@needs_pg
def test_the_app_role_granted_select_and_insert_only_sees_a_check_the_owner_added_and_is_refused_by_it(
        pg_roles, tmp_path):
    """The documented roles (`ledger db setup`): the scratch install is a temporary table, which the application's
    role may create; nothing of it outlives verify's transaction."""
    schema, owner, app = pg_roles
    assert ledger(tmp_path, "db", "setup", "--owner", owner, "--app", app, db=_url("postgres", schema)).returncode == 0
    as_app = open_ledger(_url(app, schema))
    as_app.append("notes", 0, [LessonRecorded(text="one")])
    execute("ALTER TABLE events ADD CONSTRAINT no_blocked CHECK (stream_id <> 'blocked')", schema=schema)
    with pytest.raises(StoreRefused, match='violates check constraint "no_blocked"'):
        as_app.append("blocked", 0, [LessonRecorded(text="refused")])
    as_app.close()
    proc = in_process(tmp_path / "ws", "verify", "--json", db=_url(app, schema))
    assert proc.returncode == 2
    assert [d["object"] for d in json.loads(proc.stdout)["schema_deviations"]] == ["constraint no_blocked"]
    assert execute("SELECT count(*) FROM pg_class WHERE relpersistence = 't' AND relowner = %s::regrole",
                   (app,)) == [(0,)]  # the scratch install left nothing
