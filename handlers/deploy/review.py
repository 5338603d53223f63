"""A person's word on a deployment: `ledger resume` after a blocker (what was fixed) and `ledger lesson`.

Imported through `handlers.deploy`.
"""

from __future__ import annotations

from handlers.inputs import bounded_text
from handlers.uow import DeploymentError, DeploymentUnit
from ledger import Ledger
from ledger.events import DeploymentResumed, LessonRecorded
from statemachine.phases import Status


def resume(ledger: Ledger, name: str, note: str) -> None:
    unit = DeploymentUnit(ledger, name)
    state = unit.state
    if state.status is not Status.NEEDS_HUMAN_REVIEW or not state.blockers:
        raise DeploymentError(f"{name} has no active blocker to resume from (status {state.status.value})")
    if not note.strip():
        raise DeploymentError("say what was fixed: --note \"...\"")
    bounded_text(note, "note")
    unit.commit([DeploymentResumed(phase=int(state.blockers[-1].phase), note=note.strip())])


def lesson(ledger: Ledger, name: str, text: str, phase: int | None = None) -> int:
    bounded_text(text, "lesson")  # CLI and MCP alike (handlers.inputs)
    unit = DeploymentUnit(ledger, name)
    return unit.commit([LessonRecorded(text=text.strip(), phase=phase)])[0]
