"""The lifecycle machine: the table of `statemachine.lifecycle` with the predicates of
`statemachine.predicates` as its guards, rebuilt at the folded status of one deployment.

`DeploymentMachine(state, context).try_pass(phase)` is what a handler calls before appending PhasePassed:
it raises `GateRejected` with the reason (transitions' own failed guard is silent). Nothing here does I/O;
the machine's status is a value the next fold will confirm, never a thing that is stored.
"""

from __future__ import annotations

from functools import partial

from transitions import Machine

from statemachine.gate import GateContext, GateRejected, GateResult
from statemachine.lifecycle import STATES, TRANSITIONS
from statemachine.phases import Phase, Status
from statemachine.predicates import CONDITIONS, PREDICATES
from statemachine.state import DeploymentState


class Lifecycle:
    """The plain model `transitions` drives: `state` is the status, and every condition named in
    TRANSITIONS is an attribute answering from the folded deployment and the gate context. Each predicate is
    judged at most once per machine (`judge`): the folded evidence does not change while the machine lives, so
    the guard `transitions` evaluates reads the result `try_pass` already has."""

    def __init__(self, deployment: DeploymentState, context: GateContext) -> None:
        self.deployment = deployment
        self.context = context
        self.results: dict[str, GateResult] = {}
        for name in CONDITIONS:
            setattr(self, name, partial(self._holds, name))

    def judge(self, name: str) -> GateResult:
        if name not in self.results:
            self.results[name] = CONDITIONS[name](self.deployment, self.context)
        return self.results[name]

    def _holds(self, name: str) -> bool:
        return self.judge(name).ok


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
        return self.model.judge(PREDICATES[Phase(phase)].__name__)

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
        if not self.model.trigger(phase.pass_trigger):  # the guard reads the same judgement (Lifecycle.judge)
            raise GateRejected(phase, f"{phase.pass_trigger} refused by the state machine")
        return result
