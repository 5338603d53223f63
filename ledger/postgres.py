"""The recorder's PostgreSQL dialect (`POSTGRESQL`) and its roles: immutability that only a superuser can lift.

The dialect: a psycopg engine; writers serialise on a transaction advisory lock keyed by the events table
(`WRITE_LOCK_SQL`, taken first in the append transaction and held to its commit: a role granted SELECT and
INSERT only may not take an EXCLUSIVE table lock); triggers refuse UPDATE, DELETE and TRUNCATE (`PG_TRIGGERS`).

The roles. The triggers stop every role, but the owner of the events table can `ALTER TABLE events DISABLE
TRIGGER ...` or drop them, the owner of the trigger function can replace its body, and the owner of the
table's schema can drop the table. So:

* the events table, its schema and the trigger function are owned by roles the application does not log in
  as (the recommended owner is a NOLOGIN role; `setup` does it, run once by an administrator);
* the application's role is granted SELECT and INSERT on the events table only (the advisory lock needs no
  table privilege);
* the recorder refuses to write as a role that is not a superuser but owns, or is a member of the owner of,
  any of the three (`writer_problem`), and refuses to create the schema as a non-superuser (it would own it);
* `lift_warnings` names the roles that can log in and lift immutability without being superusers (`ledger
  verify` prints them); a superuser can lift anything, which is the documented limit.

The definition. `definition` reads the events table as the server prints it (columns with types, defaults,
generation, identity and collation; `pg_get_constraintdef` of every constraint; `pg_get_indexdef` of every
index; row-level security and `pg_policy`; kind, persistence, access method, partition key, inheritance);
`installed_definition` reads the same of a scratch install of the tool's own DDL (`ledger.schema.EVENTS`)
created in `pg_temp` inside a transaction that is rolled back. So the expected text is the server's own
printing of what `create_schema` runs, on this server's version, and no copy of it can drift; a temporary table
writes nothing that outlives the transaction (it needs the TEMPORARY privilege, which PUBLIC has by default).

README "PostgreSQL roles" is the administrator's side. Imported by `ledger.recorder` and the `db setup` /
`verify` commands (handlers.cli.main).
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from ledger.schema import EVENTS, Dialect

# PostgreSQL writers' lock: a transaction advisory lock (key space of two int4 keys) on the events table's oid
WRITE_LOCK_SQL = "SELECT pg_advisory_xact_lock(7345903, to_regclass('events')::oid::int)"
_BODY = "BEGIN RAISE EXCEPTION 'ledger events are immutable: %% refused', TG_OP; END"  # %%: a driver's escape
PG_TRIGGERS = (
    f"CREATE OR REPLACE FUNCTION events_immutable() RETURNS trigger LANGUAGE plpgsql AS $$ {_BODY} $$",
    "CREATE OR REPLACE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events "
    "FOR EACH ROW EXECUTE FUNCTION events_immutable()",
    "CREATE OR REPLACE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
    "FOR EACH STATEMENT EXECUTE FUNCTION events_immutable()",
)
# PG_TRIGGERS as `triggers` reads them back: the server's `pg_get_triggerdef` (events' schema left out) and the
# trigger function's language and source (`pg_proc.prosrc`); the contract suite's fresh installs check the text
_FUNCTION = f"function plpgsql: {_BODY.replace('%%', '%')}"
PG_INSTALLED = {
    "events_no_update_delete": "CREATE TRIGGER events_no_update_delete BEFORE DELETE OR UPDATE ON events FOR EACH ROW "
                               f"EXECUTE FUNCTION events_immutable(); {_FUNCTION}",
    "events_no_truncate": "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events FOR EACH STATEMENT "
                          f"EXECUTE FUNCTION events_immutable(); {_FUNCTION}",
}


def postgres_engine(url: URL, read_only: bool = False) -> Engine:
    """An engine on `url` through psycopg (whatever driver the URL names); `read_only` is the recorder's to
    enforce (append refuses), the server has no read-only opening."""
    if url.get_driver_name() not in ("psycopg",):
        url = url.set(drivername="postgresql+psycopg")
    return sa.create_engine(url, connect_args={"connect_timeout": 5})


def has_schema(engine: Engine) -> bool:
    """Whether the events table exists (on the search path); creates nothing."""
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT to_regclass('events')").scalar() is not None


def create_schema(engine: Engine) -> None:
    """The events table, its trigger function and triggers, unless the table exists (concurrent first opens
    serialise on an advisory lock)."""
    with engine.begin() as conn:
        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7345901)")  # concurrent first opens
        exists = conn.exec_driver_sql("SELECT to_regclass('events')").scalar()
        if exists is None:
            EVENTS.create(conn)
            for ddl in PG_TRIGGERS:
                conn.exec_driver_sql(ddl)


_TRIGGERS = """
SELECT t.tgname, t.tgenabled, pg_get_triggerdef(t.oid), quote_ident(tn.nspname), quote_ident(pn.nspname), l.lanname,
       p.prosrc
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace tn ON tn.oid = c.relnamespace
  JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_namespace pn ON pn.oid = p.pronamespace
  JOIN pg_language l ON l.oid = p.prolang
 WHERE t.tgrelid = to_regclass('events') AND NOT t.tgisinternal
"""
_RULES = "SELECT rulename, ev_enabled, pg_get_ruledef(oid) FROM pg_rewrite WHERE ev_class = to_regclass('events')"


def installed() -> dict[str, str]:
    """The triggers `create_schema` installs, as `triggers` reads them back (`PG_INSTALLED`)."""
    return dict(PG_INSTALLED)


def triggers(conn: Connection) -> dict[str, tuple[str, str]]:
    """The events table's triggers -> (`tgenabled`: 'O' fires, 'D' disabled, 'R' replica sessions only;
    `pg_get_triggerdef` without the events table's schema, then "; function LANGUAGE: SOURCE" of its function).

    The function keeps its schema when it is not the events table's. A rule on the events table (`DO INSTEAD
    NOTHING` swallows appends as a trigger would) is listed as "NAME (rule)", which the tool never installs."""
    found = {}
    for name, flag, definition, table_schema, function_schema, language, source in conn.execute(sa.text(_TRIGGERS)):
        definition = definition.replace(f" ON {table_schema}.events ", " ON events ")
        if function_schema == table_schema:
            definition = definition.replace(f" EXECUTE FUNCTION {function_schema}.", " EXECUTE FUNCTION ")
        found[name] = (str(flag), f"{definition}; function {language}: {source}")
    for name, flag, definition in conn.execute(sa.text(_RULES)):
        found[f"{name} (rule)"] = (str(flag), definition)
    return found


_TABLE = """
SELECT c.relkind, c.relpersistence, coalesce(am.amname, ''), c.relrowsecurity, c.relforcerowsecurity,
       coalesce(pg_get_partkeydef(c.oid), '')
  FROM pg_class c LEFT JOIN pg_am am ON am.oid = c.relam WHERE c.oid = :t
"""
_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid),
       a.attgenerated, a.attidentity, CASE WHEN a.attcollation <> t.typcollation THEN co.collname END
  FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  LEFT JOIN pg_collation co ON co.oid = a.attcollation
 WHERE a.attrelid = :t AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
"""
_CONSTRAINTS = "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = :t"
_INDEXES = """
SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = :t
"""
_POLICIES = """
SELECT polname, polcmd, polpermissive,
       array_to_string(ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE pg_get_userbyid(r) END
                               FROM unnest(polroles) r ORDER BY 1), ', '),
       pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid)
  FROM pg_policy WHERE polrelid = :t
"""
_INHERITANCE = """
SELECT 'parent', inhparent::regclass::text FROM pg_inherits WHERE inhrelid = :t
UNION ALL SELECT 'child', inhrelid::regclass::text FROM pg_inherits WHERE inhparent = :t
"""
_KINDS = {"r": "an ordinary table", "p": "a partitioned table", "v": "a view", "f": "a foreign table",
          "m": "a materialized view"}
_PERSISTENCE = {"p": "logged", "u": "unlogged", "t": "temporary"}
_POLICY_COMMANDS = {"r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE", "*": "ALL"}
# an index's table as pg_get_indexdef prints it, schema-qualified or not: the events table's schema left out
_INDEX_ON = re.compile(r' ON (ONLY )?(?:(?:"(?:[^"]|"")*"|[^\s."]+)\.)?events USING ')


def _describe(conn: Connection, table: int, persistence: str | None = None) -> dict[str, str]:
    """The definition of the table `table` (an oid) as the server prints it: {object: text}. `persistence`
    replaces the table's own (the scratch install is temporary only because it is a scratch)."""
    t = {"t": table}
    kind, persist, method, rls, forced, partition = conn.execute(sa.text(_TABLE), t).one()
    found = {"table events": f"{_KINDS.get(kind, kind)}, {_PERSISTENCE.get(persistence or persist, persist)}, "
                             f"access method {method or 'none'}"
                             + (f", partitioned by {partition}" if partition else ""),
             "row-level security": ("enabled" + (" and forced" if forced else "")) if rls else "off"}
    for name, type_, not_null, default, generated, identity, collation in conn.execute(sa.text(_COLUMNS), t):
        text = type_ + (f" COLLATE {collation}" if collation else "") + (" NOT NULL" if not_null else "")
        if generated:
            text += f" GENERATED ALWAYS AS ({default}) STORED"
        elif default is not None:
            text += f" DEFAULT {default}"
        if identity:
            text += f" GENERATED {'ALWAYS' if identity == 'a' else 'BY DEFAULT'} AS IDENTITY"
        found[f"column {name}"] = text
    for name, text in conn.execute(sa.text(_CONSTRAINTS), t):
        found[f"constraint {name}"] = text
    for name, text in conn.execute(sa.text(_INDEXES), t):
        found[f"index {name}"] = _INDEX_ON.sub(lambda m: f" ON {m.group(1) or ''}events USING ", text)
    for name, command, permissive, roles, using, check in conn.execute(sa.text(_POLICIES), t):
        found[f"policy {name}"] = (f"AS {'PERMISSIVE' if permissive else 'RESTRICTIVE'} FOR "
                                   f"{_POLICY_COMMANDS.get(command, command)} TO {roles}"
                                   + (f" USING ({using})" if using is not None else "")
                                   + (f" WITH CHECK ({check})" if check is not None else ""))
    for side, other in conn.execute(sa.text(_INHERITANCE), t):
        found[f"inheritance {side} {other}"] = f"{side} table {other}"
    return found


def definition(conn: Connection) -> dict[str, str]:
    """The events table's definition as the server prints it (its triggers and rules are `triggers`')."""
    return _describe(conn, conn.execute(sa.text("SELECT to_regclass('events')::oid")).scalar())


def installed_definition(engine: Engine) -> dict[str, str]:
    """`definition` of a scratch install of the tool's DDL (`ledger.schema.EVENTS`, as `create_schema` runs it)
    as a temporary table, in a transaction rolled back: nothing is left behind. Its persistence is the one
    `create_schema` gives the table (logged), the one thing a temporary scratch cannot show."""
    with engine.connect() as conn:
        try:
            conn.exec_driver_sql("SET LOCAL search_path TO pg_temp")
            EVENTS.create(conn)
            return _describe(conn, conn.exec_driver_sql("SELECT 'pg_temp.events'::regclass::oid").scalar(), "p")
        finally:
            conn.rollback()


_KEY = re.compile(r"Key \((.+?)\)=\(")


def clash(exc: BaseException) -> tuple[str, ...] | None:
    """The columns of a unique violation (SQLSTATE 23505, from its detail "Key (stream_id, version)=(...) already
    exists."); None for any other error."""
    diag = getattr(exc, "diag", None)
    if getattr(exc, "sqlstate", None) != "23505" or diag is None:
        return None
    m = _KEY.match(diag.message_detail or "")
    return tuple(c.strip() for c in m.group(1).split(",")) if m else None


# (what, owner oid) of everything whose owner can switch the immutability off
_OWNERS = """
SELECT 'the events table' AS what, c.relowner AS owner FROM pg_class c WHERE c.oid = to_regclass('events')
UNION ALL
SELECT 'schema ' || n.nspname, n.nspowner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = to_regclass('events')
UNION ALL
SELECT DISTINCT 'function ' || p.proname || '()', p.proowner FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
 WHERE t.tgrelid = to_regclass('events') AND NOT t.tgisinternal
"""
_ME = "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user"
README = "README: PostgreSQL roles"


def writer_problem(engine: Engine, *, schema_exists: bool) -> str | None:
    """Why the connected role must not write to this ledger (None: it may)."""
    with engine.connect() as conn:
        me, superuser = conn.execute(sa.text(_ME)).one()
        if superuser:
            return None  # the documented limit: a superuser can lift anything anyway
        if not schema_exists:
            return (f"refusing to create the ledger as role {me}, which is not a superuser: it would own the events "
                    f"table and could switch its immutability triggers off; an administrator creates it with "
                    f"`ledger db setup --owner ROLE --app {me}` ({README})")
        rows = conn.execute(sa.text(
            f"SELECT o.what, pg_get_userbyid(o.owner) FROM ({_OWNERS}) o "
            "WHERE pg_has_role(current_user, o.owner, 'MEMBER') ORDER BY 1")).all()
    if not rows:
        return None
    held = ", ".join(f"{what} (owner {owner})" for what, owner in rows)
    return (f"refusing to write as role {me}: it owns, or is a member of the owner of, {held}, so it could switch "
            f"the ledger's immutability off; connect as a role granted SELECT and INSERT only ({README})")


def lift_warnings(engine: Engine) -> list[str]:
    """One line per role that can log in and switch immutability off without being a superuser."""
    if not has_schema(engine):
        return []
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            f"SELECT r.rolname, string_agg(DISTINCT o.what, ', ' ORDER BY o.what) FROM pg_roles r, ({_OWNERS}) o "
            "WHERE r.rolcanlogin AND NOT r.rolsuper AND pg_has_role(r.oid, o.owner, 'MEMBER') "
            "GROUP BY r.rolname ORDER BY 1")).all()
    return [f"role {role} can log in and is not a superuser, but owns (or is a member of the owner of) {what}: "
            f"it can switch the immutability triggers off ({README})" for role, what in rows]


def setup(engine: Engine, owner: str, app: str) -> list[str]:
    """Create the events table (if missing) and hand it, its schema's privileges and the trigger function to
    `owner`; grant `app` SELECT and INSERT only. Run by an administrator (a superuser); returns what it did.

    Refuses (ValueError) an `app` role that is a superuser, is `owner` or a member of it, or owns the schema."""
    q = engine.dialect.identifier_preparer.quote
    with engine.connect() as conn:
        found = dict(conn.execute(sa.text("SELECT rolname, rolsuper FROM pg_roles WHERE rolname IN (:o, :a)"),
                                  {"o": owner, "a": app}).all())
    for role in (owner, app):
        if role not in found:
            raise ValueError(f"role {role!r} does not exist (CREATE ROLE it first; {README})")
    if found[app]:
        raise ValueError(f"role {app!r} is a superuser: the application must log in as a role that cannot lift "
                         f"immutability ({README})")
    create_schema(engine)
    done = []
    with engine.begin() as conn:
        if conn.execute(sa.text("SELECT pg_has_role(:a, :o, 'MEMBER')"), {"a": app, "o": owner}).scalar():
            raise ValueError(f"role {app!r} is {owner!r} or a member of it: it could switch immutability off")
        schema = conn.execute(sa.text(
            "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = to_regclass('events')")).scalar()
        functions = conn.execute(sa.text(
            "SELECT DISTINCT p.oid::regprocedure::text FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
            "WHERE t.tgrelid = to_regclass('events') AND NOT t.tgisinternal")).scalars().all()
        conn.exec_driver_sql(f"ALTER TABLE events OWNER TO {q(owner)}")
        done.append(f"events table owned by {owner}")
        for fn in functions:
            conn.exec_driver_sql(f"ALTER FUNCTION {fn} OWNER TO {q(owner)}")
            done.append(f"function {fn} owned by {owner}")
        conn.exec_driver_sql("REVOKE ALL ON events FROM PUBLIC")
        conn.exec_driver_sql(f"REVOKE ALL ON events FROM {q(app)}")
        conn.exec_driver_sql(f"GRANT SELECT, INSERT ON events TO {q(app)}")
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {q(schema)} TO {q(app)}")
        done.append(f"{app} granted SELECT, INSERT on events and USAGE on schema {schema}")
        if conn.execute(sa.text(
                "SELECT pg_has_role(:a, n.nspowner, 'MEMBER') FROM pg_namespace n WHERE n.nspname = :s"),
                {"a": app, "s": schema}).scalar():
            raise ValueError(f"role {app!r} owns (or is a member of the owner of) schema {schema}: it could drop the "
                             "events table; put the ledger in a schema another role owns")
    return done


POSTGRESQL = Dialect(
    name="postgresql",
    mark="%s",
    begin_write=WRITE_LOCK_SQL,
    installed=installed,
    connect=postgres_engine,
    has_schema=has_schema,
    create_schema=create_schema,
    triggers=triggers,
    definition=definition,
    installed_definition=installed_definition,
    clash=clash,
    writer_problem=writer_problem,
)
