"""What the family adapters share: the `Family` record, the readers of config.json's RoPE fields (top-level
`rope_theta` / `rope_scaling` as transformers 4 writes them, `rope_parameters` as transformers 5 does, per layer
type for Gemma3) and the checks of the values an adapter reads (`positive_number`, `positive_integer`,
`layer_type_problems`), each naming the key in one sentence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from npu_kernels.model.description import Description
# the checks of a value an adapter reads live beside the features that read most of them; re-exported here
from npu_kernels.model.features.rope_config import rope_params, rope_scaling, rope_theta, rope_type  # noqa: F401
from npu_kernels.model.features.checks import (integer_problems, layer_type_problems, number_problems,  # noqa: F401
                                               positive_integer, positive_number)

SILU = {"silu", "swish"}


@dataclass(frozen=True)
class Family:
    name: str
    architectures: tuple[str, ...]  # config.json `architectures[0]` values this adapter describes
    model_types: tuple[str, ...]  # config.json `model_type` values (when `architectures` is absent)
    describe: Callable[[dict[str, Any], Any], Description]  # (raw config.json, the resolved sizes) -> description
    problems: Callable[[dict[str, Any], str], list[str]]  # (raw, arch) -> one sentence per unsupported feature
    tie_default: bool = False  # transformers' default of tie_word_embeddings for this family's config class
    qkv_bias: bool = False  # implied by the family (the ConfigResolved / assessment flags)
    # the model features (npu_kernels.model.features) the adapter describes: "qk_norm" (the ConfigResolved /
    # assessment flag), "sliding_window" (else a window is refused), "short_conv"; each feature's config keys,
    # checks, reference step, plan rows and drills are its module's
    features: tuple[str, ...] = ()
    # (raw config.json, the sizes the generic resolver read) -> the sizes this family means (LFM2: the MLP width
    # after block_auto_adjust_ff_dim, the eps under norm_eps); None: the generic reading stands
    sizes: Callable[[dict[str, Any], Any], Any] | None = None
    # (raw config.json, its text decoder's) -> one sentence per value this adapter reads that no model can have
    # (a factor of 0, layer_types of another length), naming the key: refused at `init` before anything is recorded
    # (npu_kernels.model.architecture.config_problems); an unsupported but well-formed feature is `problems`'
    malformed: Callable[[dict[str, Any]], list[str]] | None = None

    @property
    def qk_norm(self) -> bool:
        return "qk_norm" in self.features

    @property
    def windows(self) -> bool:
        return "sliding_window" in self.features


def activation(raw: dict[str, Any]) -> str:
    return str(raw.get("hidden_act") or raw.get("hidden_activation") or "silu")


def swiglu_problems(raw: dict[str, Any], arch: str, biased_attention_ok: bool = False) -> list[str]:
    """The Llama form's checks: a SiLU-gated MLP without biases, no o_proj bias."""
    reasons = []
    act = activation(raw)
    if act not in SILU:
        reasons.append(f"{arch} uses activation {act}; the MLP must be SwiGLU (SiLU-gated).")
    if raw.get("mlp_bias"):
        reasons.append(f"{arch} has MLP biases (mlp_bias=true); only bias-free gate/up/down are supported.")
    if raw.get("attention_bias") and not biased_attention_ok:
        reasons.append(f"{arch} has attention biases including o_proj (attention_bias=true); not supported.")
    return reasons
