"""The gates' judgement: pure functions on arrays, and the token gate between real runners."""

from __future__ import annotations

import numpy as np
import pytest

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.numerics.executors.base import Fp32Executor
from npu_kernels.model.compare import block_gate, diagnose_layers, kl_divergence, per_position_cosine, token_gate, topk_ids
from npu_kernels.model.faults import build_pipeline
from npu_kernels.model.hf_reference import HfRunner, load_tokenizer
from npu_kernels.model.options import PipelineOptions
from npu_kernels.model.pipeline import NpuPipeline
from npu_kernels.model.prompts import canonical_tokens, prompts_for
from npu_kernels.model.weights import load_weights
from npu_kernels.thresholds import per_position_threshold
from ledger.events import BlockValidated, LayerDiagnosed, TokenGateChecked

pytestmark = pytest.mark.usefixtures("single_torch_thread")


def test_topk_breaks_ties_toward_the_smaller_id_like_argmax():
    z = np.array([1.0, 3.0, 2.0, 3.0, 0.5, 2.0, 3.0], np.float32)
    assert topk_ids(z, 5) == [1, 3, 6, 2, 5]
    assert topk_ids(z, 1)[0] == int(np.argmax(z))
    assert topk_ids(np.array([np.nan, 1.0, 0.0]), 2) == [1, 2]


@pytest.mark.parametrize("head_dim, floor", [(16, 0.99), (64, 0.99), (128, 0.98), (256, 0.97), (512, 0.97)])
def test_per_position_threshold_follows_head_dim(head_dim, floor):
    assert per_position_threshold(head_dim) == floor


def test_block_gate_passes_small_noise_and_records_its_numbers():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((20, 64)).astype(np.float32)
    ours = ref + 0.01 * rng.standard_normal(ref.shape).astype(np.float32)
    res = block_gate(ours, ref, 64, executor="emulated")
    assert res.passed and res.cosine > 0.999 and res.n_positions == 20 and res.nan_count == 0
    assert res.thresholds == {"cosine": 0.99, "per_position_min": 0.99}
    assert 0 < res.max_abs < 0.1 and res.p5 <= res.median
    BlockValidated(**res.event_fields())


def test_block_gate_fails_on_one_bad_position_even_when_the_whole_tensor_is_close():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((200, 64)).astype(np.float32)
    ours = ref.copy()
    ours[7] = rng.standard_normal(64)  # one position is garbage
    res = block_gate(ours, ref, 64)
    assert res.cosine >= 0.99 and res.per_position_min < 0.5 and not res.passed


def test_block_gate_judges_real_positions_only():
    rng = np.random.default_rng(2)
    ref = rng.standard_normal((10, 32)).astype(np.float32)
    padded = np.concatenate([ref, rng.standard_normal((6, 32)).astype(np.float32)])
    assert block_gate(padded, ref, 64, n_positions=10).passed


def test_block_gate_fails_on_nan():
    ref = np.ones((4, 8), np.float32)
    ours = ref.copy()
    ours[2, 3] = np.nan
    res = block_gate(ours, ref, 64)
    assert not res.passed and res.nan_count == 1
    BlockValidated(**res.event_fields())


def test_per_position_cosine_of_a_zero_row_is_zero_not_nan():
    a = np.array([[1.0, 0.0], [0.0, 0.0]])
    assert per_position_cosine(a, a).tolist() == [1.0, 0.0]


def test_kl_is_zero_for_equal_logits_and_positive_otherwise():
    z = np.array([2.0, 1.0, 0.0])
    assert kl_divergence(z, z) == pytest.approx(0.0, abs=1e-12)
    assert kl_divergence(z, z[::-1].copy()) > 0.5


@pytest.fixture(scope="module")
def llama(tiny_llama):
    cfg = resolve(load_raw_config(tiny_llama))
    return tiny_llama, cfg, load_weights(tiny_llama, cfg)


def test_token_gate_of_the_reference_against_itself_never_diverges(llama):
    folder, _, _ = llama
    prompt = prompts_for(folder)[0]
    res = token_gate(HfRunner(folder), HfRunner(folder), prompt.tokens, n_tokens=32, prompt=prompt.text,
                     tokenizer=load_tokenizer(folder))
    assert res.passed and res.divergence_step is None and res.agreed_prefix == 32
    assert len(res.tokens_ours) == 32 and res.tokens_ours == res.tokens_ref and res.text_ours == res.text_ref
    assert res.kl_per_step == [0.0] * 32 and len(res.topk_ours) == 5
    TokenGateChecked(**res.event_fields())


def test_token_gate_fails_when_the_chosen_token_is_outside_the_other_top5(llama):
    folder, cfg, weights = llama
    broken = build_pipeline(weights, cfg, Fp32Executor(), PipelineOptions(faults={"rope_interleaved"}))
    prompt = prompts_for(folder)[0]
    res = token_gate(broken, HfRunner(folder), prompt.tokens)
    assert not res.passed and res.divergence_step is not None
    assert res.rank_ours_in_ref is None or res.rank_ref_in_ours is None
    assert res.agreed_prefix == res.divergence_step and len(res.kl_per_step) == res.divergence_step + 1
    assert res.pipeline["faults"] == ["rope_interleaved"] and res.executor == "fp32"
    assert "not in" in res.reason
    TokenGateChecked(**res.event_fields())


def test_token_gate_fails_on_nan_logits(llama):
    folder, cfg, _ = llama
    poisoned = load_weights(folder, cfg)
    poisoned.layers[1].w_down[0, :] = np.uint16(0x7FC0)  # a bf16 NaN: the weights hold bf16 bits
    res = token_gate(NpuPipeline(poisoned, cfg, Fp32Executor()), HfRunner(folder), canonical_tokens(folder))
    assert not res.passed and res.nan_count > 0 and res.divergence_step == 0
    TokenGateChecked(**res.event_fields())


def test_diagnose_layers_gives_one_layer_diagnosed_per_layer(llama):
    folder, cfg, weights = llama
    tokens = canonical_tokens(folder)
    ours = NpuPipeline(weights, cfg, Fp32Executor()).prefill(tokens)
    rows = diagnose_layers(ours, HfRunner(folder).prefill(tokens), executor="fp32")
    assert [r["layer"] for r in rows] == list(range(cfg.n_layers))
    for r in rows:
        LayerDiagnosed(**r)
        assert r["cos_min"] <= r["cos_p5"] <= r["cos_median"] and r["cos_min"] > 0.99


def test_the_teacher_forced_walk_of_the_reference_against_itself_is_exact(llama):
    folder, _, _ = llama
    prompt = prompts_for(folder)[0]
    res = token_gate(HfRunner(folder), HfRunner(folder), prompt.tokens, n_tokens=32)
    assert res.passed and res.first_divergence_passed and res.tf_passed
    assert res.tf_steps == 32 and res.tf_tokens == res.tokens_ref
    assert res.tf_kl_per_step == [0.0] * 32 and res.tf_ppl_ratio == pytest.approx(1.0, abs=1e-12)
    assert res.tf_topk_ours == res.tf_topk_ref and res.thresholds["kl_max"] > 0
    TokenGateChecked(**res.event_fields())


def test_the_teacher_forced_walk_continues_past_the_first_divergence(llama):
    """The greedy walk is the teacher-forced walk's prefix; past the divergence both sides are still fed the
    reference's tokens, so every one of the 32 steps runs our decode path."""
    folder, cfg, weights = llama
    broken = build_pipeline(weights, cfg, Fp32Executor(), PipelineOptions(faults={"rope_interleaved"}))
    prompt = prompts_for(folder)[0]
    res = token_gate(broken, HfRunner(folder), prompt.tokens)
    d = res.divergence_step
    assert d is not None and d < 31 and res.tf_steps == 32 and len(res.tf_topk_ours) == 32
    assert res.tf_kl_per_step[: d + 1] == res.kl_per_step
    assert res.tf_tokens[: d + 1] == res.tokens_ref and res.tf_tokens == [t[0] for t in res.tf_topk_ref]
    assert not res.tf_passed and not res.passed and "teacher-forced" in res.reason
    event = TokenGateChecked(**res.event_fields())
    assert event.tf_ppl_ratio > 1 and event.first_divergence_passed is False
