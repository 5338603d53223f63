"""The read side of the deployment commands: `ledger status` (one row per deployment, an unreplayable stream
reported beside the others) and `ledger history` (the stream, refused when it cannot be replayed).

Imported through `handlers.deploy`.
"""

from __future__ import annotations

from typing import Any

from handlers.uow import DeploymentError, DeploymentUnit, existing_name, stream_id
from ledger import Ledger
from statemachine.fold import FoldError, fold
from statemachine.state import INCONCLUSIVE_IN_A_ROW
from ledger.streams import DEPLOYMENT_PREFIX, deployment_name


def status(ledger: Ledger, name: str | None = None) -> list[dict[str, Any]]:
    names = [name] if name else [deployment_name(s) for s in ledger.streams(DEPLOYMENT_PREFIX)]
    rows = []
    for n in names:
        try:
            state = DeploymentUnit(ledger, n).state
        except FoldError as e:  # one impossible stream is reported; every other deployment is still listed
            rows.append({"name": n, "status": "unreplayable", "error": str(e), "next_phase": None,
                         "phases_passed": [], "executor": "", "target": "", "last_verdict": "", "blockers": [],
                         "triage": None, "evaluation": None, "version": None})
            continue
        triage = state.last_triage
        rows.append({
            "name": n,
            "status": state.status.value,
            "next_phase": int(state.next_phase) if state.next_phase is not None else None,
            "phases_passed": sorted(int(p) for p in state.passed),
            "executor": state.executor,
            "target": state.target,
            "last_verdict": state.last_verdict,
            "blockers": [{"seq": b.seq, "phase": int(b.phase), "reason": b.reason} for b in state.blockers],
            "triage": None if triage is None else {
                "subject_seq": triage.subject_seq, "summary": triage.summary,
                "matches": [{k: m.get(k) for k in ("rule_id", "root_cause", "remedy", "confidence")} for m in triage.matches[:3]],
            },
            "evaluation": state.evaluation,
            "version": state.version,
            **({"inconclusive": {**state.last_inconclusive, "limit": INCONCLUSIVE_IN_A_ROW}}
               if state.last_inconclusive else {}),
        })
    return rows


def history(ledger: Ledger, name: str) -> list[dict[str, Any]]:
    name = existing_name(ledger, name)  # NFC unless an older ledger holds it otherwise
    events = ledger.read_stream(stream_id(name))
    if not events:
        raise DeploymentError(f"no deployment named {name!r}")
    fold(events)  # refuse to narrate an impossible stream
    return [{"seq": e.seq, "version": e.version, "at": e.recorded_at, "type": e.type, "payload": e.payload} for e in events]
