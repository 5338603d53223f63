"""The decoder pipeline from leaf kernels vs HF transformers bf16, on tiny models and (slow) SmolLM2."""

from __future__ import annotations

import numpy as np
import pytest

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.numerics.executors.base import Fp32Executor
from npu_kernels.model.compare import bisect_block, block_gate, token_gate
from npu_kernels.model.hf_reference import HfRunner
from npu_kernels.model.faults import build_pipeline
from npu_kernels.model.options import SWITCHES, PipelineOptions
from npu_kernels.model.pipeline import NpuPipeline
from npu_kernels.model.prompts import canonical_tokens, prompts_for
from npu_kernels.model.weights import load_weights

pytestmark = pytest.mark.usefixtures("single_torch_thread")

EXECUTORS = ["fp32", "emulated", "torch"]
KINDS = ["tiny_llama", "tiny_qwen2", "tiny_qwen3"]


def make_executor(name: str):
    if name == "fp32":
        return Fp32Executor()
    try:
        from npu_kernels.numerics.executors import make_executor as factory
    except ImportError:
        pytest.skip("npu_kernels.numerics.executors.make_executor is not there yet")
    return factory(name, "npu2")


class Model:
    """A tiny model folder with its config, weights and HF reference, loaded once per module."""

    def __init__(self, folder):
        self.folder = folder
        self.config = resolve(load_raw_config(folder))
        self.weights = load_weights(folder, self.config)
        self.hf = HfRunner(folder)
        self.tokens = canonical_tokens(folder)
        self.ref = self.hf.prefill(self.tokens)

    def pipeline(self, executor, **options) -> NpuPipeline:
        return build_pipeline(self.weights, self.config, executor, PipelineOptions(**options))


@pytest.fixture(scope="module", params=KINDS)
def model(request):
    return Model(request.getfixturevalue(request.param))


@pytest.fixture(scope="module", params=EXECUTORS)
def executor(request):
    return make_executor(request.param)


def test_block_and_token_gates_pass_against_hf(model, executor):
    pipe = model.pipeline(executor)
    ours = pipe.prefill(model.tokens)
    block = block_gate(ours.layer_intermediates[0]["ffn_out"], model.ref.layer_intermediates[0]["ffn_out"],
                       model.config.head_dim, executor=executor.name)
    assert block.passed, block
    for prompt in prompts_for(model.folder):
        gate = token_gate(pipe, model.hf, prompt.tokens, n_tokens=32)
        assert gate.passed, gate


def _run(pipe, tokens, n_decode=4):
    """Every number a pipeline produces on a prompt: block outputs, final hidden, logits, decode logits."""
    rec = pipe.prefill(tokens)
    out = [x["ffn_out"] for x in rec.layer_intermediates] + [rec.final_hidden_normed, rec.logits_at_pred]
    token, pos = rec.top1_token, len(tokens)
    for _ in range(n_decode):
        step = pipe.decode_step(token, pos)
        out.append(step.lm_head_logits)
        token, pos = step.top1_token, pos + 1
    return out


# every switch alone on the NPU2 model, all of them together on every executor
SWITCH_CASES = [("emulated", (s,)) for s in SWITCHES] + [(name, SWITCHES) for name in EXECUTORS]


@pytest.mark.parametrize("executor_name, switches", SWITCH_CASES)
def test_optimisation_switches_give_identical_numbers(model, executor_name, switches):
    executor = make_executor(executor_name)
    tokens = model.tokens[:48]
    baseline = _run(model.pipeline(executor), tokens)
    pipe = model.pipeline(executor, **{s: True for s in switches})
    for _ in range(2):  # twice: resident weights/tables are reused on the second run
        for ours, ref in zip(_run(pipe, tokens), baseline):
            if executor.name == "fp32" and "fusion" in switches:
                # FP32 BLAS sums a column differently when the matrix is wider (OpenBLAS picks its micro-kernel
                # by N), so the FP32 reference is only equal to rounding; bf16-out executors must be exact.
                np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))
            else:
                np.testing.assert_array_equal(ours, ref)


def test_rope_interleaved_fails_the_block_gate_and_the_bisect_names_rope(model):
    pipe = model.pipeline(make_executor("emulated"), faults={"rope_interleaved"})
    ref0 = model.ref.layer_intermediates[0]["ffn_out"]
    block = block_gate(pipe.prefill(model.tokens).layer_intermediates[0]["ffn_out"], ref0, model.config.head_dim)
    assert not block.passed
    bisect = bisect_block(pipe.with_fp32_kernels, model.tokens, ref0, model.config.head_dim)
    assert bisect.culprit == "rope"
    assert [s["swapped"][-1] for s in bisect.steps] == ["rmsnorm", "gemm", "rope"]
    assert not bisect.steps[1]["passed"] and bisect.steps[2]["passed"]


def test_kv_cache_off_by_one_passes_the_block_gate_but_changes_decode(model):
    executor = make_executor("emulated")
    good, bad = model.pipeline(executor), model.pipeline(executor, faults={"kv_cache_off_by_one"})
    ref0 = model.ref.layer_intermediates[0]["ffn_out"]
    prefill = bad.prefill(model.tokens)
    assert block_gate(prefill.layer_intermediates[0]["ffn_out"], ref0, model.config.head_dim).passed
    np.testing.assert_array_equal(prefill.logits_at_pred, good.prefill(model.tokens).logits_at_pred)
    # from the first decode step on, the faulty cache changes what the model predicts (a short prompt, so
    # that the token's own key, which the fault loses, carries real weight in the attention)
    short = model.tokens[:8]
    first = good.prefill(short).top1_token
    bad.prefill(short)
    ours = bad.decode_step(first, len(short)).lm_head_logits
    clean = good.decode_step(first, len(short)).lm_head_logits
    assert np.abs(ours - clean).max() > 0.01 * np.abs(clean).max()


def test_kv_cache_off_by_one_makes_greedy_decoding_diverge(tiny_llama, tiny_qwen2, tiny_qwen3):
    """Against the clean pipeline on the same executor (so only the fault differs): identical first token,
    then the paths part. Counted over all tiny models: how much the current token's own key matters is a
    property of the random model (Qwen2's barely moves)."""
    executor = make_executor("emulated")
    diverged = []
    for folder in (tiny_llama, tiny_qwen2, tiny_qwen3):
        cfg = resolve(load_raw_config(folder))
        weights = load_weights(folder, cfg)
        good = NpuPipeline(weights, cfg, executor)
        bad = build_pipeline(weights, cfg, executor, PipelineOptions(faults={"kv_cache_off_by_one"}))
        for prompt in prompts_for(folder):
            gate = token_gate(bad, good, prompt.tokens)
            assert gate.kl_per_step[0] == 0.0  # identical prefill: the fault lives in decode only
            diverged.append(gate.divergence_step is not None)
    assert sum(diverged) >= len(diverged) // 2, diverged


def test_down_bf16_accumulate_changes_the_numbers(model):
    executor = make_executor("emulated")
    ref = model.pipeline(executor).prefill(model.tokens).layer_intermediates[0]["ffn_out"]
    bad = model.pipeline(executor, faults={"down_bf16_accumulate"}).prefill(model.tokens)
    assert not np.array_equal(bad.layer_intermediates[0]["ffn_out"], ref)


def test_decode_with_the_kv_cache_matches_a_longer_prefill(model):
    pipe = model.pipeline(Fp32Executor(), seq_first=True, weight_residency=True)
    tokens = model.tokens[:24]
    first = pipe.prefill(tokens)
    step = pipe.decode_step(first.top1_token, len(tokens))
    longer = pipe.prefill(list(tokens) + [first.top1_token])
    np.testing.assert_allclose(step.lm_head_logits, longer.logits_at_pred, rtol=1e-4, atol=1e-4)


def test_padding_the_prompt_to_a_compiled_length_leaves_real_positions_unchanged(model):
    plain = model.pipeline(Fp32Executor()).prefill(model.tokens)
    padded = model.pipeline(Fp32Executor(), prefill_len=128).prefill(model.tokens)
    assert padded.layer_intermediates[0]["ffn_out"].shape == plain.layer_intermediates[0]["ffn_out"].shape
    np.testing.assert_allclose(padded.logits_at_pred, plain.logits_at_pred, rtol=1e-4, atol=1e-4)


def test_profile_names_the_kernel_of_every_stage(tiny_llama):
    m = Model(tiny_llama)
    pipe = m.pipeline(Fp32Executor(), fusion=True)
    rec = pipe.prefill(m.tokens)
    pipe.decode_step(rec.top1_token, len(m.tokens))
    stages = pipe.profile()["stages"]
    assert stages["prefill:qkv"]["kernel"] == "gemm" and stages["decode:qkv"]["kernel"] == "gemv"
    assert stages["prefill:attention"]["kernel"] == "flash_attention"
    # mlir-air's deployments: decode attention and the final RMSNorm on the CPU, the LM head one GEMV ELF for both
    assert stages["decode:attention"]["kernel"] == "host"
    assert stages["prefill:final_norm"]["kernel"] == stages["decode:final_norm"]["kernel"] == "host"
    assert stages["decode:lm_head"]["kernel"] == "gemv" and stages["prefill:lm_head"]["kernel"] == "gemv"
    assert stages["prefill:qkv"]["calls"] == m.config.n_layers  # one fused GEMM per layer
    assert stages["prefill:embedding"]["kernel"] == "host"


def test_unknown_fault_is_refused():
    with pytest.raises(ValueError, match="unknown pipeline faults"):
        PipelineOptions(faults={"bit_flip"})


def test_options_record_as_plain_data():
    d = PipelineOptions.optimised(faults={"kv_cache_off_by_one"}).to_dict()
    assert d == {"weight_residency": True, "fusion": True, "seq_first": True, "prefill_len": None,
                 "pad_token": 0, "faults": ["kv_cache_off_by_one"]}


@pytest.mark.slow
def test_smollm2_passes_the_block_gate_and_the_token_gate_on_emulated(smollm2_dir):
    cfg = resolve(load_raw_config(smollm2_dir))
    pipe = NpuPipeline(load_weights(smollm2_dir, cfg), cfg, make_executor("emulated"), PipelineOptions.optimised())
    hf = HfRunner(smollm2_dir)
    tokens = canonical_tokens(smollm2_dir)
    block = block_gate(pipe.prefill(tokens).layer_intermediates[0]["ffn_out"],
                       hf.prefill(tokens).layer_intermediates[0]["ffn_out"], cfg.head_dim)
    assert block.passed, block
    prompt = prompts_for(smollm2_dir)[0]
    gate = token_gate(pipe, hf, prompt.tokens, n_tokens=32, prompt=prompt.text, tokenizer=hf.tokenizer)
    assert gate.passed, gate


@pytest.mark.parametrize("rope", [
    {"rope_type": "default", "rope_theta": 500000.0},
    {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
])
def test_host_rope_table_matches_transformers_inverse_frequencies(rope):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from npu_kernels.model.architecture import rope_scaling
    from npu_kernels.model.host_ops import rope_inv_freq

    cfg = LlamaConfig(hidden_size=2048, num_attention_heads=32, head_dim=64, rope_parameters=rope,
                      max_position_embeddings=131072)
    ref = LlamaRotaryEmbedding(cfg)
    assert ref.attention_scaling == 1.0
    ours = rope_inv_freq(64, rope["rope_theta"], rope_scaling(cfg.to_dict()))
    np.testing.assert_allclose(ours, ref.inv_freq.numpy(), rtol=1e-6)


# --- the steps mlir-air's deployments run other than as the standalone kernel -------------------------------


def test_host_decode_attention_is_fp32_attention_of_the_last_query_row():
    rng = np.random.default_rng(3)
    H, Hkv, L, D = 8, 2, 37, 64
    q = rng.standard_normal((H, D)).astype(np.float32)
    k = rng.standard_normal((Hkv, L, D)).astype(np.float32)
    v = rng.standard_normal((Hkv, L, D)).astype(np.float32)
    from npu_kernels.model.host_ops import host_decode_attention

    ours = host_decode_attention(q, k, v, np.arange(H) // (H // Hkv))
    ref = Fp32Executor().flash_attention(q[:, None, :], k, v, causal=True, q_offset=L - 1)[:, 0]
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)
    swapped = host_decode_attention(q, k, v, np.arange(H) % Hkv)  # the group-mismap fault's mapping
    assert not np.allclose(swapped, ours)


def test_host_silu_mul_is_exact_swiglu():
    from npu_kernels.model.host_ops import host_silu_mul

    g = np.linspace(-8, 8, 257, dtype=np.float32)
    u = np.cos(g)
    np.testing.assert_allclose(host_silu_mul(g, u), g / (1 + np.exp(-g.astype(np.float64))) * u, rtol=1e-6, atol=1e-7)


def _decode_stage_kernels(folder, executor):
    cfg = resolve(load_raw_config(folder))
    pipe = NpuPipeline(load_weights(folder, cfg), cfg, executor, PipelineOptions())
    tokens = canonical_tokens(folder)[:12]
    rec = pipe.prefill(tokens)
    pipe.decode_step(rec.top1_token, len(tokens))
    return {k: v["kernel"] for k, v in pipe.profile()["stages"].items()}


def test_a_lean_models_decode_keeps_rmsnorm_and_swiglu_on_the_npu_and_adds_in_the_gemv(tiny_llama):
    st = _decode_stage_kernels(tiny_llama, make_executor("emulated"))  # E 512, F 1024: mlir-air's 2-ELF decode
    assert st["decode:ffn_norm"] == "rmsnorm" and st["decode:silu_mul"] == "silu_mul"
    assert st["decode:attn_residual"] == st["decode:ffn_residual"] == "gemv"
    assert st["prefill:attn_residual"] == st["prefill:ffn_residual"] == "eltwise_add"
    assert st["decode:attention"] == st["decode:final_norm"] == st["prefill:final_norm"] == "host"


def test_smollm2s_decode_runs_its_glue_on_the_host(smollm2_dir):
    st = _decode_stage_kernels(smollm2_dir, Fp32Executor())  # E 576: the 5-ELF decode with host glue
    assert st["decode:ffn_norm"] == st["decode:silu_mul"] == "host"
    assert st["decode:attn_residual"] == st["decode:ffn_residual"] == "host"
    assert st["prefill:ffn_norm"] == "rmsnorm" and st["prefill:silu_mul"] == "silu_mul"
