"""The resolved model configuration every numeric component works from.

`ModelConfig` mirrors the `ConfigResolved` event. Resolution from a HF config.json and the architecture
assessment live in `kernels.model.architecture`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelConfig:
    n_layers: int
    emb_dim: int  # E
    n_heads: int  # H
    n_kv_heads: int  # Hkv
    head_dim: int  # D
    hidden_dim: int  # F (MLP intermediate)
    vocab_size: int  # V
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    qkv_bias: bool = False  # Qwen2
    qk_norm: bool = False  # Qwen3
    architecture: str = "LlamaForCausalLM"

    @property
    def gqa_group(self) -> int:
        return self.n_heads // self.n_kv_heads

    def to_dict(self) -> dict:
        return asdict(self)


def is_lean(c: ModelConfig) -> bool:
    """mlir-air's lean 3-ELF prefill / 2-ELF decode: aligned dims, emb < 2560, hidden divisible by 512."""
    return (c.emb_dim % 512 == 0 and (c.n_heads * c.head_dim) % 512 == 0 and c.emb_dim < 2560
            and c.hidden_dim % 512 == 0)
