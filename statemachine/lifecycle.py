"""The deployment lifecycle as one table.

`TRANSITIONS` is the whole lifecycle: a reviewer reads every gate (the `conditions` of each `pass_phase_N`)
without reading code, `mermaid()` draws it, and `fold` refuses any status change that is not a row of it.
There is no row from `phaseN` to `phaseN+2`: a gate cannot be skipped. The conditions it names are the
predicates of `statemachine.predicates`; `statemachine.machine` puts the two together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statemachine.phases import Phase, Status

_PHASE_STATES = [p.status.value for p in Phase]

TRANSITIONS: list[dict[str, Any]] = [
    # architecture assessment: in scope starts Phase 0, out of scope ends the deployment
    {"trigger": "assess", "source": "requested", "dest": "phase0"},
    {"trigger": "reject", "source": "requested", "dest": "rejected"},
    # the gates, in order; each opens only when its predicate holds on the open attempt's evidence
    {"trigger": "pass_phase_0", "source": "phase0", "dest": "phase1", "conditions": "gate_0_reference_ok"},
    {"trigger": "pass_phase_1", "source": "phase1", "dest": "phase2", "conditions": "gate_1_all_kernels_pass"},
    {"trigger": "pass_phase_2", "source": "phase2", "dest": "phase3", "conditions": "gate_2_block_ok"},
    {"trigger": "pass_phase_3", "source": "phase3", "dest": "phase4", "conditions": "gate_3_token_gate_ok"},
    {"trigger": "pass_phase_4", "source": "phase4", "dest": "phase5",
     "conditions": "gate_4_prefill_faster_and_gate_kept"},
    {"trigger": "pass_phase_5", "source": "phase5", "dest": "phase6",
     "conditions": "gate_5_decode_faster_and_gate_kept"},
    {"trigger": "pass_phase_6", "source": "phase6", "dest": "phase7", "conditions": "gate_6_finalized"},
    {"trigger": "pass_phase_7", "source": "phase7", "dest": "deployed", "conditions": "gate_7_evaluation_passed"},
    # a failed gate is retried once; the next failure (or a Phase 7 FAIL) goes to a human
    *({"trigger": p.fail_trigger, "source": p.status.value, "dest": "needs_human_review",
       "conditions": "no_retry_left"} for p in Phase),
    *({"trigger": p.fail_trigger, "source": p.status.value, "dest": p.status.value,
       "unless": "no_retry_left"} for p in Phase),
    # an attempt whose device run timed out on every try gave no verdict: it closes without passing or counting as a
    # failure, and the gate is attempted again; INCONCLUSIVE_IN_A_ROW of them in a row go to a human
    *({"trigger": p.inconclusive_trigger, "source": p.status.value, "dest": "needs_human_review",
       "conditions": "inconclusive_limit_reached"} for p in Phase),
    *({"trigger": p.inconclusive_trigger, "source": p.status.value, "dest": p.status.value,
       "unless": "inconclusive_limit_reached"} for p in Phase),
    # a blocker stops the deployment until a human records the fix; resuming returns to the blocked phase
    # (a deployed model whose re-audit fails is blocked at Phase 7 as well)
    {"trigger": "raise_blocker", "source": [*_PHASE_STATES, "deployed", "needs_human_review"],
     "dest": "needs_human_review"},
    *({"trigger": "resume", "source": "needs_human_review", "dest": p.status.value,
       "conditions": f"blocked_at_phase_{int(p)}"} for p in Phase),
]

STATES = [s.value for s in Status]


@dataclass(frozen=True)
class Edge:
    """One row of the table with a single source."""

    trigger: str
    source: str
    dest: str
    conditions: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()


def edges(transitions: list[dict[str, Any]] = TRANSITIONS) -> list[Edge]:
    """The table's rows, one per source state, in table order."""

    def names(value: str | list[str] | None) -> tuple[str, ...]:
        return () if value is None else (value,) if isinstance(value, str) else tuple(value)

    return [
        Edge(row["trigger"], source, row["dest"], names(row.get("conditions")), names(row.get("unless")))
        for row in transitions
        for source in names(row["source"])
    ]
