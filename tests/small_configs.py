"""Small legal NPU2 model configs of every supported family (no weights: Phase 1 needs only the config), and
the rows Phase 1 runs for one on a given executor. Shared by the plan-contract tests."""

from __future__ import annotations


from npu_kernels.model.architecture import resolve
from npu_kernels.model.plan import plan

ARCH = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
# (family, hidden, heads, kv heads, head_dim, intermediate, vocab): every family, widths below 1024, head_dim 64
# and 128, odd vocabularies; the two failing shapes are Qwen2 E=448 (2048x448x448) and Qwen3 E=256
# (2048x256x512)
MODELS = [
    ("llama", 256, 4, 2, 64, 768, 333),
    ("llama", 512, 8, 4, 64, 1024, 384),
    ("llama", 768, 12, 4, 64, 2048, 32003),
    ("llama", 960, 15, 5, 64, 2560, 49153),
    ("qwen2", 448, 7, 1, 64, 896, 1001),
    ("qwen2", 640, 10, 2, 64, 1792, 1537),
    ("qwen2", 896, 14, 2, 64, 4864, 151655),
    ("qwen3", 256, 2, 1, 128, 512, 387),
    ("qwen3", 384, 4, 2, 128, 1024, 5001),
    ("qwen3", 512, 4, 2, 128, 1024, 384),
    ("qwen3", 768, 8, 4, 128, 2048, 70001),
]


def model_config(family, hidden, heads, kv_heads, head_dim, intermediate, vocab):
    """The ModelConfig a config.json of these dimensions resolves to (npu_kernels.model.architecture.resolve)."""
    return resolve({"architectures": [ARCH[family]], "model_type": family, "hidden_size": hidden,
                    "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
                    "intermediate_size": intermediate, "vocab_size": vocab, "num_hidden_layers": 2,
                    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": family == "qwen2",
                    "hidden_act": "silu", "max_position_embeddings": 4096})


def phase1_rows(config) -> list[tuple]:
    """The rows Phase 1 runs, on every executor (each runner is handed the planned row): kernel, shape, the
    contract, method, tier, tile."""
    return [(r.kernel, r.shape, r.contract, r.method, r.tier, r.plan.tile) for r in plan(config, "npu2")]
