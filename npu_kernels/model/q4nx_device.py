"""The weights the on-device 4-bit decode streams (the llama32_1b_q4nx style): the bundle re-quantised.

mlir-air's on-device 4-bit deployment does not stream the bundle's codes as stored. llama32_1b_q4nx/
q4nx_requant.py `build_requant_cache`@137ff7c dequantises every projection of the bundle in float32
(`Q4nxModel.dequant`, unrounded) and re-quantises it per 32-column group with min/max codes (`_requant_q4k`, :25-34):
  mn = the group's min, sc = (max - mn) / 15 in float32 (1.0 for a constant group),
  q  = clip(round((w - mn) / sc), 0, 15)        numpy's round: to nearest, ties to even
and the tied LM head is the bf16 `embed_tokens` re-quantised the same way (the bundle's own lm_head is ignored;
the vocabulary padding rows are zero and discarded, so they are not built here). An untied head (no mlir-air 4-bit
model has one; npu_kernels.model.q4nx_bundle keeps it bf16 in the bundle) is re-quantised from that bf16 tensor.
The packer stores scale and min as bf16 (proj_qmm_pack.py `pack_q4k_block`:33-38@0d63308: `bfloat16(scale[r, g])`,
nearest even), so the decode's weight is w' = q * bf16(sc) + bf16(mn), an additive min whatever the bundle's layout.

`decode_weights(bundle_path, config) -> DecodeWeights`: per layer the seven projections as (codes, scale, min) in
the pipeline's names, plus the LM head; the in-process pipeline's decode runs `gemv_q4nx` on them
(`npu_kernels.model.pipeline_q4`). `decode_tensors(weights)` are the same weights as HF-named bf16 tensors
(w' in float32, one RNE to bf16; `lm_head.weight` untied): the decode half of the device style's reference,
written as `decode.requant` beside the dequantised model (`npu_kernels.model.hf_reference` prefills with the
dequantised bundle and decodes with these, as the deployment does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from npu_kernels.model.config import ModelConfig
from npu_kernels.model.q4nx import GROUP, dequantise_fp32, read_bundle, to_bf16
from npu_kernels.model.features.fused_projections import fuse, unfused_tensors

# a safetensors container, named so that neither transformers nor the weights check (`*.safetensors`) reads it as
# part of the dequantised model; npu_kernels.model.digest hashes it with the weight files
DECODE_FILE = "decode.requant"
STYLES = ("host", "device")  # q4nx deployment styles: dequantised at load / on-device 4-bit decode
# pipeline name -> HF projection (the decode GEMVs); fused steps concatenate rows in this order
PROJECTION_OF = {"wq": "self_attn.q_proj", "wk": "self_attn.k_proj", "wv": "self_attn.v_proj",
                 "wo": "self_attn.o_proj", "w_gate": "mlp.gate_proj", "w_up": "mlp.up_proj",
                 "w_down": "mlp.down_proj"}
FUSED = {"wqkv": ("wq", "wk", "wv"), "w_gate_up": ("w_gate", "w_up")}

Codes = tuple[np.ndarray, np.ndarray, np.ndarray]  # codes (M, K) float32 0..15, scale and min (M, K/32) bf16 values


def requantise(w: np.ndarray) -> Codes:
    """`_requant_q4k`'s per-group min/max codes of a float32 (M, K) matrix, scale and min stored as bf16."""
    w = np.asarray(w, np.float32)
    M, K = w.shape
    if K % GROUP:
        raise ValueError(f"re-quantisation needs K a multiple of {GROUP}, got {M}x{K}")
    g = w.reshape(M, K // GROUP, GROUP)
    mn, mx = g.min(axis=2), g.max(axis=2)
    sc = ((mx - mn) / np.float32(15.0)).astype(np.float32)
    sc = np.where(sc <= 0, np.float32(1.0), sc).astype(np.float32)
    q = np.clip(np.round((g - mn[..., None]) / sc[..., None]), 0, 15).astype(np.float32)
    return q.reshape(M, K), to_bf16(sc), to_bf16(mn)


def requantised_fp32(codes: Codes) -> np.ndarray:
    """w' = q * scale + min in float32 (the product is exact; one rounding for the add)."""
    q, s, m = codes
    return q * np.repeat(s, GROUP, axis=1) + np.repeat(m, GROUP, axis=1)


@dataclass
class DecodeWeights:
    """The decode's 4-bit weights: `layers[i][name]` for the pipeline's projection names, and the LM head."""

    layers: list[dict[str, Codes]]
    lm_head: Codes
    _fused: dict[tuple[int, str], Codes] = field(default_factory=dict, repr=False)

    def rows(self, layer: int, name: str) -> Codes:
        """(codes, scale, min) of a decode GEMV: one projection, or a fused step's rows concatenated."""
        if name not in FUSED:
            return self.layers[layer][name]
        key = (layer, name)
        if key not in self._fused:
            parts = [self.layers[layer][p] for p in FUSED[name]]
            self._fused[key] = tuple(np.concatenate([p[i] for p in parts], axis=0) for i in range(3))
        return self._fused[key]


def decode_weights(bundle_path: str | Path, config: ModelConfig) -> DecodeWeights:
    """The bundle re-quantised as the on-device decode streams it (module docstring)."""
    bundle = read_bundle(bundle_path)
    layout, shapes, prefix = bundle.layout(), unfused_tensors(config), config.arch.prefix
    layers = []
    for i in range(config.n_layers):
        layer = {}
        for name, proj in PROJECTION_OF.items():
            hf = f"{prefix}layers.{i}.{proj}.weight"
            layer[name] = requantise(dequantise_fp32(*bundle.projection(hf, *shapes[hf]), layout))
        layers.append(layer)
    head = f"{prefix}embed_tokens.weight" if config.tie_word_embeddings else "lm_head.weight"
    return DecodeWeights(layers, requantise(bundle.bf16(head)))


def decode_tensors(weights: DecodeWeights, config: ModelConfig | None = None) -> dict[str, np.ndarray]:
    """The decode's weights as HF-named (out, in) bf16 tensors (float32 arrays of bf16 values); with `config`, under
    the names the family's checkpoints use (its prefix, fused tensors concatenated)."""
    out, prefix = {}, config.arch.prefix if config is not None else "model."
    for i, layer in enumerate(weights.layers):
        for name, proj in PROJECTION_OF.items():
            out[f"{prefix}layers.{i}.{proj}.weight"] = to_bf16(requantised_fp32(layer[name]))
    out["lm_head.weight"] = to_bf16(requantised_fp32(weights.lm_head))
    return fuse(out, config) if config is not None else out

