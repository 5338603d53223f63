"""Gemma3's text decoder (`Gemma3ForCausalLM`; the text half of a `Gemma3ForConditionalGeneration` folder), as
mlir-air's gemma3_4b_q4nx runs it (mlir-air e972f29):

  attention       five of six layers sliding with a 1024-position window, the sixth global; the window is a
                  mask of the same flash-attention kernel (README.md:206-211 "Attention alternates";
                  gemma3_4b_q4nx_weights.py:63-69 `is_global_layer`: (i+1) % 6 == 0; attn_npu2.cc:730-741
                  `apply_window_mask` keeps q - window < kv <= q), plan rows name the window;
  RoPE            dual theta: local 1e4, global 1e6 with linear x8 (weights.py:59-62, prefill.py:410-426);
  QK-norm         per-head RMSNorm of q and k before RoPE (prefill.py:21, weights.py:14-15, :225-229);
  norms           four per layer - input, post-attention (on the O output, before the residual add),
                  pre-FFN, post-FFN (on the down output) - with the `1+w` fold, eps 1e-6 (README.md:35,
                  :202-205; weights.py:9-13, :212-223; prefill.py:16-19, :182-186, :319-322);
  MLP             GELU-tanh GLU: gelu_tanh(gate) * up (README.md:196; prefill.py:20, :305-306);
  softmax scale   query_pre_attn_scalar ** -0.5 (0.0625 at 256, README.md:32);
  embedding       scaled by sqrt(hidden) at the gather, the tied head unscaled (weights.py:18-20, :55-57); HF
                  multiplies by the scale rounded to bf16 (Gemma3TextScaledWordEmbedding), so the description
                  records that rounding;
  head            tied, partitions of 16384 rows (17 for 262208, prefill.py:73-76).
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from npu_kernels.model.description import FULL, GELU_TANH_GLU, LLAMA_TENSORS, SANDWICH, SLIDING, Description, Layer, rope_of
from npu_kernels.model.families.common import (Family, activation, layer_type_problems, number_problems,
                                               rope_scaling, rope_theta)
from npu_kernels.model.features import sliding_window

GELU_TANH = {"gelu_pytorch_tanh", "gelu_tanh", "gelu_new"}
LAYER_TYPES = (sliding_window.FULL_KIND, sliding_window.SLIDING_KIND)  # transformers' Gemma3TextConfig.layer_types
LM_HEAD_PARTITION = 16384  # gemma3_4b_q4nx_prefill.py:73-76
# HF Gemma3 names the norm on the attention output post_attention_layernorm and the pre-FFN norm
# pre_feedforward_layernorm (weights.py:215-220 reads the four in this order)
SANDWICH_TENSORS = tuple((f, "pre_feedforward_layernorm.weight" if f == "ffn_norm" else s) for f, s in LLAMA_TENSORS) \
    + (("post_attn_norm", "post_attention_layernorm.weight"), ("post_ffn_norm", "post_feedforward_layernorm.weight"))


def text_config(raw: dict[str, Any]) -> dict[str, Any]:
    """A multimodal folder's text decoder config (its `text_config`), else the config itself."""
    text = raw.get("text_config")
    return {**text, "architectures": raw.get("architectures")} if isinstance(text, dict) else raw


def _local_theta(raw: dict[str, Any]) -> float:
    if raw.get("rope_local_base_freq") is not None:
        return float(raw["rope_local_base_freq"])
    return rope_theta(raw, "sliding_attention")


def _malformed(raw: dict[str, Any]) -> list[str]:
    """The values `describe` reads: layer_types (one of LAYER_TYPES per layer), the window and the pattern that
    stands for layer_types when it is absent (positive integers: the pattern is a modulus), the local RoPE base and
    query_pre_attn_scalar (raised to -0.5) positive finite numbers. The nested rope_parameters groups are
    architecture.config_problems'."""
    raw = text_config(raw)
    return (layer_type_problems(raw, "Gemma3", LAYER_TYPES)
            + sliding_window.malformed(raw)
            + number_problems(raw, ("rope_local_base_freq", "query_pre_attn_scalar")))


def _problems(raw: dict[str, Any], arch: str) -> list[str]:
    raw = text_config(raw)
    reasons = []
    act = activation(raw)
    if act not in GELU_TANH:
        reasons.append(f"{arch} uses activation {act}; the Gemma3 adapter describes the GELU-tanh GLU.")
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if raw.get(key) is not None:
            reasons.append(f"{arch} caps logits ({key}={raw[key]}); soft-capping is not implemented.")
    reasons += sliding_window.problems(raw, arch)
    scalar, head_dim = raw.get("query_pre_attn_scalar"), raw.get("head_dim")
    if scalar is not None and head_dim is not None and scalar != head_dim:
        reasons.append(f"{arch} scales attention by query_pre_attn_scalar {scalar!r}, not head_dim {head_dim}; the "
                       "flash-attention kernel scales by 1/sqrt(head_dim) (Gemma3-4B's 256 = head_dim).")
    return reasons


def describe(raw: dict[str, Any], c) -> Description:
    raw = text_config(raw)
    window = sliding_window.width(raw)
    per_type = isinstance(raw.get("rope_parameters"), dict) and "full_attention" in raw["rope_parameters"]
    # transformers 5: rope_parameters per layer type; transformers 4: rope_theta / rope_scaling are the global
    # layers', rope_local_base_freq the local layers' (plain RoPE)
    global_rope = rope_of(rope_theta(raw, "full_attention", 1000000.0),
                          rope_scaling(raw, "full_attention") if per_type else rope_scaling(raw))
    local_rope = rope_of(_local_theta(raw), rope_scaling(raw, "sliding_attention") if per_type else None)
    layers = tuple(Layer(mixer=SLIDING, window=window, rope=local_rope) if t == sliding_window.SLIDING_KIND
                   else Layer(mixer=FULL, rope=global_rope) for t in sliding_window.layer_kinds(raw))
    scalar = float(raw.get("query_pre_attn_scalar") or c.head_dim)
    embed_scale = float(np.float32(math.sqrt(c.emb_dim)).astype(ml_dtypes.bfloat16).astype(np.float32))
    prefix = "model.language_model." if raw.get("architectures") and "Conditional" in raw["architectures"][0] else "model."
    notes = (("a Gemma3ForConditionalGeneration folder: its text decoder is deployed, the vision tower is not",)
             if prefix != "model." else ())
    return Description(family="gemma3", layers=layers, qk_norm=True, attn_scale=scalar ** -0.5, mlp=GELU_TANH_GLU,
                       norms=SANDWICH, norm_offset=1.0, eps=c.rms_norm_eps, embed_scale=embed_scale,
                       tied_head=c.tie_word_embeddings, lm_head_partition=LM_HEAD_PARTITION,
                       tensors=SANDWICH_TENSORS, prefix=prefix, notes=notes)


GEMMA3 = Family("gemma3", ("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"), ("gemma3_text", "gemma3"),
                describe, _problems, tie_default=True, features=("qk_norm", "sliding_window"), malformed=_malformed)
ADAPTERS = (GEMMA3,)
