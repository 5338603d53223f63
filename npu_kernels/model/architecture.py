"""Architecture assessment and config resolution from a local HF config.json.

`assess(raw)` decides whether a model is in scope for the NPU2 recipe (a decoder-only family with an adapter in
npu_kernels.model.families: Llama, Mistral without sliding window, Qwen2, Qwen3, Phi-3, Gemma3's text decoder) and,
if not, says why in one sentence per reason. `resolve(raw)` turns the config.json dict into the `ModelConfig` every numeric component uses.
Both are pure functions of the dict; `load_raw_config(path)` is the only I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from npu_kernels.model import families
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.families.common import integer_problems, rope_type
from npu_kernels.model.features import sliding_window
from npu_kernels.thresholds import CONFIG_SIZE_MAX

MOE_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts", "n_experts",
            "num_experts_per_tok", "moe_intermediate_size")
SILU = {"silu", "swish"}


class ModelConfigError(ValueError):
    """Raised when a config.json is missing, unreadable or lacks a field the resolver needs."""


@dataclass(frozen=True)
class Assessment:
    """Field names match the `ArchitectureAssessed` event."""

    architecture: str
    in_scope: bool
    reasons: list[str] = field(default_factory=list)
    features: dict[str, Any] = field(default_factory=dict)

    def event_fields(self) -> dict[str, Any]:
        return asdict(self)


def load_raw_config(path: str | Path) -> dict[str, Any]:
    """Read config.json from a HF model folder or from the file itself."""
    p = Path(path).expanduser()
    file = p / "config.json" if p.is_dir() else p
    if not file.is_file():
        raise ModelConfigError(f"no config.json at {file}: point at a local HF model folder or its config.json.")
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelConfigError(f"{file} is not valid JSON ({e}).") from e
    if not isinstance(raw, dict):
        raise ModelConfigError(f"{file} does not hold a JSON object.")
    return raw


def default_name(path: str | Path) -> str:
    """Deployment name from a path: the model folder's name (or a config file's stem), lower-cased,
    every run of non-alphanumerics turned into one `_`."""
    p = Path(path).expanduser()
    if p.suffix == ".json" and not p.is_dir():
        stem = p.stem
        base = p.resolve().parent.name if stem == "config" else stem
    else:
        base = p.resolve().name
    name = re.sub(r"[^a-z0-9]+", "_", base.lower()).strip("_")
    return name or "model"


def architecture_name(raw: dict[str, Any]) -> str:
    archs = raw.get("architectures") or []
    if archs:
        return str(archs[0])
    return families.MODEL_TYPES.get(str(raw.get("model_type", "")), str(raw.get("model_type") or "unknown"))


def _rope_type(raw: dict[str, Any]) -> str:
    return rope_type(raw)


def _out_of_scope_reasons(raw: dict[str, Any], arch: str) -> list[str]:
    reasons: list[str] = []
    if raw.get("is_encoder_decoder"):
        reasons.append(f"{arch} is an encoder-decoder model; only decoder-only models are in scope.")
    moe = [k for k in MOE_KEYS if raw.get(k) not in (None, 0, 1, False)]
    if moe:
        reasons.append(f"{arch} is a mixture-of-experts model ({', '.join(moe)}); MoE layers are not supported.")
    if raw.get("kv_lora_rank") or raw.get("q_lora_rank"):
        reasons.append(f"{arch} uses multi-head latent attention (kv_lora_rank); MLA is not supported.")
    if reasons:
        return reasons
    refused = families.refused_reason(arch, raw)
    if refused:
        return [refused]
    family = families.family_of(arch)
    if family is None:
        act = raw.get("hidden_act") or raw.get("activation_function") or raw.get("feed_forward_proj")
        details = []
        if "rms_norm_eps" not in raw:
            details.append("LayerNorm instead of RMSNorm")
        if act and str(act) not in SILU:
            details.append(f"activation {act} instead of a SiLU-gated (SwiGLU) MLP")
        if "rope_theta" not in raw and "rope_parameters" not in raw:
            details.append("no RoPE")
        why = f" ({'; '.join(details)})" if details else ""
        return [f"{arch} is not an RMSNorm + SwiGLU + RoPE decoder{why}; in scope: {', '.join(families.in_scope_names())}."]
    reasons = [] if family.windows else sliding_window.refused(raw, arch, family.name)
    return reasons + family.problems(raw, arch)


def assess(raw: dict[str, Any]) -> Assessment:
    """Decide whether the config is in scope; every rejection reason is one sentence naming it."""
    arch = architecture_name(raw)
    reasons = _out_of_scope_reasons(raw, arch)
    family = families.family_of(arch)
    qkv_bias, qk_norm = (family.qkv_bias, family.qk_norm) if family else (False, False)
    raw = families.text_config(raw)
    heads = raw.get("num_attention_heads") or raw.get("n_head") or raw.get("num_heads")
    kv_heads = raw.get("num_key_value_heads") or heads
    features = {
        "qkv_bias": qkv_bias,
        "qk_norm": qk_norm,
        "tied_embeddings": bool(raw.get("tie_word_embeddings", _tie_default(arch))),
        "gqa_group": int(heads // kv_heads) if _positive_int(heads) and _positive_int(kv_heads) else None,
        "rope_type": _rope_type(raw),
    }
    return Assessment(architecture=arch, in_scope=not reasons, reasons=reasons, features=features)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _tie_default(arch: str) -> bool:
    # transformers' Llama/Mistral/Qwen2/Qwen3/Phi3 configs default to untied; PretrainedConfig itself (and
    # Gemma3's) to tied
    family = families.family_of(arch)
    return family.tie_default if family else True


def _require(raw: dict[str, Any], key: str) -> Any:
    if raw.get(key) is None:
        raise ModelConfigError(f"config.json has no '{key}', which the resolver needs.")
    return raw[key]


rope_theta = families.rope_theta
rope_scaling = families.rope_scaling


_SIZES = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
          "intermediate_size", "vocab_size")


def config_problems(raw: dict[str, Any]) -> list[str]:
    """Every value of config.json the resolver cannot use, one sentence each (empty: all usable).

    Sizes are positive JSON integers (not 1024.7, not 1e12, not true) no larger than CONFIG_SIZE_MAX; the
    width divides by the heads where head_dim is derived from it; heads divide by the kv heads; head_dim is
    even (half-split RoPE); rope_theta and rms_norm_eps are positive finite numbers, and so are
    rope_parameters.* / rope_scaling.* where the RoPE math reads them, in each layer type's group too
    (`_rope_group_problems`); the position limits (max_position_embeddings, original_max_position_embeddings) are
    positive integers; and the values the family's adapter reads are well formed (`Family.malformed`: Gemma3's and
    LFM2's layer_types, Phi-3's LongRoPE factor lists)."""
    problems: list[str] = []
    ok: dict[str, int] = {}
    for key in _SIZES:
        value = raw.get(key)
        if value is None:
            if key not in ("num_key_value_heads", "head_dim"):
                problems.append(f"config.json has no '{key}', which the resolver needs")
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{key} {value!r} is not an integer")
        elif value <= 0:
            problems.append(f"{key} {value} must be positive")
        elif value > CONFIG_SIZE_MAX:
            problems.append(f"{key} {value} exceeds {CONFIG_SIZE_MAX} (no NPU2 buffer holds it)")
        else:
            ok[key] = value
    width, heads = ok.get("hidden_size"), ok.get("num_attention_heads")
    kv_heads = ok.get("num_key_value_heads", heads)
    if width and heads and raw.get("head_dim") is None and width % heads:
        problems.append(f"hidden_size {width} is not divisible by num_attention_heads {heads} "
                        "(head_dim is derived from them)")
    if heads and kv_heads and heads % kv_heads:
        problems.append(f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    head_dim = ok.get("head_dim") or (width // heads if width and heads and not width % heads else None)
    if head_dim and head_dim % 2:
        problems.append(f"head_dim {head_dim} is odd (half-split RoPE needs an even head_dim)")
    for key in ("rope_theta", "rms_norm_eps"):
        value = raw.get(key)
        if value is not None and not _positive_finite(value):
            problems.append(f"{key} {value!r} must be a positive finite number")
    problems += integer_problems(raw, POSITION_LIMITS)
    for group in ("rope_parameters", "rope_scaling"):
        problems += _rope_group_problems(group, raw.get(group))
    family = families.family_of(architecture_name(raw))
    if family is not None and family.malformed is not None:
        problems += family.malformed(raw)
    return problems


def malformed_config(raw: dict[str, Any]) -> str | None:
    """Why the config.json of a family with an adapter cannot be resolved (one line naming every unusable value),
    or None; None for a family without one, whose config the assessment refuses as out of scope. `init` asks this
    before it assesses anything, so a malformed config records nothing."""
    if families.family_of(architecture_name(raw)) is None:
        return None
    problems = config_problems(families.text_config(raw))
    return "invalid config.json: " + "; ".join(problems) + "; nothing was recorded" if problems else None


# the RoPE parameters npu_kernels.model.pipeline.rope_inv_freq reads, per rope_type (besides rope_theta)
ROPE_FIELDS = {"linear": ("factor",),
               "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}
# the positions a model was trained for (npu_kernels.model.config.position_limit, LongRoPE's short-factor range)
POSITION_LIMITS = ("max_position_embeddings", "original_max_position_embeddings")


def _positive_finite(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value < float("inf")


def _rope_group_problems(group: str, params: Any) -> list[str]:
    """rope_parameters / rope_scaling: an object (or absent), whose rope_theta and the fields its rope_type's
    math reads are positive finite numbers (llama3: high_freq_factor above low_freq_factor, it divides by the
    difference), and original_max_position_embeddings, where given, a positive integer. transformers 5 nests one
    such group per layer type (Gemma3: `{"full_attention": {...}, "sliding_attention": {...}}`, what
    `nested_rope_parameter_keys` reads): an object-valued entry is checked as the group `group.<layer type>`."""
    if params is None:
        return []
    if not isinstance(params, dict):
        return [f"{group} {params!r:.40} is not an object"]
    problems = [p for k, v in params.items() if isinstance(v, dict) for p in _rope_group_problems(f"{group}.{k}", v)]
    if params.get("rope_theta") is not None and not _positive_finite(params["rope_theta"]):
        problems.append(f"{group}.rope_theta {params['rope_theta']!r:.40} must be a positive finite number")
    rtype = params.get("rope_type") or params.get("type") or "default"
    for key in ROPE_FIELDS.get(str(rtype), ()):
        if params.get(key) is None:
            problems.append(f"{group}.{key} is missing (rope_type {rtype} needs it)")
        elif not _positive_finite(params[key]):
            problems.append(f"{group}.{key} {params[key]!r:.40} must be a positive finite number")
    low, high = params.get("low_freq_factor"), params.get("high_freq_factor")
    if rtype == "llama3" and _positive_finite(low) and _positive_finite(high) and high <= low:
        problems.append(f"{group}.high_freq_factor {high} must exceed low_freq_factor {low}")
    if not any(p.startswith(f"{group}.original_max_position_embeddings ") for p in problems):  # not twice
        problems += integer_problems(params, ("original_max_position_embeddings",), f"{group}.")
    return problems


def _window(raw: dict[str, Any]) -> int | None:
    """`max_position_embeddings` when it is a positive integer (config_problems refuses other numbers), else None."""
    value = raw.get("max_position_embeddings")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def resolve(raw: dict[str, Any]) -> ModelConfig:
    """The ModelConfig of an in-scope config.json (head_dim defaults to hidden / heads), with the architecture
    description its family's adapter builds (npu_kernels.model.families).

    Refuses (ModelConfigError, one line naming every unusable value) what `config_problems` finds."""
    arch = architecture_name(raw)
    tie = raw.get("tie_word_embeddings", _tie_default(arch))
    raw = families.text_config(raw)
    problems = config_problems(raw)
    if problems:
        raise ModelConfigError("invalid config.json: " + "; ".join(problems) + ".")
    emb = int(_require(raw, "hidden_size"))
    heads = int(_require(raw, "num_attention_heads"))
    kv_heads = int(raw.get("num_key_value_heads") or heads)
    head_dim = int(raw.get("head_dim") or emb // heads)
    family = families.family_of(arch)
    qkv_bias, qk_norm = (family.qkv_bias, family.qk_norm) if family else (False, False)
    if heads % kv_heads:
        raise ModelConfigError(f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}.")
    config = ModelConfig(
        n_layers=int(_require(raw, "num_hidden_layers")),
        emb_dim=emb,
        n_heads=heads,
        n_kv_heads=kv_heads,
        head_dim=head_dim,
        hidden_dim=int(_require(raw, "intermediate_size")),
        vocab_size=int(_require(raw, "vocab_size")),
        rope_theta=rope_theta(raw),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(tie),
        qkv_bias=qkv_bias,
        qk_norm=qk_norm,
        architecture=arch,
        max_positions=_window(raw),
    )
    if family is None:
        return config
    try:
        if family.sizes is not None:
            config = family.sizes(raw, config)
        return replace(config, description=family.describe(raw, config))
    except (KeyError, TypeError, ValueError, ArithmeticError) as e:
        raise ModelConfigError(f"invalid config.json for {arch}: {e}.") from e
