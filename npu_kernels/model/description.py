"""The architecture description: the one place a model family differs (issue #36).

A `Description` says, from a config.json, everything the rest of the tool needs to know about a decoder-only
family beyond its sizes: per layer the mixer (full causal attention, or sliding with its window) and the RoPE it
rotates with (theta and scaling), the attention details (QKV bias, per-head QK-norm, the rotary width of a
partial rotary, the softmax scale), the MLP (SwiGLU or the GELU-tanh GLU), the norms (pre-norm, or Gemma's
sandwich of four; the `1+w` weight fold; eps), the embedding scale, the tied head, the LM-head partition rows,
and the weight-name map (HF suffix per tensor, and the fused tensors split at load in a documented row order).

The small adapters of `npu_kernels.model.families` build it from config.json, one module per family; nothing else
branches on a family or architecture name (tests/unit/test_families.py checks it). The pipeline, the weights
loader, the HF reference wiring, the plan, the performance model and the scaffold read it.

A `ModelConfig` recorded before the description existed (its `ConfigResolved` has no `description`) reads back
as `legacy(config)`: the Llama form with its own QKV-bias / QK-norm flags, which is what such a config meant.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

SWIGLU, GELU_TANH_GLU = "swiglu", "gelu_tanh_glu"
PRE_NORM, SANDWICH = "pre", "sandwich"
FULL, SLIDING = "full", "sliding"
CONV = "conv"  # a gated short convolution (LFM2's Lfm2ShortConv): no attention, a carried convolution state

# the per-layer tensors of the Llama form: LayerWeights field -> HF name suffix, in block order
LLAMA_TENSORS = (
    ("attn_norm", "input_layernorm.weight"),
    ("wq", "self_attn.q_proj.weight"),
    ("wk", "self_attn.k_proj.weight"),
    ("wv", "self_attn.v_proj.weight"),
    ("bq", "self_attn.q_proj.bias"),
    ("bk", "self_attn.k_proj.bias"),
    ("bv", "self_attn.v_proj.bias"),
    ("q_norm", "self_attn.q_norm.weight"),
    ("k_norm", "self_attn.k_norm.weight"),
    ("wo", "self_attn.o_proj.weight"),
    ("ffn_norm", "post_attention_layernorm.weight"),
    ("w_gate", "mlp.gate_proj.weight"),
    ("w_up", "mlp.up_proj.weight"),
    ("w_down", "mlp.down_proj.weight"),
)
BIAS_FIELDS = ("bq", "bk", "bv")
QK_NORM_FIELDS = ("q_norm", "k_norm")
ATTENTION_FIELDS = ("wq", "wk", "wv", "wo", *BIAS_FIELDS, *QK_NORM_FIELDS)
CONV_FIELDS = ("conv_in", "conv_w", "conv_out")  # in_proj (B | C | x), the depthwise taps, out_proj


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


@dataclass(frozen=True)
class Rope:
    """One layer's RoPE: theta and the scaling transformers applies (rope_type and its parameters, frozen as
    sorted (key, value) pairs; () is plain RoPE)."""

    theta: float = 10000.0
    scaling: tuple = ()

    def scaling_dict(self) -> dict[str, Any] | None:
        if not self.scaling:
            return None
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.scaling}


@dataclass(frozen=True)
class Layer:
    """One decoder layer's mixer: attention, full causal or sliding with `window` positions (a query attends to
    itself and the window-1 positions before it, as transformers' sliding mask does), or a gated short
    convolution (CONV: no attention, no KV cache, a carried convolution state)."""

    mixer: str = FULL
    window: int | None = None
    rope: Rope = field(default_factory=Rope)


@dataclass(frozen=True)
class Description:
    family: str  # the adapter that built it (npu_kernels.model.families)
    layers: tuple[Layer, ...]
    qkv_bias: bool = False
    qk_norm: bool = False
    rotary_dim: int = 0  # the leading head dims RoPE rotates (the tail passes through); 0: the whole head
    attn_scale: float | None = None  # softmax scale; None: 1/sqrt(head_dim)
    mlp: str = SWIGLU
    norms: str = PRE_NORM
    norm_offset: float = 0.0  # 1.0: the norm weights are stored as w and applied as 1+w (folded at load)
    eps: float = 1e-5
    embed_scale: float | None = None  # the embedding gather's scale (bf16-rounded as HF rounds it); None: 1
    tied_head: bool = False
    lm_head_partition: int | None = None  # rows per LM-head GEMV partition the family's mlir-air code runs
    tensors: tuple[tuple[str, str], ...] = LLAMA_TENSORS  # LayerWeights field -> HF suffix (present ones)
    fused: tuple[tuple[str, tuple[str, ...]], ...] = ()  # HF suffix -> fields, split at load in this row order
    prefix: str = "model."  # where the decoder's tensors sit ("model.language_model." in a multimodal folder)
    rope_max_positions: int | None = None  # positions the RoPE tables are valid for (LongRoPE's short factors)
    notes: tuple[str, ...] = ()  # said at init (e.g. "deploys the text decoder; the vision tower is not")
    conv_taps: int = 0  # a CONV layer's causal depthwise taps (LFM2's conv_L_cache); its state holds taps - 1 rows
    final_norm: str = "norm.weight"  # the final RMSNorm's tensor under `prefix` (LFM2: embedding_norm.weight)

    # --- reading it ----------------------------------------------------------------------------------

    def rotary(self, head_dim: int) -> int:
        return self.rotary_dim or head_dim

    def windowed(self) -> bool:
        return any(layer.window for layer in self.layers)

    def layer_tensors(self, layer: int | None = None) -> tuple[tuple[str, str], ...]:
        """The per-layer tensors this family's checkpoints hold, unfused, in block order; for `layer`, only its
        mixer's (a CONV layer has no attention tensors, an attention layer no convolution ones)."""
        skip = set() if self.qkv_bias else set(BIAS_FIELDS)
        skip |= set() if self.qk_norm else set(QK_NORM_FIELDS)
        if layer is not None:
            skip |= set(ATTENTION_FIELDS) if self.layers[layer].mixer == CONV else set(CONV_FIELDS)
        return tuple((f, s) for f, s in self.tensors if f not in skip)

    def conv_layers(self) -> tuple[int, ...]:
        return tuple(i for i, x in enumerate(self.layers) if x.mixer == CONV)

    def is_conv(self, layer: int) -> bool:
        return self.layers[layer].mixer == CONV

    def block_layers(self) -> tuple[int, ...]:
        """The layers Phase 2's block gate judges, layer 0 last: (0,), or for a hybrid also the first layer of the
        other mixer kind (LFM2-1.2B: 2, the first attention layer, then 0, a short convolution)."""
        other = next((i for i in range(len(self.layers)) if self.is_conv(i) != self.is_conv(0)), None)
        return (0,) if other is None else (other, 0)

    # --- recording it ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-shaped (lists, not tuples): what `ConfigResolved.description` records."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Description":
        layers = tuple(Layer(mixer=x.get("mixer", FULL), window=x.get("window"),
                             rope=Rope(float(x["rope"]["theta"]), _frozen({k: v for k, v in x["rope"]["scaling"]})
                                       if x["rope"].get("scaling") else ()))
                       for x in d["layers"])
        kw = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "layers"}
        kw["tensors"] = tuple((str(a), str(b)) for a, b in kw.get("tensors", LLAMA_TENSORS))
        kw["fused"] = tuple((str(a), tuple(b)) for a, b in kw.get("fused", ()))
        kw["notes"] = tuple(kw.get("notes", ()))
        return cls(layers=layers, **kw)


def rope_of(theta: float, scaling: dict[str, Any] | None) -> Rope:
    return Rope(float(theta), _frozen(scaling) if scaling else ())


def legacy(config, scaling: dict[str, Any] | None = None) -> Description:
    """What a config without a description meant: the Llama form with its own flags, every layer full causal
    attention at its rope_theta (`scaling`: the folder's RoPE scaling, which such a config did not record)."""
    rope = rope_of(config.rope_theta, scaling)
    return Description(family="llama", layers=tuple(Layer(rope=rope) for _ in range(config.n_layers)),
                       qkv_bias=config.qkv_bias, qk_norm=config.qk_norm, eps=config.rms_norm_eps,
                       tied_head=config.tie_word_embeddings)


def beyond_legacy(description: Description, config) -> dict[str, Any]:
    """The description's fields that the Llama form of `config` does not already say (the model digest hashes
    these, so an existing family's digest is what it was before the description; RoPE scaling and the
    activation are hashed on their own)."""
    base = legacy(config).to_dict()
    ours = replace(description, family="llama",
                   layers=tuple(replace(x, rope=replace(x.rope, scaling=())) for x in description.layers)).to_dict()
    return {k: v for k, v in ours.items() if base.get(k) != v}


def softmax_scale(description: Description, head_dim: int) -> float:
    return description.attn_scale if description.attn_scale is not None else 1.0 / math.sqrt(head_dim)
