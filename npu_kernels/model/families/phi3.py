"""Phi-3 / Phi-4-mini (`Phi3ForCausalLM`): the Llama form with fused source tensors, a partial rotary and
LongRoPE, as mlir-air's phi4_mini_q4nx runs it (mlir-air e972f29):

  fused tensors   `self_attn.qkv_proj` rows [q | k | v] and `mlp.gate_up_proj` rows [gate | up], split at load
                  (phi4_mini_q4nx_weights.py:238-247 slices them in this order; README.md:55-60 "Fused source
                  tensors": the [q,k,v] / [gate,up] row order is confirmed by the 0.997 cosine);
  partial rotary  partial_rotary_factor x head_dim leading dims rotated, the tail passed through
                  (README.md:38-46 "Partial rotary": 96 of 128; phi4_mini_q4nx_weights.py:22-28, :55-58);
  LongRoPE        the short factors inside original_max_position_embeddings, cos/sin scaled by
                  sqrt(1 + ln(max/orig) / ln(orig)) as HF does (phi4_mini_q4nx_weights.py:75-103, :131-139);
                  past original_max_position_embeddings the long factors apply, which this tool does not
                  implement: the description bounds the RoPE tables there and the pipeline refuses beyond;
  LM head         partitions of 16384 rows (13 for vocab 200064, phi4_mini_q4nx_prefill.py:56-58).
"""

from __future__ import annotations

import math
from typing import Any

from npu_kernels.model.description import LLAMA_TENSORS, Description, Layer, rope_of
from npu_kernels.model.families.common import (Family, number_problems, positive_integer, positive_number,
                                               rope_params, rope_theta, rope_type, swiglu_problems)
from npu_kernels.model.features import sliding_window

FUSED = (("self_attn.qkv_proj.weight", ("wq", "wk", "wv")), ("mlp.gate_up_proj.weight", ("w_gate", "w_up")))
LM_HEAD_PARTITION = 16384  # phi4_mini_q4nx_prefill.py:57-58


def _partial_factor(raw: dict[str, Any]) -> float:
    value = raw.get("partial_rotary_factor")
    if value is None:
        value = rope_params(raw).get("partial_rotary_factor", 1.0)
    return float(value)


def _longrope(raw: dict[str, Any], rotary_dim: int) -> dict[str, Any] | None:
    params = rope_params(raw)
    if rope_type(raw) not in ("longrope", "su"):
        return None
    orig = int(params.get("original_max_position_embeddings") or raw.get("original_max_position_embeddings"))
    factor = params.get("factor") or raw.get("max_position_embeddings", orig) / orig
    attention = params.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    return {"rope_type": "longrope", "short_factor": [float(x) for x in params["short_factor"]],
            "original_max_position_embeddings": orig, "attention_factor": float(attention)}


def _problems(raw: dict[str, Any], arch: str) -> list[str]:
    reasons = swiglu_problems(raw, arch)
    rtype = rope_type(raw)
    if rtype not in ("default", "longrope", "su"):
        reasons.append(f"{arch} uses RoPE scaling '{rtype}'; supported for Phi-3: default, longrope.")
    if rtype in ("longrope", "su"):
        orig = rope_params(raw).get("original_max_position_embeddings") or raw.get("original_max_position_embeddings")
        if orig is None:
            reasons.append(f"{arch} uses LongRoPE without an original_max_position_embeddings.")
    return reasons + sliding_window.refused_inside(raw, arch, _rope_max(raw), "Phi-3")


def _head_dim(raw: dict[str, Any]) -> int | None:
    if positive_integer(raw.get("head_dim")):
        return raw["head_dim"]
    width, heads = raw.get("hidden_size"), raw.get("num_attention_heads")
    return width // heads if positive_integer(width) and positive_integer(heads) else None


def _malformed(raw: dict[str, Any]) -> list[str]:
    """The values `describe` and `_longrope` read: partial_rotary_factor in (0, 1]; with LongRoPE, short_factor
    and long_factor lists of positive finite numbers, one per rotary pair (head_dim x partial_rotary_factor / 2,
    as transformers' `_validate_longrope_rope_parameters` counts them; the long factors apply past
    original_max_position_embeddings, where the pipeline refuses to run, and are checked all the same), factor and
    attention_factor positive finite numbers. A config without long_factor is let through (the tool never reads
    it). original_max_position_embeddings is architecture.config_problems'."""
    params = rope_params(raw)
    group = "rope_parameters" if params is raw.get("rope_parameters") else "rope_scaling"
    problems = []
    for where, holder in (("", raw), (f"{group}.", params)):
        value = holder.get("partial_rotary_factor")
        if value is not None and not (positive_number(value) and value <= 1):
            problems.append(f"{where}partial_rotary_factor {value!r:.40} must lie in (0, 1]")
    if rope_type(raw) not in ("longrope", "su"):
        return problems
    head_dim = _head_dim(raw)
    pairs = int(head_dim * _partial_factor(raw)) // 2 if head_dim and not problems else None
    for key in ("short_factor", "long_factor"):
        values = params.get(key)
        if values is None and key == "long_factor":  # not read: the pipeline stops at the short factors' range
            continue
        if not isinstance(values, list) or not all(positive_number(x) for x in values):
            problems.append(f"{group}.{key} must be a list of positive finite numbers (LongRoPE)")
        elif pairs is not None and len(values) != pairs:
            problems.append(f"{group}.{key} has {len(values)} values; head_dim {head_dim} x partial_rotary_factor "
                            f"{_partial_factor(raw):g} rotates {2 * pairs} dims, {pairs} pairs")
    return problems + number_problems(params, ("factor", "attention_factor"), f"{group}.")


def _rope_max(raw: dict[str, Any]) -> int | None:
    if rope_type(raw) not in ("longrope", "su"):
        return None
    return rope_params(raw).get("original_max_position_embeddings") or raw.get("original_max_position_embeddings")


def describe(raw: dict[str, Any], c) -> Description:
    rotary = int(c.head_dim * _partial_factor(raw))
    if rotary % 2:
        raise ValueError(f"rotary width {rotary} (partial_rotary_factor x head_dim) is odd; half-split RoPE "
                         "needs an even width")
    scaling = _longrope(raw, rotary)
    if scaling and len(scaling["short_factor"]) != rotary // 2:
        raise ValueError(f"LongRoPE short_factor has {len(scaling['short_factor'])} values; the rotary width "
                         f"{rotary} needs {rotary // 2}")
    rope = rope_of(rope_theta(raw), scaling)
    tensors = tuple((f, s) for f, s in LLAMA_TENSORS)
    return Description(family="phi3", layers=tuple(Layer(rope=rope) for _ in range(c.n_layers)),
                       rotary_dim=rotary if rotary != c.head_dim else 0, eps=c.rms_norm_eps,
                       tied_head=c.tie_word_embeddings, lm_head_partition=LM_HEAD_PARTITION, tensors=tensors,
                       fused=FUSED, rope_max_positions=scaling["original_max_position_embeddings"] if scaling else None)


PHI3 = Family("phi3", ("Phi3ForCausalLM",), ("phi3",), describe, _problems, malformed=_malformed)
