"""The deployment lifecycle: phases (`phases`), the transitions table (`lifecycle`), the gate predicates it
names (`predicates`, with the per-event `checks` and the `gate` context / result types), the machine that
puts them together (`machine`), the fold of a deployment's events into its state (`fold`, `state`) and the
Mermaid rendering of the table. No I/O: events in, values out. Imports only `ledger.events` / `ledger.record`
and `npu_kernels.thresholds`; everything else may import it.
"""

from statemachine.fold import FoldError, apply, fold
from statemachine.gate import GateContext, GateRejected, GateResult, kernel_key
from statemachine.lifecycle import TRANSITIONS
from statemachine.machine import DeploymentMachine
from statemachine.mermaid import mermaid
from statemachine.phases import Phase, Status
from statemachine.predicates import PREDICATES
from statemachine.state import Attempt, Blocker, DeploymentState, Evidence, PassedPhase

__all__ = [
    "PREDICATES",
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
