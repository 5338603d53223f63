"""The whole-model Runner protocol and the records it returns (mirrors mlir-air's `llms/verify/runners`).

A runner owns its KV cache: `prefill(tokens)` resets and fills it, `decode_step(token, pos)` appends one
position. Both the NPU pipeline (`kernels.model.pipeline.NpuPipeline`) and the HF reference
(`kernels.model.hf_reference.HfRunner`) implement it, so the gates in `kernels.model.compare` compare them blindly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class PrefillRecord:
    """What one prefill produced, real prompt positions only.

    layer_intermediates: one dict per layer; `"ffn_out"` is the block output (seq, E) float32.
    final_hidden_normed: the final RMSNorm output (seq, E), the LM head's input.
    logits_at_pred: (V,) logits for the next token after the last prompt position.
    top1_token: np.argmax(logits_at_pred) (ties toward the smaller id).
    """

    layer_intermediates: list[dict[str, np.ndarray]]
    final_hidden_normed: np.ndarray
    logits_at_pred: np.ndarray
    top1_token: int


@dataclass
class DecodeStepRecord:
    lm_head_logits: np.ndarray  # (V,)
    top1_token: int


class Runner(Protocol):
    """One LLM execution backend (emulated/torch/NPU pipeline, HF reference)."""

    name: str

    def prefill(self, prompt_tokens: np.ndarray) -> PrefillRecord:
        """Run the prompt (1-D int array) from an empty KV cache."""
        ...

    def decode_step(self, input_token: int, current_pos: int) -> DecodeStepRecord:
        """Feed `input_token` at position `current_pos` (= number of cached positions)."""
        ...
