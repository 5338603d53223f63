"""A SpeculationChecked judged from its own recorded streams (statemachine.checks.speculation_problem) and re-checked
by the evaluator (handlers.evaluator.audit.check_speculation): exactness is the verdict, the acceptance length a
figure that must be its recorded lengths' mean and standard error."""

from __future__ import annotations

from handlers.evaluator.audit import check_speculation
from ledger.events import ArchitectureAssessed, DeploymentRequested, PhasePassed, PhaseStarted, SpeculationChecked
from ledger.record import RecordedEvent
from statemachine import DeploymentMachine, fold
from statemachine.checks import speculation_problem
from tests.unit.test_machine import config, optimisation, perf, recorded

TOKENS = list(range(10, 42))  # 32 tokens


def _event(spec=TOKENS, **kw) -> SpeculationChecked:
    rows = [{"index": 0, "prompt": "p0", "tokens_spec": TOKENS, "tokens_plain": TOKENS, "first_divergence": None,
             "acceptance": [1, 2, 3]},
            {"index": 1, "prompt": "p1", "tokens_spec": list(spec), "tokens_plain": TOKENS,
             "first_divergence": None if list(spec) == TOKENS else 5, "acceptance": [2, 2]}]
    exact = sum(r["first_divergence"] is None for r in rows)
    fields = dict(executor="emulated", block=2, n_tokens=32, prompts=rows, passed=exact == 2, exact_prompts=exact,
                  acceptance_mean=2.0, acceptance_sem=0.31622776601683794, n_verify_passes=5,
                  source="cpu-emulator", provenance_class="cpu-emulator")
    return SpeculationChecked(**{**fields, **kw})


def _record(e: SpeculationChecked) -> RecordedEvent:
    return RecordedEvent(7, "deployment:t", 7, "id", "SpeculationChecked", e.to_payload(), "2026-12-04T00:00:00Z")


def test_equal_streams_accept_speculation_and_the_figure_re_derives():
    e = _event()
    assert speculation_problem(e) is None and check_speculation(_record(e)) == []


def test_a_stream_that_leaves_the_plain_one_refuses_it_naming_the_step():
    spec = TOKENS[:5] + [99] + TOKENS[6:]
    e = _event(spec)
    assert not e.passed and "prompt 1: the tokens with the drafter differ from those without it at step 5" in \
        speculation_problem(e)
    forged = _event(spec, passed=True, exact_prompts=2)
    assert any("says passed but" in p for p in check_speculation(_record(forged)))
    hidden = _event(spec).model_copy(update={"prompts": [*_event().prompts[:1], {**_event(spec).prompts[1],
                                                                                 "first_divergence": None}]})
    assert "contradicts its streams" in speculation_problem(hidden)


def test_an_acceptance_figure_that_is_not_its_lengths_is_an_audit_finding_but_never_the_verdict():
    e = _event(acceptance_mean=2.5)
    assert speculation_problem(e) is None  # the figure decides nothing
    assert any("acceptance_mean 2.5" in p for p in check_speculation(_record(e)))
    assert any("n_verify_passes 6" in p for p in check_speculation(_record(_event(n_verify_passes=6))))


def test_a_drill_never_accepts_speculation_even_when_its_streams_stayed_exact():
    assert "a drill" in speculation_problem(_event(faults=["spec_accept_off_by_one"]))


def _gate_5(*evidence, drafter=True):
    """Gate 5 of a deployment (with a declared drafter unless not `drafter`) whose open attempt holds a faster
    decode and `evidence`."""
    events = [DeploymentRequested(model_path="/m", name="x", drafter={"path": "/d", "block": 2} if drafter else {}),
              ArchitectureAssessed(architecture="LlamaForCausalLM", in_scope=True), config()]
    for p in range(5):
        events += [PhaseStarted(phase=p, attempt=1), PhasePassed(phase=p, attempt=1)]
    events += [PhaseStarted(phase=5, attempt=1), perf(5, 30.0), optimisation(5), perf(5, 25.0), *evidence]
    return DeploymentMachine(fold(recorded(*events))).check(5)


def test_gate_5_of_a_deployment_with_a_drafter_needs_exact_speculation_and_only_then():
    assert _gate_5(drafter=False)  # no drafter: the decode figures alone, as before
    missing = _gate_5()
    assert not missing and "without a SpeculationChecked" in missing.reason
    assert _gate_5(_event()) and "speculation exact on 2 prompt(s)" in _gate_5(_event()).reason
    refused = _gate_5(_event(TOKENS[:5] + [99] + TOKENS[6:]))
    assert not refused and "SpeculationChecked seq 18: prompt 1" in refused.reason and "step 5" in refused.reason
