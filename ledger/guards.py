"""The store's own guards, checked: the triggers on the events table against the ones the tool installs, and an
append's rows against what the database says it stored.

`judge_triggers` compares what a dialect reads back from the database (`Dialect.triggers`: each trigger on the
events table, whether it fires, its definition as the database prints it) with what the dialect installs
(`Dialect.installed`: the same text, read back from a fresh install). The definitions are compared after
`normalise_sql` (runs of whitespace as one space), so a trigger that is present and enabled but rewritten
(`WHEN 0`, another body, another function) is `altered`, and one the tool never installs (a `BEFORE INSERT ...
RAISE(IGNORE)` that swallows appends) is `extra`. `stored_problem` is the append's check (promise 9 of
`ledger.recorder`). Imported by the ledger's own modules.
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


@dataclass(frozen=True)
class TriggerState:
    """The events table's guards against the installed ones; `ok` when all four are empty."""

    missing: tuple[str, ...] = ()  # installed by the tool, absent from the table
    disabled: tuple[str, ...] = ()  # present but switched off (PostgreSQL `tgenabled` 'D' or 'R')
    altered: tuple[str, ...] = ()  # present and enabled, but defined otherwise (or its function's body differs)
    extra: tuple[str, ...] = ()  # on the table, but not one the tool installs

    @property
    def ok(self) -> bool:
        return not (self.missing or self.disabled or self.altered or self.extra)

    def reason(self) -> str:
        """One sentence naming every trigger that is wrong, and why ("intact" when none is)."""
        parts = [f"immutability trigger {', '.join(names)} is {what}" for names, what in (
            (self.missing, "missing"), (self.disabled, "disabled"),
            (self.altered, "not the definition the tool installs")) if names]
        if self.extra:
            parts.append(f"trigger {', '.join(self.extra)} on the events table is not one the tool installs")
        return "; ".join(parts) + ": rows can be rewritten or appends swallowed" if parts else "intact"


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
