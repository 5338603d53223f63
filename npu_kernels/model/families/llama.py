"""Llama (SmolLM2, Llama-3.x) and Mistral: the form every other family is described against - pre-norm RMSNorm,
SwiGLU, full causal GQA attention, half-split RoPE over the whole head (llms/README.md at mlir-air e972f29:
"All are decoder-only with RMSNorm + SwiGLU FFN + RoPE")."""

from __future__ import annotations

from typing import Any

from npu_kernels.model.description import LLAMA_TENSORS, Description, Layer, rope_of
from npu_kernels.model.families.common import Family, rope_scaling, rope_theta, rope_type, swiglu_problems
from npu_kernels.model.features import sliding_window

ROPE_TYPES = {"default", "linear", "llama3"}  # the scalings whose host cos/sin LUT the pipeline builds


def rope_problems(raw: dict[str, Any], arch: str, supported=ROPE_TYPES) -> list[str]:
    rtype = rope_type(raw)
    if rtype not in supported:
        return [f"{arch} uses RoPE scaling '{rtype}'; supported: {', '.join(sorted(supported))}."]
    return []


def describe_llama_form(raw: dict[str, Any], c, family: str, **kw) -> Description:
    rope = rope_of(rope_theta(raw), rope_scaling(raw))
    return Description(family=family, layers=tuple(Layer(rope=rope) for _ in range(c.n_layers)),
                       eps=c.rms_norm_eps, tied_head=c.tie_word_embeddings, tensors=LLAMA_TENSORS, **kw)


def _llama_problems(raw: dict[str, Any], arch: str) -> list[str]:
    return swiglu_problems(raw, arch) + rope_problems(raw, arch)


def _mistral_problems(raw: dict[str, Any], arch: str) -> list[str]:
    return sliding_window.refused_when_set(raw, arch) or _llama_problems(raw, arch)


LLAMA = Family("llama", ("LlamaForCausalLM",), ("llama",), lambda raw, c: describe_llama_form(raw, c, "llama"),
               _llama_problems)
MISTRAL = Family("mistral", ("MistralForCausalLM",), ("mistral",),
                 lambda raw, c: describe_llama_form(raw, c, "mistral"), _mistral_problems)
ADAPTERS = (LLAMA, MISTRAL)
