"""What the family adapters share: the `Family` record, the readers of config.json's RoPE fields (top-level
`rope_theta` / `rope_scaling` as transformers 4 writes them, `rope_parameters` as transformers 5 does, per layer
type for Gemma3) and the checks of the values an adapter reads (`positive_number`, `positive_integer`,
`layer_type_problems`), each naming the key in one sentence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from npu_kernels.model.description import Description
# the checks of a value an adapter reads live beside the features that read most of them; re-exported here
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


def rope_params(raw: dict[str, Any], layer_type: str | None = None) -> dict[str, Any]:
    """The RoPE parameter group: `rope_parameters` (per layer type when keyed by one), else `rope_scaling`."""
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and layer_type and isinstance(params.get(layer_type), dict):
        return params[layer_type]
    if isinstance(params, dict) and ("rope_type" in params or "rope_theta" in params):
        return params
    scaling = raw.get("rope_scaling")
    return scaling if isinstance(scaling, dict) else {}


def rope_theta(raw: dict[str, Any], layer_type: str | None = None, default: float = 10000.0) -> float:
    """rope_theta of a layer type (transformers 5: under rope_parameters[layer_type]), else the top-level one
    (transformers 4), else under rope_parameters."""
    params = rope_params(raw, layer_type)
    if layer_type and params.get("rope_theta") is not None:
        return float(params["rope_theta"])
    if raw.get("rope_theta") is not None:
        return float(raw["rope_theta"])
    if params.get("rope_theta") is not None:
        return float(params["rope_theta"])
    return default


def rope_scaling(raw: dict[str, Any], layer_type: str | None = None) -> dict[str, Any] | None:
    """The RoPE scaling parameters (None for plain RoPE), from `rope_scaling` or `rope_parameters`."""
    groups = [rope_params(raw, layer_type)] if layer_type else [raw.get("rope_scaling"), raw.get("rope_parameters")]
    for params in groups:
        if isinstance(params, dict) and (params.get("rope_type") or params.get("type", "default")) != "default":
            out = dict(params)
            out["rope_type"] = out.get("rope_type") or out.get("type")
            return out
    return None


def rope_type(raw: dict[str, Any]) -> str:
    for key in ("rope_scaling", "rope_parameters"):
        params = raw.get(key)
        if isinstance(params, dict):
            rtype = params.get("rope_type") or params.get("type")
            if rtype:
                return str(rtype)
    return "default"


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
