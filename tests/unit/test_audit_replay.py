"""The evaluator's pure re-derivations: attempts re-judged on all their evidence, figures from their samples."""

from __future__ import annotations

import statistics

from handlers.audit_replay import figure_findings, rejudge_attempts, replay_states
from ledger.events import (
    ArchitectureAssessed,
    BlockValidated,
    ConfigResolved,
    DeploymentRequested,
    ModelDigested,
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
