"""The evaluator's pure re-derivations: attempts re-judged on all their evidence, figures from their samples."""

from __future__ import annotations

import statistics

from handlers.evaluator.replay import figure_findings, gate_evidence_findings, rejudge_attempts, replay_states
from ledger.events import (
    ArchitectureAssessed,
    BlockValidated,
    ConfigResolved,
    DeploymentRequested,
    ModelDigested,
    OptimizationTried,
    PerformanceMeasured,
    PhasePassed,
    PhaseStarted,
    TokenGateChecked,
)
from registry.synthetic import record

STREAM = "deployment:x"
DIGEST = "d" * 64
CONFIG = ConfigResolved(n_layers=1, emb_dim=8, n_heads=2, n_kv_heads=1, head_dim=4, hidden_dim=16, vocab_size=32,
                        rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, qkv_bias=False,
                        qk_norm=False)


def _head() -> list:
    return [DeploymentRequested(model_path="/m", name="x"),
            ArchitectureAssessed(architecture="LlamaForCausalLM", in_scope=True), CONFIG,
            PhaseStarted(phase=0, attempt=1), ModelDigested(digest=DIGEST, files={}), PhasePassed(phase=0, attempt=1),
            PhaseStarted(phase=1, attempt=1), PhasePassed(phase=1, attempt=1)]


def _block(passed: bool, cosine: float) -> BlockValidated:
    return BlockValidated(layer=0, executor="emulated", n_positions=8, cosine=cosine, per_position_min=cosine, p5=0.99,
                          median=0.99, max_abs=0.01, max_rel=0.01, nan_count=0, passed=passed, model_digest=DIGEST,
                          thresholds={"cosine": 0.99, "per_position_min": 0.99})


def test_a_phase_pass_with_a_later_uncited_fail_in_its_attempt_is_a_finding_naming_the_fail():
    events = [*_head(), PhaseStarted(phase=2, attempt=1), _block(True, 0.999), _block(False, 0.5)]
    recs = record((STREAM, e) for e in events)
    good, bad = recs[-2].seq, recs[-1].seq
    recs += record([(STREAM, PhasePassed(phase=2, attempt=1, evidence_seqs=[good]))], start_seq=bad + 1)
    # (the bare Phases 0-1 above are re-judged too and fail for want of evidence; only Phase 2 matters here)
    [finding] = [f for f in rejudge_attempts(recs, replay_states(recs), planned=None) if "PhasePassed(2)" in f.message]
    assert finding.seq == bad and f"BlockValidated seq {bad} did not pass" in finding.message


def test_figures_that_are_not_the_median_of_their_samples_and_a_one_token_gate_are_findings():
    samples = [0.10, 0.11, 0.12]
    perf = PerformanceMeasured(phase=4, executor="emulated", prefill_s=99.0, n_prompt_tokens=128, runs=3,
                               profile={"label": "final", "samples_s": samples}, model_digest=DIGEST)
    honest = perf.model_copy(update={"prefill_s": statistics.median(samples)})
    gate = TokenGateChecked(prompt_index=0, prompt="p", executor="emulated", n_tokens=1, passed=True,
                            agreed_prefix=1, tokens_ours=[3], tokens_ref=[3], kl_per_step=[0.0], context="verify-model")
    recs = record((STREAM, e) for e in [*_head(), perf, honest, gate])
    findings = figure_findings(recs, replay_states(recs))
    by_seq = {f.seq: f.message for f in findings}
    assert "prefill_s 99.0 is not the median 0.11 of its samples" in by_seq[recs[-3].seq]
    assert recs[-2].seq not in by_seq
    assert "n_tokens 1, the gate decodes 32" in by_seq[recs[-1].seq]


# --- Phase 4-5 optimisations and the token-gate records they rest on -------------------------------------


def _gate(context: str, kl: float = 0.01, passed: bool = True, switches: dict | None = None) -> TokenGateChecked:
    return TokenGateChecked(prompt_index=0, prompt="p", executor="emulated", n_tokens=32, passed=passed,
                            agreed_prefix=32, tokens_ours=[3] * 32, tokens_ref=[3] * 32, kl_per_step=[kl] * 32,
                            context=context, model_digest=DIGEST, pipeline={"switches": switches or {}})


def _optimisation_stream(final_gate: TokenGateChecked, gate_context: str = "phase4:final") -> list:
    head = [*_head(), PhaseStarted(phase=2, attempt=1), _block(True, 0.999)]
    block, phase3 = len(head), len(head) + 3  # their seqs (one record() call numbers the stream from 1)
    return record((STREAM, e) for e in [
        *head, PhasePassed(phase=2, attempt=1, evidence_seqs=[block]), PhaseStarted(phase=3, attempt=1),
        _gate("phase3"), PhasePassed(phase=3, attempt=1, evidence_seqs=[phase3]), PhaseStarted(phase=4, attempt=1),
        final_gate, OptimizationTried(phase=4, optimisation="fusion", outcome="applied", before_s=2.0, after_s=1.0,
                                      gate_passed=True, gate_context=gate_context)])


def test_switches_resting_on_one_final_set_re_run_equal_to_phase_3_need_no_other_gate_record():
    recs = _optimisation_stream(_gate("phase4:final", switches={"fusion": True}))
    assert gate_evidence_findings(recs, replay_states(recs)) == []


def test_a_final_set_re_run_whose_numbers_differ_from_phase_3_is_a_finding_naming_the_optimisation():
    recs = _optimisation_stream(_gate("phase4:final", kl=0.02, switches={"fusion": True}))
    [finding] = gate_evidence_findings(recs, replay_states(recs))
    assert finding.seq == recs[-1].seq and finding.check == "optimisation-gate"
    assert "does not equal Phase 3's record of prompt 0" in finding.message and "kl_per_step" in finding.message


def test_an_optimisation_whose_gate_records_are_missing_failed_or_ran_without_it_is_a_finding():
    missing = _optimisation_stream(_gate("phase4:final", switches={"fusion": True}), gate_context="phase4:fusion")
    [finding] = gate_evidence_findings(missing, replay_states(missing))
    assert "no TokenGateChecked 'phase4:fusion' before it" in finding.message
    failed = _optimisation_stream(_gate("phase4:fusion", passed=False, switches={"fusion": True}), "phase4:fusion")
    [finding] = gate_evidence_findings(failed, replay_states(failed))
    assert f"TokenGateChecked seq {failed[-2].seq} did not pass" in finding.message
    without = _optimisation_stream(_gate("phase4:final", switches={"seq_first": True}))
    [finding] = gate_evidence_findings(without, replay_states(without))
    assert f"TokenGateChecked seq {without[-2].seq} ran without fusion" in finding.message

