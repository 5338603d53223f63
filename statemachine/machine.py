"""The lifecycle machine: the table of `statemachine.lifecycle` with the predicates of
`statemachine.predicates` as its guards, rebuilt at the folded status of one deployment.

`DeploymentMachine(state, context).try_pass(phase)` is what a handler calls before appending PhasePassed:
it raises `GateRejected` with the reason (transitions' own failed guard is silent). Nothing here does I/O;
the machine's status is a value the next fold will confirm, never a thing that is stored.
"""

from __future__ import annotations

from functools import partial

from transitions import Machine

from statemachine.gate import GateContext, GateRejected, GateResult, Predicate
from statemachine.lifecycle import STATES, TRANSITIONS
from statemachine.phases import Phase, Status
from statemachine.predicates import CONDITIONS, GATES
from statemachine.state import DeploymentState


def _holds(predicate: Predicate, state: DeploymentState, context: GateContext) -> bool:
    return predicate(state, context).ok


class Lifecycle:
    """The plain model `transitions` drives: `state` is the status, and every condition named in
    TRANSITIONS is an attribute answering from the folded deployment and the gate context."""

    def __init__(self, deployment: DeploymentState, context: GateContext) -> None:
        self.deployment = deployment
        self.context = context
        for name, predicate in CONDITIONS.items():
            setattr(self, name, partial(_holds, predicate, deployment, context))


class DeploymentMachine:
    """The lifecycle machine rebuilt at the folded status of one deployment.

    Build one per fold: `try_pass` moves the machine's status, not the deployment; the PhasePassed the
    handler then appends is what moves the deployment, on the next fold.
    """

    def __init__(self, state: DeploymentState, context: GateContext | None = None) -> None:
        self.deployment = state
        self.context = context or GateContext()
        self.model = Lifecycle(state, self.context)
        self.machine = Machine(model=self.model, states=STATES, transitions=TRANSITIONS,
                               initial=state.status.value, auto_transitions=False)

    @property
    def status(self) -> Status:
        return Status(self.model.state)

    def triggers(self) -> list[str]:
        """The triggers that have a row from the current status (their guards not evaluated)."""
        return self.machine.get_triggers(self.model.state)

    def check(self, phase: int) -> GateResult:
        """Run phase's gate predicate on the folded evidence, without moving anything."""
        return GATES[Phase(phase)](self.deployment, self.context)

    def try_pass(self, phase: int) -> GateResult:
        """Open phase's gate or raise `GateRejected` naming the unmet criterion.

        Refused unless phase is the next gate and its attempt is open. Returns the passing result, whose
        reason summarises the evidence (handlers may use it as the PhasePassed summary).
        """
        phase = Phase(phase)
        if self.status is not phase.status:
            if self.status is Status.NEEDS_HUMAN_REVIEW:
                raise GateRejected(phase, "the deployment needs human review: resume it first")
            raise GateRejected(phase, f"the deployment is at {self.status.value}, not {phase.status.value}")
        if not self.deployment.attempt_open(phase):
            raise GateRejected(phase, f"no open attempt of phase {int(phase)}: record PhaseStarted first")
        result = self.check(phase)
        if not result.ok:
            raise GateRejected(phase, result.reason)
        if not self.model.trigger(phase.pass_trigger):  # the guard re-evaluates the same predicate
            raise GateRejected(phase, f"{phase.pass_trigger} refused by the state machine")
        return result
