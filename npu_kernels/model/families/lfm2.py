"""LiquidAI LFM2 (`Lfm2ForCausalLM`), the hybrid of gated short convolutions around attention, as mlir-air's
lfm2_1_2b_q4nx runs it (Xilinx/mlir-air programming_examples/llms/lfm2_1_2b_q4nx/, README.md at 78aadcff,
lfm2_1_2b_q4nx_weights.py at 0c380f09, lfm2_1_2b_q4nx_prefill.py at 2b09ca0a):

  schedule        irregular, from `layer_types` (or `full_attn_idxs`): LFM2-1.2B's attention layers are 2, 5, 8,
                  10, 12, 14 and the other ten are `conv` (README "Architecture"; weights.py `full_attn_idxs`);
                  nothing is derived from a modulo (prefill.py `run_transformer_block`'s docstring);
  conv block      operator_norm -> in_proj (E -> 3E, columns B | C | x) -> h = B * x (eltwise_mul) -> causal
                  depthwise conv of conv_L_cache = 3 taps over the sequence (conv1d, the pad is the carried
                  state) -> y = C * h -> out_proj; then the same residual + ffn_norm + SwiGLU + residual tail
                  as attention (prefill.py `run_conv_block`, README "Architecture");
  attention       QK-norm (per-head RMSNorm of q and k before RoPE: q_layernorm / k_layernorm), RoPE theta 1e6,
                  full causal GQA (prefill.py `run_attn_block`, weights.py `AttnWeights`);
  carried state   the last conv_L_cache - 1 rows of the pre-convolution h at the real end of the prompt
                  (prefill.py `Lfm2Q4nxPrefill.prefill`, README "The prefill hands the decode TWO regions");
  MLP width       intermediate_size adjusted by block_auto_adjust_ff_dim (int(2F/3), times
                  block_ffn_dim_multiplier, rounded up to block_multiple_of): 12288 -> 8192 (weights.py
                  `hidden_dim: int = 8192  # NOT config.intermediate_size (which reports 12288)`; transformers'
                  Lfm2MLP);
  names           operator_norm / ffn_norm, feed_forward.w1 | w3 | w2 (gate / up / down), self_attn.out_proj,
                  conv.in_proj / conv.conv / conv.out_proj, the final norm `model.embedding_norm` applied after
                  the layers, the head tied (weights.py module docstring "Consequences of sourcing from HF").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from npu_kernels.model.description import CONV, FULL, Description, Layer, rope_of
from npu_kernels.model.families.common import (Family, integer_problems, layer_type_problems, number_problems,
                                               positive_integer, rope_scaling, rope_theta)
from npu_kernels.model.features import short_conv

LFM2_TENSORS = (
    ("attn_norm", "operator_norm.weight"),
    ("wq", "self_attn.q_proj.weight"),
    ("wk", "self_attn.k_proj.weight"),
    ("wv", "self_attn.v_proj.weight"),
    ("q_norm", "self_attn.q_layernorm.weight"),
    ("k_norm", "self_attn.k_layernorm.weight"),
    ("wo", "self_attn.out_proj.weight"),
    ("conv_in", "conv.in_proj.weight"),
    ("conv_w", "conv.conv.weight"),
    ("conv_out", "conv.out_proj.weight"),
    ("ffn_norm", "ffn_norm.weight"),
    ("w_gate", "feed_forward.w1.weight"),
    ("w_up", "feed_forward.w3.weight"),
    ("w_down", "feed_forward.w2.weight"),
)
LAYER_TYPES = ("conv", "full_attention")  # transformers' Lfm2Config.layer_types


def _layer_types(raw: dict[str, Any]) -> list[str]:
    n = int(raw["num_hidden_layers"])
    types = raw.get("layer_types")
    if isinstance(types, list) and len(types) == n:
        return [str(t) for t in types]
    idxs = raw.get("full_attn_idxs")
    idxs = set(idxs) if isinstance(idxs, list) else set(range(n))  # transformers' default: every layer attends
    return ["full_attention" if i in idxs else "conv" for i in range(n)]


def mlp_width(raw: dict[str, Any]) -> int:
    """transformers' Lfm2MLP: intermediate_size, or int(2F/3) * multiplier rounded up to block_multiple_of."""
    width = int(raw.get("intermediate_size") or raw.get("block_ff_dim"))
    if not raw.get("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    if raw.get("block_ffn_dim_multiplier") is not None:
        width = int(raw["block_ffn_dim_multiplier"] * width)
        multiple = int(raw.get("block_multiple_of", 256))
        width = multiple * ((width + multiple - 1) // multiple)
    return width


def _sizes(raw: dict[str, Any], c):
    return replace(c, hidden_dim=mlp_width(raw), rms_norm_eps=float(raw.get("norm_eps", 1e-5)), qk_norm=True,
                   tie_word_embeddings=bool(raw.get("tie_word_embeddings", raw.get("tie_embedding", True))))


def _malformed(raw: dict[str, Any]) -> list[str]:
    """The values `_layer_types`, `mlp_width` and `_sizes` read: layer_types (one of LAYER_TYPES per layer), else
    full_attn_idxs (layer indices), the MLP rounding (a positive integer multiple and factor) and norm_eps."""
    problems = layer_type_problems(raw, "LFM2", LAYER_TYPES)
    idxs, n = raw.get("full_attn_idxs"), raw.get("num_hidden_layers")
    if raw.get("layer_types") is None and idxs is not None:
        if not isinstance(idxs, list):
            problems.append(f"full_attn_idxs {idxs!r:.40} is not a list")
        elif positive_integer(n):
            bad = next((i for i in idxs if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n), None)
            if bad is not None:
                problems.append(f"full_attn_idxs holds {bad!r:.40}, not a layer index (0..{n - 1})")
    return (problems + integer_problems(raw, ("block_multiple_of",))
            + number_problems(raw, ("block_ffn_dim_multiplier", "norm_eps")))


def describe(raw: dict[str, Any], c) -> Description:
    rope = rope_of(rope_theta(raw, None, 1000000.0), rope_scaling(raw))
    layers = tuple(Layer(mixer=CONV, rope=rope) if t == "conv" else Layer(mixer=FULL, rope=rope)
                   for t in _layer_types(raw))
    return Description(family="lfm2", layers=layers, qk_norm=True, eps=c.rms_norm_eps,
                       tied_head=c.tie_word_embeddings, tensors=LFM2_TENSORS, conv_taps=short_conv.CONV_TAPS,
                       final_norm="embedding_norm.weight")


LFM2 = Family("lfm2", ("Lfm2ForCausalLM",), ("lfm2",), describe, short_conv.problems, tie_default=True,
              features=("qk_norm", "short_conv"), sizes=_sizes, malformed=_malformed)
ADAPTERS = (LFM2,)
