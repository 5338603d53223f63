"""The model features: one module per feature a decoder family may bring (issue 47 item 2), each declaring
everything about it in one place - the config.json keys it reads and validates, the refusal a family that does not
describe it gives, what it adds to the architecture description, its reference behaviour in the pipeline, its plan
rows and performance-model label, and the drills (test faults) that break it.

  sliding_window  a per-layer attention window (Gemma3's local layers; refused by Mistral / Qwen2 / Phi-3)
  qk_norm         per-head RMSNorm of q and k before RoPE (Qwen3, Gemma3, LFM2's attention layers)
  partial_rope    a partial rotary and LongRoPE's short factors (Phi-3 / Phi-4-mini)
  fused_projections  qkv_proj / gate_up_proj stored as one tensor each, split in a documented row order (Phi-3)
  short_conv      the gated short convolution with its carried state (LFM2's CONV mixer)

A family adapter (npu_kernels.model.families) names the features it describes in `Family.features`; the generic
rooms (architecture, plan, pipeline, perf) ask the feature modules, never a family name. A family that only
combines existing features is its adapter alone:

Adding a family
  1. one module npu_kernels/model/families/<family>.py: its `Family` record(s) in `ADAPTERS` (found by
     npu_kernels.model.families, nothing to register), with `architectures`, `model_types`, `features` (the names
     of this registry it combines), `describe` (config.json -> Description: the Llama form via
     `describe_llama_form`, the layers from the features' readers, e.g. `sliding_window.layer_kinds`), `problems`
     (one sentence per unsupported value: the features' `problems` / `refused_*`), `malformed` (the features'
     `malformed` plus the family's own keys) and, where the family names its sizes differently, `sizes`;
  2. its HF tensor names in the description's `tensors` (and `fused`, with fused_projections' layouts), its
     mlir-air model directory cited (file:line@commit) in the module docstring;
  3. a config fixture (tests/fixtures/configs/) and its expected features in tests/unit/test_features.py
     `IN_SCOPE`; a tiny model in tests/models.py when the family is to be deployed end to end;
  4. nothing else: no other module may compare a family or architecture name (tests/unit/test_families.py).
A family that brings a new feature adds one module here (its keys, checks, refusal, description fields, reference
step, plan rows, perf hook, drills with their help lines) and registers it in `registry`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Feature:
    name: str
    keys: tuple[str, ...]  # the config.json keys this feature reads (documentation and tests)
    # (raw config.json) -> one sentence per value no model can have, naming the key (refused at init)
    malformed: Callable[[dict[str, Any]], list[str]] | None = None
    # (description) -> whether a described model uses the feature
    present: Callable[[Any], bool] = lambda arch: False
    # the drills that break this feature, name -> one line (npu_kernels.model.options.FAULT_HELP gathers them;
    # npu_kernels.model.faults implements them)
    faults: dict[str, str] = field(default_factory=dict)
    tensors: tuple[str, ...] = field(default=())  # the LayerWeights fields the feature adds


def registry() -> dict[str, Feature]:
    """Every feature by name (imported lazily: the feature modules import the description)."""
    from npu_kernels.model.features import fused_projections, partial_rope, qk_norm, short_conv, sliding_window

    return {f.name: f for f in (sliding_window.FEATURE, qk_norm.FEATURE, partial_rope.FEATURE,
                                fused_projections.FEATURE, short_conv.FEATURE)}


def used_by(arch) -> tuple[str, ...]:
    """The features a described model uses, by name."""
    return tuple(name for name, f in registry().items() if f.present(arch))
