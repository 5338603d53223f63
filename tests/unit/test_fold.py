"""The fold: a deployment's state is its events replayed, and impossible streams are refused by name."""

from __future__ import annotations

import dataclasses

import pytest

from ledger.events import (
    ArchitectureAssessed,
    BlockerRaised,
    BlockValidated,
    ConfigResolved,
    DeploymentRequested,
    DeploymentResumed,
    EvaluationRecorded,
    Event,
    FailureTriaged,
    KernelVerified,
    LayerDiagnosed,
    LessonRecorded,
    OptimizationTried,
    PerformanceMeasured,
    PhaseFailed,
    PhaseInconclusive,
    PhasePassed,
    PhaseStarted,
    ReferenceBaselineRecorded,
    TokenGateChecked,
    WeightsChecked,
)
from ledger.record import RecordedEvent
from statemachine import FoldError, Phase, Status, apply, fold


def recorded(*events: Event) -> list[RecordedEvent]:
    return [
        RecordedEvent(seq=i, stream_id="deployment:x", version=i, event_id=str(i), type=ev.type_name,
                      payload=ev.to_payload(), recorded_at="2026-11-29T00:00:00Z")
        for i, ev in enumerate(events, 1)
    ]


REQUESTED = DeploymentRequested(model_path="/models/tiny", name="x", pipeline={"seq_first": False})
IN_SCOPE = ArchitectureAssessed(architecture="LlamaForCausalLM", in_scope=True)
CONFIG = ConfigResolved(n_layers=2, emb_dim=64, n_heads=4, n_kv_heads=2, head_dim=16, hidden_dim=128,
                        vocab_size=256, rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                        qkv_bias=False, qk_norm=False)
WEIGHTS = WeightsChecked(ok=True, n_tensors=21, expected=21)
KERNEL = KernelVerified(kernel="GEMM", shape={"M": 2048, "K": 64, "N": 64}, contract="bf16->bf16 high",
                        executor="emulated", verdict="PASS", rtol=1.6e-2, atol=1.5e-3, mismatches=0)
BLOCK = BlockValidated(layer=0, executor="emulated", n_positions=8, cosine=0.999, per_position_min=0.995, p5=0.996,
                       median=0.998, max_abs=0.01, max_rel=0.02, nan_count=0,
                       thresholds={"cosine": 0.99, "per_position_min": 0.99}, passed=True)
TOKENS = TokenGateChecked(prompt_index=0, prompt="hello", executor="emulated", n_tokens=32, passed=True,
                          agreed_prefix=32)
OPTIMISED = OptimizationTried(phase=4, optimisation="seq_first", outcome="applied", gate_passed=True)
EVALUATED = EvaluationRecorded(verdict="PASS")


def gate(phase: int, *evidence: Event, attempt: int = 1) -> list[Event]:
    return [PhaseStarted(phase=phase, attempt=attempt), *evidence,
            PhasePassed(phase=phase, attempt=attempt, summary="ok")]


def failed(phase: int, attempt: int, *evidence: Event) -> list[Event]:
    return [PhaseStarted(phase=phase, attempt=attempt), *evidence,
            PhaseFailed(phase=phase, attempt=attempt, reasons=["cosine 0.98 < 0.99"])]


def through(phase: int) -> list[Event]:
    """A stream whose gates 0 .. phase-1 passed (evidence trimmed to what the fold looks at)."""
    return [REQUESTED, IN_SCOPE, CONFIG, *(e for p in range(phase) for e in gate(p))]


def happy_events() -> list[Event]:
    return [
        REQUESTED, IN_SCOPE,
        *gate(0, CONFIG, WEIGHTS, ReferenceBaselineRecorded(
            prompt="The capital of France is", n_prompt_tokens=6, top1_token=42, top1_text=" Paris", top1_prob=0.6,
            entropy=2.0, logits_finite=True, logit_max=20.0, logit_min=-10.0, logit_mean=0.0, logit_std=3.0,
            thresholds={"top1_prob_min": 0.01}, passed=True)),
        *gate(1, KERNEL),
        *gate(2, BLOCK),
        *gate(3, TOKENS, LayerDiagnosed(layer=0, executor="emulated", cos_min=0.99, cos_p5=0.99, cos_median=1.0,
                                        cos_mean=1.0, max_abs=0.01, mean_abs=0.001)),
        *gate(4, PerformanceMeasured(phase=4, executor="emulated", prefill_s=2.0), OPTIMISED,
              PerformanceMeasured(phase=4, executor="emulated", prefill_s=1.5)),
        *gate(5, PerformanceMeasured(phase=5, executor="emulated", ms_per_token=30.0),
              PerformanceMeasured(phase=5, executor="emulated", ms_per_token=25.0)),
        *gate(6, TOKENS, PerformanceMeasured(phase=6, executor="emulated", ttft_s=1.5, tokens_per_s=40.0)),
        *gate(7, EVALUATED),
    ]


def test_a_happy_stream_folds_to_deployed() -> None:
    events = recorded(*happy_events())
    state = fold(events)
    assert state.status is Status.DEPLOYED
    assert state.next_phase is None
    assert state.version == len(events) and state.last_seq == len(events)
    assert (state.name, state.model_path, state.target, state.dtype) == ("x", "/models/tiny", "npu2", "bf16")
    assert list(state.passed) == list(Phase)
    assert state.config is not None and state.config["head_dim"] == 16
    assert state.architecture is not None and state.architecture.in_scope
    assert state.open_attempt is None and state.evidence == ()
    assert state.pipeline == {"seq_first": True}
    optimised_seq = next(r.seq for r in events if r.type == "OptimizationTried")
    assert state.applied_optimisations == {"seq_first": optimised_seq}
    assert state.evaluation == "PASS"
    assert state.last_verdict == "phase 7 (independent evaluation) passed, attempt 1: ok"


def test_a_passed_phase_keeps_its_seq_and_the_evidence_of_its_attempt() -> None:
    events = recorded(*happy_events())
    state = fold(events)
    block_seq = next(r.seq for r in events if r.type == "BlockValidated")
    passed_2 = state.passed[Phase.BLOCK]
    assert passed_2.seq == block_seq + 1 and passed_2.attempt == 1
    assert [e.seq for e in passed_2.evidence] == [block_seq]
    assert passed_2.evidence[0].event == BLOCK


def test_an_open_attempt_collects_the_evidence_recorded_while_it_is_open() -> None:
    lesson = LessonRecorded(text="tile_n 128 is the knob")
    state = fold(recorded(*through(2), lesson, PhaseStarted(phase=2, attempt=1), BLOCK))
    assert state.status is Status.PHASE2 and state.attempt_open(2)
    assert [e.event for e in state.evidence] == [BLOCK]
    assert state.open_attempt is not None and state.open_attempt.started_seq == state.last_seq - 1


def test_a_retry_starts_with_no_evidence_from_the_failed_attempt() -> None:
    state = fold(recorded(*through(2), *failed(2, 1, BLOCK), PhaseStarted(phase=2, attempt=2)))
    assert state.status is Status.PHASE2
    assert state.evidence == ()
    assert state.failures == {Phase.BLOCK: 1}


def test_a_version_gap_is_refused_naming_the_seq() -> None:
    events = recorded(*through(1))
    events[3] = dataclasses.replace(events[3], version=5)
    with pytest.raises(FoldError, match=r"seq=4 version=5: version gap: expected version 4") as refused:
        fold(events)
    assert (refused.value.seq, refused.value.version) == (4, 5)


def test_a_first_event_with_a_version_other_than_1_is_refused() -> None:
    events = [dataclasses.replace(recorded(REQUESTED)[0], version=2)]
    with pytest.raises(FoldError, match="version gap"):
        fold(events)


def test_phase_passed_3_before_phase_passed_2_is_refused_naming_the_event() -> None:
    events = recorded(*through(2), PhaseStarted(phase=2, attempt=1), PhasePassed(phase=3, attempt=1))
    with pytest.raises(FoldError) as refused:
        fold(events)
    assert str(refused.value).startswith(f"PhasePassed(phase=3) seq={len(events)} version={len(events)}: ")
    assert "phase2" in str(refused.value)
    assert refused.value.event_type == "PhasePassed"


def test_phase_started_for_a_phase_that_is_not_next_is_refused() -> None:
    with pytest.raises(FoldError, match=r"PhaseStarted\(phase=3\) .* phase 3 is not the next gate"):
        fold(recorded(*through(2), PhaseStarted(phase=3, attempt=1)))


def test_phase_started_twice_without_a_verdict_is_refused() -> None:
    with pytest.raises(FoldError, match="attempt 1 of phase 2 is still open"):
        fold(recorded(*through(2), PhaseStarted(phase=2, attempt=1), PhaseStarted(phase=2, attempt=2)))


def test_a_verdict_without_an_open_attempt_of_its_phase_is_refused() -> None:
    with pytest.raises(FoldError, match=r"PhasePassed\(phase=2\) .* no open attempt of phase 2"):
        fold(recorded(*through(2), PhasePassed(phase=2, attempt=1)))
    with pytest.raises(FoldError, match=r"PhaseFailed\(phase=2\) .* no open attempt of phase 2"):
        fold(recorded(*through(2), PhaseFailed(phase=2, attempt=1, reasons=["x"])))


def test_a_verdict_for_another_attempt_than_the_open_one_is_refused() -> None:
    with pytest.raises(FoldError, match="attempt 2 is not the open attempt 1"):
        fold(recorded(*through(2), PhaseStarted(phase=2, attempt=1), PhasePassed(phase=2, attempt=2)))


def test_attempt_numbers_must_increase_by_one() -> None:
    with pytest.raises(FoldError, match="attempt 2 of phase 0: expected attempt 1"):
        fold(recorded(REQUESTED, IN_SCOPE, PhaseStarted(phase=0, attempt=2)))
    with pytest.raises(FoldError, match="attempt 3 of phase 2: expected attempt 2"):
        fold(recorded(*through(2), *failed(2, 1), PhaseStarted(phase=2, attempt=3)))


def test_any_event_before_deployment_requested_is_refused() -> None:
    with pytest.raises(FoldError, match="must start with DeploymentRequested"):
        fold(recorded(IN_SCOPE, REQUESTED))
    with pytest.raises(FoldError, match=r"^KernelVerified seq=1 version=1"):
        fold(recorded(KERNEL))


def test_a_second_deployment_requested_is_refused() -> None:
    with pytest.raises(FoldError, match="already requested"):
        fold(recorded(REQUESTED, REQUESTED))


def test_an_event_from_another_stream_is_refused() -> None:
    events = recorded(REQUESTED, IN_SCOPE)
    events[1] = dataclasses.replace(events[1], stream_id="deployment:y")
    with pytest.raises(FoldError, match="belongs to stream 'deployment:y'"):
        fold(events)


def test_an_empty_stream_cannot_be_folded() -> None:
    with pytest.raises(ValueError, match="empty stream"):
        fold([])


def test_an_out_of_scope_architecture_is_rejected_and_takes_no_phase_events() -> None:
    out = ArchitectureAssessed(architecture="MixtralForCausalLM", in_scope=False, reasons=["MoE"])
    state = fold(recorded(REQUESTED, out))
    assert state.status is Status.REJECTED and state.next_phase is None
    assert "MoE" in state.last_verdict
    with pytest.raises(FoldError, match=r"PhaseStarted\(phase=0\) .* status 'rejected'"):
        fold(recorded(REQUESTED, out, PhaseStarted(phase=0, attempt=1)))
    with pytest.raises(FoldError, match=r"ArchitectureAssessed .* status 'rejected'"):
        fold(recorded(REQUESTED, out, IN_SCOPE))


def test_a_first_failure_leaves_the_gate_next_with_one_retry() -> None:
    state = fold(recorded(*through(2), *failed(2, 1, BLOCK)))
    assert state.status is Status.PHASE2 and state.next_phase is Phase.BLOCK
    assert state.attempts == {**{p: 1 for p in Phase if p < 2}, Phase.BLOCK: 1}
    assert not state.attempt_open(2) and state.attempt_number(2) == 2
    assert state.last_verdict == "phase 2 (single block) failed, attempt 1: cosine 0.98 < 0.99"


def test_retry_then_blocker_then_resume_allows_one_more_attempt() -> None:
    triage = FailureTriaged(subject_type="PhaseFailed", summary="RoPE table off by one")
    events = [*through(2), *failed(2, 1), *failed(2, 2), triage]
    state = fold(recorded(*events))
    assert state.status is Status.NEEDS_HUMAN_REVIEW and state.next_phase is Phase.BLOCK
    assert state.failures == {Phase.BLOCK: 2} and state.blockers == ()
    assert state.last_triage == triage
    with pytest.raises(FoldError, match="needs human review at phase 2: resume it first"):
        fold(recorded(*events, PhaseStarted(phase=2, attempt=3)))
    with pytest.raises(FoldError, match="no active blocker"):
        fold(recorded(*events, DeploymentResumed(phase=2, note="fixed")))

    events += [BlockerRaised(phase=2, reason="block cosine below threshold twice")]
    state = fold(recorded(*events))
    assert state.status is Status.NEEDS_HUMAN_REVIEW
    assert [(b.phase, b.seq) for b in state.blockers] == [(Phase.BLOCK, state.last_seq)]
    with pytest.raises(FoldError, match="the blocker is at phase 2, not phase 3"):
        fold(recorded(*events, DeploymentResumed(phase=3, note="fixed")))

    events += [DeploymentResumed(phase=2, note="fixed the RoPE table")]
    state = fold(recorded(*events))
    assert state.status is Status.PHASE2 and state.blockers == ()
    assert state.failures == {Phase.BLOCK: 0} and state.resumes == {Phase.BLOCK: 1}

    # the resumed attempt is the only one: its failure goes straight back to a human
    assert fold(recorded(*events, *failed(2, 3))).status is Status.NEEDS_HUMAN_REVIEW
    assert fold(recorded(*events, *gate(2, BLOCK, attempt=3))).status is Status.PHASE3


def test_a_blocker_may_stop_a_gate_before_its_retry_is_spent() -> None:
    state = fold(recorded(*through(1), *failed(1, 1), BlockerRaised(phase=1, reason="no NPU")))
    assert state.status is Status.NEEDS_HUMAN_REVIEW


def test_a_blocker_is_refused_while_an_attempt_is_open_or_for_another_phase() -> None:
    with pytest.raises(FoldError, match="close it with PhaseFailed"):
        fold(recorded(*through(1), PhaseStarted(phase=1, attempt=1), BlockerRaised(phase=1, reason="x")))
    with pytest.raises(FoldError, match="at phase 1, not phase 4"):
        fold(recorded(*through(1), BlockerRaised(phase=4, reason="x")))
    with pytest.raises(FoldError, match="only be blocked by its evaluation"):
        fold(recorded(*happy_events(), BlockerRaised(phase=3, reason="x")))


def test_a_deployed_model_whose_re_audit_fails_is_blocked_at_phase_7() -> None:
    state = fold(recorded(*happy_events(), EvaluationRecorded(verdict="FAIL"), BlockerRaised(phase=7, reason="re-audit")))
    assert state.status is Status.NEEDS_HUMAN_REVIEW and state.next_phase == 7
    assert [b.phase for b in state.blockers] == [7]


def test_resume_without_an_active_blocker_is_refused() -> None:
    with pytest.raises(FoldError, match=r"DeploymentResumed\(phase=1\) .* no active blocker"):
        fold(recorded(*through(1), DeploymentResumed(phase=1, note="nothing to fix")))


def test_phase_7_passes_only_on_a_passing_evaluation_in_its_attempt() -> None:
    with pytest.raises(FoldError, match="says nothing"):
        fold(recorded(*through(7), *gate(7)))
    # an evaluation from an earlier, failed attempt does not count
    with pytest.raises(FoldError, match="says nothing"):
        fold(recorded(*through(7), PhaseStarted(phase=7, attempt=1), EVALUATED,
                      PhaseFailed(phase=7, attempt=1, reasons=["report missing"]), *gate(7, attempt=2)))
    warned = fold(recorded(*through(7), *gate(7, EvaluationRecorded(verdict="PASS-with-warnings"))))
    assert warned.status is Status.DEPLOYED and warned.evaluation == "PASS-with-warnings"


def test_an_evaluation_fail_sends_the_deployment_to_human_review_at_once() -> None:
    fail = EvaluationRecorded(verdict="FAIL", findings=[{"severity": "error", "seq": 12, "message": "faked"}])
    events = [*through(7), PhaseStarted(phase=7, attempt=1), fail]
    with pytest.raises(FoldError, match="the attempt's says FAIL"):
        fold(recorded(*events, PhasePassed(phase=7, attempt=1)))
    events += [PhaseFailed(phase=7, attempt=1, reasons=["evaluation FAIL"])]
    state = fold(recorded(*events))
    assert state.status is Status.NEEDS_HUMAN_REVIEW and state.evaluation == "FAIL"
    events += [BlockerRaised(phase=7, reason="evaluation FAIL"), DeploymentResumed(phase=7, note="re-measured")]
    state = fold(recorded(*events, *gate(7, EVALUATED, attempt=2)))
    assert state.status is Status.DEPLOYED


def test_a_reverted_optimisation_is_no_longer_applied() -> None:
    reverted = OptimizationTried(phase=4, optimisation="seq_first", outcome="reverted", gate_passed=False)
    skipped = OptimizationTried(phase=4, optimisation="bo_reuse", outcome="skipped")
    state = fold(recorded(*through(4), PhaseStarted(phase=4, attempt=1), OPTIMISED, skipped, reverted))
    assert state.applied_optimisations == {}
    assert state.pipeline == {"seq_first": False}


def test_the_config_cannot_change_after_phase_0_passed() -> None:
    with pytest.raises(FoldError, match=r"ConfigResolved seq=\d+ .* after Phase 0 passed"):
        fold(recorded(*through(1), CONFIG))


def test_apply_returns_a_new_state_and_leaves_the_given_one_alone() -> None:
    events = recorded(*through(2), PhaseStarted(phase=2, attempt=1))
    before = fold(events)
    snapshot = dataclasses.replace(before)
    after = apply(before, dataclasses.replace(recorded(*through(2), PhaseStarted(phase=2, attempt=1), BLOCK)[-1]))
    assert before == snapshot and before.evidence == ()
    assert [e.event for e in after.evidence] == [BLOCK]


def test_an_unreadable_payload_is_refused_naming_the_event() -> None:
    events = recorded(*through(1))
    events[-1] = dataclasses.replace(events[-1], payload={"phase": "zero"})
    with pytest.raises(FoldError, match=rf"seq={len(events)} .* unreadable event"):
        fold(events)


# --- inconclusive attempts (issue 46 item 4) ----------------------------------------------------------------------


def inconclusive(phase: int, attempt: int) -> list[Event]:
    return [PhaseStarted(phase=phase, attempt=attempt),
            PhaseInconclusive(phase=phase, attempt=attempt, reasons=["inconclusive: gave no verdict on each of 3 tries"],
                              tries=3)]


def test_an_inconclusive_attempt_closes_without_passing_or_counting_as_a_failure() -> None:
    state = fold(recorded(*through(2), *inconclusive(2, 1)))
    assert state.status is Status.PHASE2 and state.open_attempt is None and Phase.BLOCK not in state.passed
    assert state.failures.get(Phase.BLOCK, 0) == 0 and state.inconclusive[Phase.BLOCK] == 1
    assert state.attempt_number(2) == 2 and "INCONCLUSIVE" in state.last_verdict
    # the two-failures rule still needs two failures: inconclusive, failed, inconclusive, failed -> the 2nd failure
    mixed = fold(recorded(*through(2), *inconclusive(2, 1), *failed(2, 2), *inconclusive(2, 3)))
    assert mixed.status is Status.PHASE2 and mixed.failures[Phase.BLOCK] == 1 and mixed.inconclusive[Phase.BLOCK] == 1
    assert mixed.escalates_on_failure() is False  # no attempt open; the next failure is the second
    blocked = fold(recorded(*through(2), *inconclusive(2, 1), *failed(2, 2), *inconclusive(2, 3), *failed(2, 4),
                            BlockerRaised(phase=2, reason="failed twice")))
    assert blocked.status is Status.NEEDS_HUMAN_REVIEW and blocked.failures[Phase.BLOCK] == 2


def test_inconclusive_in_a_row_goes_to_a_human_and_a_verdict_between_resets_the_run() -> None:
    state = fold(recorded(*through(3), *inconclusive(3, 1), *inconclusive(3, 2)))
    assert state.status is Status.NEEDS_HUMAN_REVIEW and state.failures.get(Phase.FULL_MODEL, 0) == 0
    with pytest.raises(FoldError, match="needs human review"):
        fold(recorded(*through(3), *inconclusive(3, 1), *inconclusive(3, 2), PhaseStarted(phase=3, attempt=3)))
    resumed = fold(recorded(*through(3), *inconclusive(3, 1), *inconclusive(3, 2),
                            BlockerRaised(phase=3, reason="inconclusive twice"),
                            DeploymentResumed(phase=3, note="device reset"), *inconclusive(3, 3)))
    assert resumed.status is Status.PHASE3 and resumed.inconclusive[Phase.FULL_MODEL] == 1
    reset = fold(recorded(*through(3), *inconclusive(3, 1), *failed(3, 2), *inconclusive(3, 3)))
    assert reset.status is Status.PHASE3  # a failure between: not two inconclusive in a row


def test_an_inconclusive_verdict_needs_its_open_attempt() -> None:
    with pytest.raises(FoldError, match="no open attempt"):
        fold(recorded(*through(2), PhaseInconclusive(phase=2, attempt=1, reasons=["x"])))
