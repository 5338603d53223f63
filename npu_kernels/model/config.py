"""The resolved model configuration every numeric component works from.

`ModelConfig` mirrors the `ConfigResolved` event. Resolution from a HF config.json and the architecture
assessment live in `npu_kernels.model.architecture`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from npu_kernels.model.description import Description, legacy


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
    # the architecture description (npu_kernels.model.description) its family's adapter built; None in a config
    # recorded before it, which `arch` reads as the Llama form with this config's flags
    description: Description | None = None
    # the model's trained context window (`max_position_embeddings` of its config.json); None in a config recorded
    # before it (such a deployment was planned and timed at the unbounded lengths, and is re-derived so)
    max_positions: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.description, dict):  # as ConfigResolved records it
            object.__setattr__(self, "description", Description.from_dict(self.description))

    @property
    def arch(self) -> Description:
        return self.description if self.description is not None else legacy(self)

    @property
    def gqa_group(self) -> int:
        return self.n_heads // self.n_kv_heads

    @property
    def rotary_dim(self) -> int:
        return self.arch.rotary(self.head_dim)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["description"] = self.description.to_dict() if self.description is not None else None
        return out


def position_limit(c: ModelConfig) -> int | None:
    """The most positions a prompt and its KV cache may reach: the model's context window (`max_positions`) and the
    RoPE tables it is deployed with (`Description.rope_max_positions`, LongRoPE's short factors), the smaller;
    None when neither is known."""
    limits = [x for x in (c.max_positions, c.arch.rope_max_positions) if x]
    return min(limits) if limits else None


def bounded_length(c: ModelConfig, length: int) -> int:
    """`length` (a compiled prefill length, a modelled decode context), cut to the model's `position_limit`: no
    build, plan or timed figure is taken past the positions the model was trained for."""
    limit = position_limit(c)
    return length if limit is None else min(length, limit)


CASCADE_K = 512  # o_gemv_ffn's cascade: one stage (one core row) per 512 of emb_dim
CORE_ROWS = 4  # NPU2's compute rows: the cascade's ceiling


def is_lean(c: ModelConfig) -> bool:
    """mlir-air's fused 2-ELF decode (`rms_gemv_rope` + `o_gemv_ffn`): the down-projection primitive
    `matvec_2tile_add` is correct only at K divisible by 512 (qwen25_0_5b/ARCHITECTURE.md:61-63,
    qwen25_1_5b/ARCHITECTURE.md:66-68), and the cascade needs emb_dim/512 stages, one per core row, at most 4
    (llama32_3b/ARCHITECTURE.md:64-67, qwen3_4b/ARCHITECTURE.md:74-77: emb 3072 and 2560 need 5+), all at
    mlir-air e972f29. Otherwise decode is 5 standalone GEMV ELFs with the M=1 glue on the host."""
    return (c.emb_dim % CASCADE_K == 0 and (c.n_heads * c.head_dim) % CASCADE_K == 0
            and c.emb_dim // CASCADE_K <= CORE_ROWS and c.hidden_dim % CASCADE_K == 0)


LM_HEAD_PARTITIONS = (16384, 8192)  # rows per LM-head GEMV partition mlir-air runs


def lm_head_partition(vocab_size: int, fixed: int | None = None) -> int:
    """The LM-head partition size: `fixed` where the family's mlir-air code names it (Gemma3 and Phi-4-mini run
    16384-row partitions, npu_kernels.model.families), else the one that pads the vocabulary least, the larger on a tie - 16384 for
    Llama's 128256 (8 x 16384, llama32_3b/ARCHITECTURE.md:29) and SmolLM2's 49152, 8192 for Qwen's 151936
    (19 x 8192, qwen25_0_5b/ARCHITECTURE.md:32), mlir-air e972f29."""
    if fixed:
        return fixed
    return min(LM_HEAD_PARTITIONS, key=lambda p: (-(-vocab_size // p) * p, -p))
