"""The lifecycle as a Mermaid `stateDiagram-v2`, generated from the transitions table.

Pure and deterministic: the same table gives the same text. Each edge is labelled with its trigger and,
in brackets, the guards it needs (`not name` for an `unless`). Phase states carry their titles.
"""

from __future__ import annotations

from typing import Any

from statemachine.lifecycle import STATES, TRANSITIONS, edges
from statemachine.phases import Status


def mermaid(transitions: list[dict[str, Any]] = TRANSITIONS) -> str:
    rows = edges(transitions)
    states: list[str] = []
    for row in rows:
        for state in (row.source, row.dest):
            if state not in states:
                states.append(state)
    lines = ["stateDiagram-v2"]
    for state in states:
        phase = Status(state).phase if state in STATES else None
        if phase is not None:
            lines.append(f'    state "{state}: {int(phase)} {phase.title}" as {state}')
    lines.append(f"    [*] --> {states[0]}")
    for row in rows:
        guards = [*row.conditions, *(f"not {name}" for name in row.unless)]
        label = f"{row.trigger} [{', '.join(guards)}]" if guards else row.trigger
        lines.append(f"    {row.source} --> {row.dest}: {label}")
    sources = {row.source for row in rows}
    lines.extend(f"    {state} --> [*]" for state in states if state not in sources)
    return "\n".join(lines) + "\n"
