"""The deployment lifecycle: phases, the transitions table with its gate predicates, the fold of a
deployment's events into its state, and the Mermaid rendering of the table. No I/O: events in, values out.
"""

from statemachine.fold import FoldError, apply, fold
from statemachine.machine import (
    GATES,
    TRANSITIONS,
    DeploymentMachine,
    GateContext,
    GateRejected,
    GateResult,
    kernel_key,
)
from statemachine.mermaid import mermaid
from statemachine.phases import Phase, Status
from statemachine.state import Attempt, Blocker, DeploymentState, Evidence, PassedPhase

__all__ = [
    "GATES",
    "TRANSITIONS",
    "Attempt",
    "Blocker",
    "DeploymentMachine",
    "DeploymentState",
    "Evidence",
    "FoldError",
    "GateContext",
    "GateRejected",
    "GateResult",
    "PassedPhase",
    "Phase",
    "Status",
    "apply",
    "fold",
    "kernel_key",
    "mermaid",
]
