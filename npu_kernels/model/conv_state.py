"""The decode check of a hybrid model's carried convolution state (LFM2): after a prefill, each short-convolution
layer's state against the HF reference's conv cache (cosine and max error), then one decode step's next-token
logits against the reference's, as mlir-air's lfm2 decode gate scores "logits and the read-back ShortConv state
per layer" (programming_examples/llms/lfm2_1_2b_q4nx/README.md at 78aadcff, "Reading the decode gate"; its
`lfm2_1_2b_q4nx_decode_gate.py`). The state is the pad the next token's convolution consumes, so a state that is
not carried or is taken from the wrong rows shows here before any token does.

`carried_state_check(pipeline, reference, tokens)` returns a `ConvStateCheck`; both runners implement the Runner
protocol, the pipeline `conv_state(layer)` (npu_kernels.model.shortconv), the reference `conv_state(layer)`
(npu_kernels.model.hf_reference.HfRunner). Thresholds: npu_kernels.thresholds.CONV_STATE_THRESHOLDS.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from npu_kernels.model.compare import cosine
from npu_kernels.thresholds import CONV_STATE_THRESHOLDS


@dataclass
class ConvStateCheck:
    layers: list[dict[str, Any]] = field(default_factory=list)  # [{layer, cosine, max_abs}]
    logits_cosine: float = float("nan")
    top1_agrees: bool = False
    thresholds: dict[str, float] = field(default_factory=lambda: dict(CONV_STATE_THRESHOLDS))
    passed: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def carried_state_check(pipeline, reference, tokens) -> ConvStateCheck:
    """Prefill both on `tokens`, compare every conv layer's carried state, then one decode step's logits (both fed
    the reference's predicted token at the next position)."""
    conv_layers = pipeline.config.arch.conv_layers()
    pre_ref = reference.prefill(tokens)
    pipeline.prefill(tokens)
    out = ConvStateCheck()
    ok = True
    for layer in conv_layers:
        ours, ref = pipeline.conv_state(layer), reference.conv_state(layer)
        cos = cosine(ours, ref)
        err = float(np.max(np.abs(np.asarray(ours, np.float64) - ref)))
        out.layers.append({"layer": layer, "cosine": cos, "max_abs": err})
        ok &= cos >= out.thresholds["state_cosine"]
    n = len(tokens)
    ours_step = pipeline.decode_step(pre_ref.top1_token, n).lm_head_logits
    ref_step = reference.decode_step(pre_ref.top1_token, n).lm_head_logits
    out.logits_cosine = cosine(ours_step, ref_step)
    out.top1_agrees = int(np.argmax(ours_step)) == int(np.argmax(ref_step))
    out.passed = bool(ok and out.logits_cosine >= out.thresholds["logits_cosine"])
    return out
