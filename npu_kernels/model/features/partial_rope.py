"""A partial rotary and LongRoPE (Phi-3 / Phi-4-mini), as mlir-air's phi4_mini_q4nx runs them (e972f29).
Everything the tool knows about them is here:

  config keys     `partial_rotary_factor` (top level or in the RoPE group), the RoPE group's `rope_type`
                  "longrope" / "su", `short_factor`, `long_factor`, `factor`, `attention_factor`,
                  `original_max_position_embeddings` (`KEYS`);
  validation      `malformed`: the factor in (0, 1]; the factor lists positive finite numbers, one per rotary
                  pair (transformers' `_validate_longrope_rope_parameters` counts them so); factor and
                  attention_factor positive finite numbers. `problems`: LongRoPE needs an
                  original_max_position_embeddings;
  description     `rotary_width` (head_dim x factor, even), `longrope` (the short factors, the attention factor
                  sqrt(1 + ln(max/orig) / ln(orig)) as HF computes it), `describe_fields` (the description's
                  rotary_dim, RoPE scaling and rope_max_positions: past original_max_position_embeddings the long
                  factors apply, which this tool does not implement, so the tables stop there and the pipeline
                  refuses beyond);
  reference       `short_inv_freq` (the host LUT's "longrope" frequencies, npu_kernels.model.host_ops.rope_inv_freq)
                  and `rotate_partial`: the leading rotary_dim columns rotated, the tail passed through;
  plan / perf     `shape_extra`: the RoPE rows' rotary_dim (phi4_mini_q4nx `rope_partial`);
  drill           `rotary_full_width` (`full_width`: the description with the whole head rotary).

mlir-air e972f29: phi4_mini_q4nx/README.md:38-46 "Partial rotary" (96 of 128), phi4_mini_q4nx_weights.py:22-28,
:55-58 (partial), :75-103, :131-139 (LongRoPE)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from npu_kernels.model.description import rope_of
from npu_kernels.model.features import Feature
from npu_kernels.model.features.checks import number_problems, positive_integer, positive_number

KEYS = ("partial_rotary_factor", "rope_type", "short_factor", "long_factor", "factor", "attention_factor",
        "original_max_position_embeddings")
LONGROPE = ("longrope", "su")  # transformers' names of it ("su" the older)


def _params(raw: dict[str, Any]) -> dict[str, Any]:
    from npu_kernels.model.families.common import rope_params  # the families import the features

    return rope_params(raw)


def _rope_type(raw: dict[str, Any]) -> str:
    from npu_kernels.model.families.common import rope_type

    return rope_type(raw)


def factor(raw: dict[str, Any]) -> float:
    """partial_rotary_factor: top level, else in the RoPE group, else 1 (the whole head)."""
    value = raw.get("partial_rotary_factor")
    if value is None:
        value = _params(raw).get("partial_rotary_factor", 1.0)
    return float(value)


def is_longrope(raw: dict[str, Any]) -> bool:
    return _rope_type(raw) in LONGROPE


def original_positions(raw: dict[str, Any]) -> int | None:
    """original_max_position_embeddings of a LongRoPE config (the positions its short factors cover), else None."""
    if not is_longrope(raw):
        return None
    return _params(raw).get("original_max_position_embeddings") or raw.get("original_max_position_embeddings")


def longrope(raw: dict[str, Any]) -> dict[str, Any] | None:
    """The scaling the host tables are built with: the short factors and the attention factor (None: no LongRoPE)."""
    params = _params(raw)
    if not is_longrope(raw):
        return None
    orig = int(params.get("original_max_position_embeddings") or raw.get("original_max_position_embeddings"))
    scale = params.get("factor") or raw.get("max_position_embeddings", orig) / orig
    attention = params.get("attention_factor")
    if attention is None:
        attention = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(orig))
    return {"rope_type": "longrope", "short_factor": [float(x) for x in params["short_factor"]],
            "original_max_position_embeddings": orig, "attention_factor": float(attention)}


def problems(raw: dict[str, Any], arch: str) -> list[str]:
    if is_longrope(raw) and original_positions(raw) is None:
        return [f"{arch} uses LongRoPE without an original_max_position_embeddings."]
    return []


def _head_dim(raw: dict[str, Any]) -> int | None:
    if positive_integer(raw.get("head_dim")):
        return raw["head_dim"]
    width, heads = raw.get("hidden_size"), raw.get("num_attention_heads")
    return width // heads if positive_integer(width) and positive_integer(heads) else None


def malformed(raw: dict[str, Any]) -> list[str]:
    """The values `rotary_width` and `longrope` read: partial_rotary_factor in (0, 1]; with LongRoPE, short_factor
    and long_factor lists of positive finite numbers, one per rotary pair (head_dim x partial_rotary_factor / 2,
    as transformers' `_validate_longrope_rope_parameters` counts them; the long factors apply past
    original_max_position_embeddings, where the pipeline refuses to run, and are checked all the same), factor and
    attention_factor positive finite numbers. A config without long_factor is let through (the tool never reads
    it). original_max_position_embeddings is architecture.config_problems'."""
    params = _params(raw)
    group = "rope_parameters" if params is raw.get("rope_parameters") else "rope_scaling"
    found = []
    for where, holder in (("", raw), (f"{group}.", params)):
        value = holder.get("partial_rotary_factor")
        if value is not None and not (positive_number(value) and value <= 1):
            found.append(f"{where}partial_rotary_factor {value!r:.40} must lie in (0, 1]")
    if not is_longrope(raw):
        return found
    head_dim = _head_dim(raw)
    pairs = int(head_dim * factor(raw)) // 2 if head_dim and not found else None
    for key in ("short_factor", "long_factor"):
        values = params.get(key)
        if values is None and key == "long_factor":  # not read: the pipeline stops at the short factors' range
            continue
        if not isinstance(values, list) or not all(positive_number(x) for x in values):
            found.append(f"{group}.{key} must be a list of positive finite numbers (LongRoPE)")
        elif pairs is not None and len(values) != pairs:
            found.append(f"{group}.{key} has {len(values)} values; head_dim {head_dim} x partial_rotary_factor "
                         f"{factor(raw):g} rotates {2 * pairs} dims, {pairs} pairs")
    return found + number_problems(params, ("factor", "attention_factor"), f"{group}.")


def describe_fields(raw: dict[str, Any], head_dim: int, theta: float) -> tuple[dict[str, Any], Any]:
    """(the Description fields rotary_dim and rope_max_positions, the layers' Rope) of a config; ValueError (one
    sentence) for an odd rotary width or short factors of the wrong count."""
    rotary = int(head_dim * factor(raw))
    if rotary % 2:
        raise ValueError(f"rotary width {rotary} (partial_rotary_factor x head_dim) is odd; half-split RoPE "
                         "needs an even width")
    scaling = longrope(raw)
    if scaling and len(scaling["short_factor"]) != rotary // 2:
        raise ValueError(f"LongRoPE short_factor has {len(scaling['short_factor'])} values; the rotary width "
                         f"{rotary} needs {rotary // 2}")
    fields = {"rotary_dim": rotary if rotary != head_dim else 0,
              "rope_max_positions": scaling["original_max_position_embeddings"] if scaling else None}
    return fields, rope_of(theta, scaling)


def short_inv_freq(scaling: dict[str, Any], theta: float, exponents: np.ndarray) -> np.ndarray:
    """LongRoPE's inverse frequencies inside original_max_position_embeddings (float32, as transformers computes
    them): 1 / (short_factor x theta^(2i/d)) (npu_kernels.model.host_ops.rope_inv_freq asks for them)."""
    short = np.asarray(scaling["short_factor"], np.float32)
    return (np.float32(1.0) / (short * np.power(np.float32(theta), exponents))).astype(np.float32)


def rotate_partial(rope, rows: np.ndarray, cos: np.ndarray, sin: np.ndarray, rotary_dim: int) -> np.ndarray:
    """Half-split RoPE (`rope(rows, cos, sin)`: the kernel, or `rotate_host`) over the rotary width: the whole
    head, or (a partial rotary) the leading rotary_dim columns rotated and the tail passed through
    (phi4_mini_q4nx/README.md "Partial rotary", mlir-air e972f29)."""
    if rotary_dim == rows.shape[-1]:
        return rope(rows, cos, sin)
    return np.concatenate([rope(np.ascontiguousarray(rows[:, :rotary_dim]), cos, sin), rows[:, rotary_dim:]], axis=1)


def shape_extra(c) -> dict[str, int]:
    """What a RoPE plan row or launch adds for a partial rotary: its width (nothing for the whole head)."""
    return {"rotary_dim": c.rotary_dim} if c.rotary_dim != c.head_dim else {}


def full_width(config):
    """The drill "rotary_full_width": the description with the whole head rotary; LongRoPE's short factors (one
    per rotated pair) extended with 1.0 to the head's pairs, the frequencies a full-width table would read."""
    arch, pairs = config.arch, config.head_dim // 2

    def widened(layer):
        scaling = layer.rope.scaling_dict()
        if not scaling or "short_factor" not in scaling:
            return layer
        short = list(scaling["short_factor"])
        scaling["short_factor"] = short + [1.0] * (pairs - len(short))
        return replace(layer, rope=rope_of(layer.rope.theta, scaling))

    return replace(arch, rotary_dim=0, layers=tuple(widened(x) for x in arch.layers))


FEATURE = Feature("partial_rope", KEYS, malformed=malformed,
                  present=lambda arch: bool(arch.rotary_dim or arch.rope_max_positions),
                  faults={"rotary_full_width": "a partial rotary's RoPE rotates every head dim instead of the leading "
                                               "rotary_dim"})
