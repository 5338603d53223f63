"""Qwen2 / Qwen2.5 (QKV bias, fused into the attention-input ELF) and Qwen3 (per-head QK-norm), the Llama form
otherwise (llms/README.md at mlir-air e972f29, "Attention norm/bias")."""

from __future__ import annotations

from typing import Any

from npu_kernels.model.families.common import Family, swiglu_problems
from npu_kernels.model.features import sliding_window
from npu_kernels.model.families.llama import describe_llama_form, rope_problems


def _problems(raw: dict[str, Any], arch: str) -> list[str]:
    refused = sliding_window.refused_when_enabled(raw, arch)
    if refused:
        return refused
    return swiglu_problems(raw, arch, biased_attention_ok=arch == "Qwen2ForCausalLM") + rope_problems(raw, arch)


QWEN2 = Family("qwen2", ("Qwen2ForCausalLM",), ("qwen2",),
               lambda raw, c: describe_llama_form(raw, c, "qwen2", qkv_bias=True), _problems, qkv_bias=True)
QWEN3 = Family("qwen3", ("Qwen3ForCausalLM",), ("qwen3",),
               lambda raw, c: describe_llama_form(raw, c, "qwen3", qk_norm=True), _problems, features=("qk_norm",))
ADAPTERS = (QWEN2, QWEN3)
