"""Families whose missing piece is known: each refused in one line that names it (issue #36, item 5). The
generic checks (mixture of experts, latent attention, encoder-decoder) are npu_kernels.model.architecture's."""

from __future__ import annotations

from typing import Any

MISSING = {
    "Gemma2ForCausalLM": "attention logit soft-capping (attn_logit_softcapping) and the final logit soft-cap "
                         "are not implemented",
    "Gemma4ForCausalLM": "per-layer embeddings and cross-layer KV sharing are not implemented",
    "Gemma4ForConditionalGeneration": "per-layer embeddings and cross-layer KV sharing are not implemented "
                                      "(and its vision / audio towers are not deployed)",
    "LlavaForConditionalGeneration": "a vision tower in front of the decoder is not deployed",
    "Qwen2VLForConditionalGeneration": "a vision tower in front of the decoder is not deployed",
    "MixtralForCausalLM": "its mixture-of-experts MLP is not implemented",
}
MODEL_TYPES = {"gemma2": "Gemma2ForCausalLM", "gemma4": "Gemma4ForConditionalGeneration",
               "gemma4_text": "Gemma4ForCausalLM", "mixtral": "MixtralForCausalLM"}


def reason(arch: str, raw: dict[str, Any]) -> str | None:
    """One sentence naming what `arch` needs that the tool lacks, or None."""
    why = MISSING.get(arch)
    if why is None and (raw.get("vision_config") or raw.get("audio_config")) and not raw.get("text_config"):
        why = "a vision or audio tower without a text decoder config is not deployed"
    return f"{arch}: {why}." if why else None
