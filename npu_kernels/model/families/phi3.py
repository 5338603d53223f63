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

from typing import Any

from npu_kernels.model.description import LLAMA_TENSORS, Description, Layer
from npu_kernels.model.families.common import Family, rope_theta, rope_type, swiglu_problems
from npu_kernels.model.features import fused_projections, partial_rope, sliding_window

FUSED = (fused_projections.QKV, fused_projections.GATE_UP)
LM_HEAD_PARTITION = 16384  # phi4_mini_q4nx_prefill.py:57-58


def _problems(raw: dict[str, Any], arch: str) -> list[str]:
    reasons = swiglu_problems(raw, arch)
    rtype = rope_type(raw)
    if rtype not in ("default", *partial_rope.LONGROPE):
        reasons.append(f"{arch} uses RoPE scaling '{rtype}'; supported for Phi-3: default, longrope.")
    reasons += partial_rope.problems(raw, arch)
    return reasons + sliding_window.refused_inside(raw, arch, partial_rope.original_positions(raw), "Phi-3")


def describe(raw: dict[str, Any], c) -> Description:
    rope_fields, rope = partial_rope.describe_fields(raw, c.head_dim, rope_theta(raw))
    tensors = tuple((f, s) for f, s in LLAMA_TENSORS)
    return Description(family="phi3", layers=tuple(Layer(rope=rope) for _ in range(c.n_layers)), eps=c.rms_norm_eps,
                       tied_head=c.tie_word_embeddings, lm_head_partition=LM_HEAD_PARTITION, tensors=tensors,
                       fused=FUSED, **rope_fields)


PHI3 = Family("phi3", ("Phi3ForCausalLM",), ("phi3",), describe, _problems, malformed=partial_rope.malformed,
              features=("partial_rope", "fused_projections"))
ADAPTERS = (PHI3,)
