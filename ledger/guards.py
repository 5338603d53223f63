"""The store's own guards, checked: the triggers on the events table against the ones the tool installs, and an
append's rows against what the database says it stored.

`judge_triggers` compares what a dialect reads back from the database (`Dialect.triggers`: each trigger on the
events table, whether it fires, its definition as the database prints it) with what the dialect installs
(`Dialect.installed`: the same text, read back from a fresh install). The definitions are compared after
`normalise_sql` (runs of whitespace as one space), so a trigger that is present and enabled but rewritten
(`WHEN 0`, another body, another function) is `altered`, and one the tool never installs (a `BEFORE INSERT ...
RAISE(IGNORE)` that swallows appends) is `extra`. `stored_problem` is the append's check (promise 9 of
`ledger.recorder`). Imported by the ledger's own modules.

`judge_definition` does the same for the rest of the events table's definition: what a dialect reads back from
the database (`Dialect.definition`: SQLite the table's `sqlite_master.sql` and every index on it; PostgreSQL its
columns, constraints, indexes, row-level security and policies, kind, persistence and inheritance) against the
same read back from a scratch install of the tool's own DDL (`Dialect.installed_definition`), whitespace
normalised. A CHECK, a unique or partial index, a default, a generated or extra column, a foreign key, a policy:
each is one `Deviation`, named in one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

# a trigger flag that means "does not fire for the application's sessions" (PostgreSQL `tgenabled`)
NOT_FIRING = ("D", "R")


def normalise_sql(text: str) -> str:
    """`text` with every run of whitespace as one space and none at either end (what the comparison sees)."""
    return re.sub(r"\s+", " ", text).strip()


def clip(text: str, limit: int = 160) -> str:
    """`text` cut to `limit` characters ("..." at the end when cut): a definition in a one-line message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _difference(found: str, installed: str) -> tuple[str, str]:
    """The parts of `found` and `installed` that differ: their common start and end left out (a word the
    difference begins or ends inside is kept whole)."""
    n = min(len(found), len(installed))
    i = 0
    while i < n and found[i] == installed[i]:
        i += 1
    j = 0
    while j < n - i and found[-1 - j] == installed[-1 - j]:
        j += 1
    while 0 < i and (_inside_word(found, i) or _inside_word(installed, i)):
        i -= 1
    while 0 < j and (_inside_word(found, len(found) - j) or _inside_word(installed, len(installed) - j)):
        j -= 1
    return found[i:len(found) - j].strip(), installed[i:len(installed) - j].strip()


def _inside_word(text: str, at: int) -> bool:
    """Whether position `at` of `text` falls between two characters of one word."""
    return 0 < at < len(text) and (text[at - 1].isalnum() or text[at - 1] == "_") and \
        (text[at].isalnum() or text[at] == "_")


@dataclass(frozen=True)
class Deviation:
    """One object of the events table's definition (the table, a column, a constraint, an index, a policy, its
    row-level security) that is not what the tool installs: `extra` (the tool installs none by that name),
    `missing`, or `altered` (present, defined otherwise). `found` and `installed` are the definitions as the
    database prints them, whitespace normalised ("" for the side that has none)."""

    what: str
    kind: str  # "extra" | "missing" | "altered"
    found: str = ""
    installed: str = ""

    def line(self) -> str:
        """One line naming it and what it is (definitions cut to 160 characters; not escaped)."""
        if self.kind == "extra":
            return f"{self.what} on the events table is not one the tool installs: {clip(self.found)}"
        if self.kind == "missing":
            return f"{self.what} of the events table is missing (the tool installs: {clip(self.installed)})"
        found, installed = (f"'{clip(part)}'" if part else "nothing"
                            for part in _difference(self.found, self.installed))
        subject = "the events table" if self.what == "table events" else f"{self.what} of the events table"
        return f"{subject} is not the definition the tool installs: it has {found} where the tool's has {installed}"

    def to_json(self) -> dict[str, str]:
        return {"object": self.what, "problem": self.kind, "found": self.found, "installed": self.installed}


def judge_definition(installed: Mapping[str, str], found: Mapping[str, str]) -> tuple[Deviation, ...]:
    """Every object of `found` ({object: definition}) that is missing from, differs from or is not in `installed`,
    in `installed`'s order, then the extra ones by name."""
    want = {k: normalise_sql(v) for k, v in installed.items()}
    got = {k: normalise_sql(v) for k, v in found.items()}
    out = [Deviation(k, "missing", "", v) for k, v in want.items() if k not in got]
    out += [Deviation(k, "altered", got[k], v) for k, v in want.items() if k in got and got[k] != v]
    out += [Deviation(k, "extra", got[k], "") for k in sorted(got) if k not in want]
    return tuple(out)


@dataclass(frozen=True)
class TriggerState:
    """The events table's guards against the installed ones; `ok` when all five are empty."""

    missing: tuple[str, ...] = ()  # installed by the tool, absent from the table
    disabled: tuple[str, ...] = ()  # present but switched off (PostgreSQL `tgenabled` 'D' or 'R')
    altered: tuple[str, ...] = ()  # present and enabled, but defined otherwise (or its function's body differs)
    extra: tuple[str, ...] = ()  # on the table, but not one the tool installs
    definition: tuple[Deviation, ...] = ()  # the rest of the table's definition, where it is not the tool's

    @property
    def ok(self) -> bool:
        return not (self.missing or self.disabled or self.altered or self.extra or self.definition)

    def reason(self) -> str:
        """One sentence naming every trigger and other object that is wrong, and why ("intact" when none is)."""
        parts = [f"immutability trigger {', '.join(names)} is {what}" for names, what in (
            (self.missing, "missing"), (self.disabled, "disabled"),
            (self.altered, "not the definition the tool installs")) if names]
        if self.extra:
            parts.append(f"trigger {', '.join(self.extra)} on the events table is not one the tool installs")
        if parts:
            parts[-1] += ": rows can be rewritten or appends swallowed"
        parts += [f"{d.line()}: appends can be refused or changed" for d in self.definition]
        return "; ".join(parts) if parts else "intact"


def judge_triggers(installed: Mapping[str, str], found: Mapping[str, tuple[str, str]]) -> TriggerState:
    """The state of `found` ({name: (enabled flag, definition)}) against `installed` ({name: definition})."""
    missing = tuple(n for n in installed if n not in found)
    disabled = tuple(n for n in installed if n in found and found[n][0] in NOT_FIRING)
    altered = tuple(n for n in installed if n in found and n not in disabled
                    and normalise_sql(found[n][1]) != normalise_sql(installed[n]))
    extra = tuple(sorted(n for n in found if n not in installed))
    return TriggerState(missing, disabled, altered, extra)


def stored_problem(rowcount: int, appended: list[tuple], read_back: tuple | None) -> str | None:
    """Why an append's rows were not all stored (None: they were).

    `rowcount` is the database's count of rows the INSERT stored, `appended` the rows as built (seq first, hash
    last) and `read_back` (rows after the previous head, last seq, its hash) read inside the same transaction."""
    n, last = len(appended), appended[-1]
    if rowcount != n:
        return f"the database stored {rowcount} of the {n} events appended"
    count, seq, digest = read_back or (0, None, None)
    if (int(count or 0), seq, digest) != (n, last[0], last[-1]):
        return (f"after the append the ledger holds {count} new events ending at seq {seq}, not {n} ending at "
                f"seq {last[0]} with the appended hash")
    return None
