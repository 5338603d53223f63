"""The whole-model Runner protocol and the records it returns (mirrors mlir-air's `llms/verify/runners`).

A runner owns its KV cache: `prefill(tokens)` resets and fills it, `decode_step(token, pos)` appends one
position. Both the NPU pipeline (`npu_kernels.model.pipeline.NpuPipeline`) and the HF reference
(`npu_kernels.model.hf_reference.HfRunner`) implement it, so the gates in `npu_kernels.model.compare` compare them blindly.
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


class ReplayRunner:
    """Wraps a runner and replays its answers: the first time a prompt is walked, the inner runner is
    called; later walks of the same prompt with the same calls read the recorded logits.

    The token gate feeds the reference only its own greedy tokens, so its calls for a prompt are the same
    whatever the other side does: a matrix of pipelines (faults, executors) against one reference walks
    each reference prompt once. A call that departs from the recorded walk raises, and so does a walk that
    goes past its recording once the inner runner has moved on to another prompt."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "replay")
        self._walks: dict[tuple[int, ...], list[tuple[int | None, int | None, np.ndarray]]] = {}
        self._key: tuple[int, ...] | None = None
        self._step = 0
        self._inner_at: tuple[tuple[int, ...], int] | None = None  # (prompt, step) the inner cache holds

    def prefill(self, prompt_tokens) -> PrefillRecord:
        key = tuple(int(t) for t in np.asarray(prompt_tokens).reshape(-1))
        if key not in self._walks:
            self._walks[key] = [(None, None, self.inner.prefill(prompt_tokens).logits_at_pred)]
            self._inner_at = (key, 0)
        self._key, self._step = key, 0
        logits = self._walks[key][0][2]
        return PrefillRecord(layer_intermediates=[], final_hidden_normed=np.zeros((0,), np.float32),
                             logits_at_pred=logits, top1_token=int(np.argmax(logits)))

    def decode_step(self, input_token: int, current_pos: int) -> DecodeStepRecord:
        if self._key is None:
            raise RuntimeError("decode_step called before prefill")
        walk, call = self._walks[self._key], (int(input_token), int(current_pos))
        self._step += 1
        if self._step == len(walk):
            if self._inner_at != (self._key, self._step - 1):
                raise RuntimeError("the walk goes past its recording after the inner runner moved on")
            walk.append((*call, self.inner.decode_step(input_token, current_pos).lm_head_logits))
            self._inner_at = (self._key, self._step)
        if walk[self._step][:2] != call:
            raise ValueError(f"replay departs from the recorded walk at step {self._step}: {call} vs "
                             f"{walk[self._step][:2]}")
        logits = walk[self._step][2]
        return DecodeStepRecord(lm_head_logits=logits, top1_token=int(np.argmax(logits)))
