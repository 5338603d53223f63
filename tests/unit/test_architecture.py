"""Architecture assessment and config resolution over hand-written copies of real config.json files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npu_kernels.model.architecture import ModelConfigError, assess, default_name, load_raw_config, resolve

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"

# file -> words every rejection must contain (None: in scope)
EXPECTED = {
    "mixtral-8x7b.json": ["mixture-of-experts"],
    "mistral-7b-v0.1.json": ["sliding-window"],
    "deepseek-v2.json": ["mixture-of-experts", "latent attention"],
    "t5-small.json": ["encoder-decoder"],
    "gpt2.json": ["RMSNorm + SwiGLU + RoPE", "LayerNorm"],
    "qwen2.5-0.5b.json": None,
    "qwen3-0.6b.json": None,
    "mistral-7b-v0.3.json": None,
    # written by a colleague; checked when present
    "llama-3.2-1b.json": None,
    "smollm2-135m-instruct.json": None,
    # the performance model's held-out models (llms/README.md's table; see configs/README.md)
    "llama-3.2-3b.json": None,
    "qwen2.5-1.5b.json": None,
    "qwen2.5-3b.json": None,
    "qwen3-1.7b.json": None,
    "qwen3-4b.json": None,
    "smollm2-1.7b.json": None,
    # issue #36: Phi-4-mini and Gemma3-4B's text decoder (a Gemma3ForConditionalGeneration folder)
    "phi-4-mini-instruct.json": None,
    "gemma-3-4b-it.json": None,
    # issue #37: LFM2-1.2B, the hybrid (written from mlir-air's lfm2_1_2b_q4nx; see configs/README.md)
    "lfm2-1.2b.json": None,
}


def _present(names):
    return [n for n in names if (CONFIGS / n).exists()]


@pytest.mark.parametrize("name", _present(n for n, v in EXPECTED.items() if v is None))
def test_in_scope_configs_are_accepted_with_no_reasons(name):
    a = assess(load_raw_config(CONFIGS / name))
    assert a.in_scope, a.reasons
    assert a.reasons == []


@pytest.mark.parametrize("name", [n for n, v in EXPECTED.items() if v is not None])
def test_out_of_scope_configs_are_rejected_naming_the_reason(name):
    a = assess(load_raw_config(CONFIGS / name))
    assert not a.in_scope
    text = " ".join(a.reasons)
    for word in EXPECTED[name]:
        assert word in text, (word, a.reasons)
    for reason in a.reasons:  # one clear sentence each, naming the architecture
        assert reason.endswith(".") and a.architecture in reason


def test_every_config_fixture_has_an_expectation():
    assert {p.name for p in CONFIGS.glob("*.json")} <= set(EXPECTED)


def test_qwen2_features_imply_qkv_bias_and_its_unused_sliding_window_is_ignored():
    raw = load_raw_config(CONFIGS / "qwen2.5-0.5b.json")
    a = assess(raw)
    assert a.features == {"qkv_bias": True, "qk_norm": False, "tied_embeddings": True, "gqa_group": 7,
                          "rope_type": "default"}
    cfg = resolve(raw)
    assert (cfg.qkv_bias, cfg.qk_norm, cfg.head_dim, cfg.n_kv_heads, cfg.rope_theta) == (True, False, 64, 2, 1e6)


def test_qwen2_with_sliding_window_switched_on_is_rejected():
    raw = load_raw_config(CONFIGS / "qwen2.5-0.5b.json") | {"use_sliding_window": True}
    a = assess(raw)
    assert not a.in_scope and "sliding-window" in a.reasons[0]


def test_qwen3_resolves_qk_norm_and_its_explicit_head_dim():
    cfg = resolve(load_raw_config(CONFIGS / "qwen3-0.6b.json"))
    assert (cfg.qk_norm, cfg.qkv_bias, cfg.head_dim, cfg.emb_dim, cfg.n_heads) == (True, False, 128, 1024, 16)
    assert cfg.architecture == "Qwen3ForCausalLM" and cfg.tie_word_embeddings


def test_mistral_v03_resolves_with_head_dim_defaulting_to_hidden_over_heads():
    cfg = resolve(load_raw_config(CONFIGS / "mistral-7b-v0.3.json"))
    assert cfg.head_dim == 4096 // 32 and cfg.gqa_group == 4 and not cfg.tie_word_embeddings


def test_transformers5_rope_parameters_and_untied_llama_default():
    raw = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 300,
           "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
    cfg = resolve(raw)
    assert cfg.rope_theta == 5e5 and cfg.head_dim == 16 and cfg.tie_word_embeddings is False
    assert assess(raw).in_scope


def test_unsupported_rope_scaling_and_mlp_bias_are_rejected():
    raw = load_raw_config(CONFIGS / "mistral-7b-v0.3.json")
    yarn = assess(raw | {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})
    assert not yarn.in_scope and "yarn" in yarn.reasons[0]
    assert not assess(raw | {"mlp_bias": True}).in_scope


def test_malformed_json_is_a_model_config_error(tmp_path):
    (tmp_path / "config.json").write_text("{ not json")
    with pytest.raises(ModelConfigError, match="not valid JSON"):
        load_raw_config(tmp_path)


def test_missing_config_is_a_model_config_error(tmp_path):
    with pytest.raises(ModelConfigError, match="no config.json"):
        load_raw_config(tmp_path)


def test_resolve_names_a_missing_required_field():
    with pytest.raises(ModelConfigError, match="num_hidden_layers"):
        resolve({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4})


def test_load_raw_config_accepts_a_folder_or_the_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert load_raw_config(tmp_path) == load_raw_config(tmp_path / "config.json") == {"model_type": "llama"}


@pytest.mark.parametrize("path, name", [
    ("/models/SmolLM2-135M-Instruct", "smollm2_135m_instruct"),
    ("/models/SmolLM2-135M-Instruct/", "smollm2_135m_instruct"),
    ("/models/Qwen2.5-0.5B/config.json", "qwen2_5_0_5b"),
    ("/fixtures/configs/mistral-7b-v0.3.json", "mistral_7b_v0_3"),
])
def test_default_name_is_the_folder_or_file_stem_lower_cased_with_underscores(path, name):
    assert default_name(path) == name
