"""An event stream recorded before a change replays to the same state after it (issue #21).

The fixture is a real ledger written by main at 437d350 (tests/fixtures/streams/README.md says how): today's
code must accept every event, recompute the same hash chain and fold the deployment to the state that
437d350's code folded it to."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path

import pytest

from ledger.canonical import GENESIS_HASH, chain_hash, dumps
from ledger.record import RecordedEvent
from statemachine.fold import fold

STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams"


def _norm(x):
    if isinstance(x, enum.Enum):
        return int(x.value) if isinstance(x.value, int) else x.value
    if dataclasses.is_dataclass(x):
        return {f.name: _norm(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if hasattr(x, "model_dump"):
        return _norm(x.model_dump())
    if isinstance(x, dict):
        return {str(_norm(k)): _norm(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_norm(v) for v in x]
    return x


@pytest.fixture(scope="module")
def recorded():
    rows = json.loads((STREAMS / "tiny_llama_437d350.log.json").read_text())
    events, prev = [], GENESIS_HASH
    for row in rows:
        events.append(RecordedEvent(prev_hash=prev, **row))
        prev = row["hash"]
    return events


def test_the_recorded_chain_verifies_with_todays_hashing(recorded):
    assert len(recorded) == 81 and [e.seq for e in recorded] == list(range(1, 82))
    for e in recorded:
        assert chain_hash(e.prev_hash, e.seq, e.stream_id, e.version, e.event_id, e.type, dumps(e.payload),
                          e.recorded_at) == e.hash, f"seq {e.seq} ({e.type}) hashes differently today"


def test_every_recorded_event_parses_with_todays_vocabulary(recorded):
    """Every recorded field reads back unchanged; a field added since (OptimizationTried.gate_context) takes its
    default, so an old event still means what it meant."""
    for e in recorded:
        now = e.event.to_payload()
        assert {k: now.get(k) for k in e.payload} == e.payload, f"seq {e.seq} ({e.type}) does not round-trip"
        for k in set(now) - set(e.payload):
            field = type(e.event).model_fields[k]
            assert now[k] == field.get_default(call_default_factory=True), f"seq {e.seq}: new field {k} is not its default"


def test_the_recorded_stream_folds_to_the_state_437d350_folded_it_to(recorded):
    expected = json.loads((STREAMS / "tiny_llama_437d350.state.json").read_text())
    state = fold([e for e in recorded if e.stream_id == "deployment:tiny"])
    got = {k: _norm(getattr(state, k)) for k in expected if k != "passed"}
    got = json.loads(json.dumps(got, sort_keys=True, default=str))
    assert got == {k: v for k, v in expected.items() if k != "passed"}
    passed = {str(_norm(k)): {**{f.name: _norm(getattr(v, f.name)) for f in dataclasses.fields(v) if f.name != "evidence"},
                               "evidence_seqs": [ev.seq for ev in v.evidence]} for k, v in state.passed.items()}
    assert json.loads(json.dumps(passed, sort_keys=True, default=str)) == expected["passed"]
    assert state.status.value == "deployed" and state.evaluation == "PASS"
