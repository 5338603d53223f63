"""Fused projections: a checkpoint that stores several projections as one tensor, their rows concatenated in a
documented order (Phi-3 / Phi-4-mini's `self_attn.qkv_proj` [q | k | v] and `mlp.gate_up_proj` [gate | up]).
Everything the tool knows about them is here:

  description     `Description.fused` (HF suffix -> the LayerWeights fields, in row order); the standard layouts
                  `QKV` and `GATE_UP` for an adapter to name;
  load            npu_kernels.model.weights splits a fused tensor into its fields row block after row block
                  (`_layer_tensors`), checked against the shapes `expected_tensors` lists;
  4-bit bundles   `unfused_tensors` / `split_fused` / `fuse`: a bundle stores the parts under their Llama names
                  (mlir-air's Phi-4-mini bundle is written split, phi4_mini_q4nx_weights.py:9-15 at e972f29);
  drill           `qkv_split_order` (npu_kernels.model.faults: the split as [q | v | k]).

mlir-air e972f29: phi4_mini_q4nx_weights.py:238-247 slices them in this order; README.md:55-60 "Fused source
tensors": the [q,k,v] / [gate,up] row order is confirmed by the 0.997 cosine."""

from __future__ import annotations

import numpy as np

from npu_kernels.model.config import ModelConfig
from npu_kernels.model.description import LLAMA_TENSORS
from npu_kernels.model.features import Feature

QKV = ("self_attn.qkv_proj.weight", ("wq", "wk", "wv"))
GATE_UP = ("mlp.gate_up_proj.weight", ("w_gate", "w_up"))


_LLAMA_SUFFIX = dict(LLAMA_TENSORS)


def unfused_tensors(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """`expected_tensors` with every fused tensor replaced by its parts under their Llama names (q_proj / k_proj /
    v_proj, gate_proj / up_proj), in block order: what a 4-bit bundle of the family stores (mlir-air's Phi-4-mini
    bundle is written split, phi4_mini_q4nx_weights.py:9-15 at e972f29)."""
    # imported here: the weights import the families, which import this module
    from npu_kernels.model.weights import expected_tensors, hf_rows

    prefix, fused = config.arch.prefix, dict(config.arch.fused)
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in expected_tensors(config).items():
        rest = name[len(prefix):].split(".", 2) if name.startswith(f"{prefix}layers.") else None
        parts = fused.get(rest[2]) if rest else None
        if not parts:
            out[name] = shape
            continue
        layer = rest[1]
        for p in parts:
            out[f"{prefix}layers.{layer}.{_LLAMA_SUFFIX[p]}"] = (hf_rows(config, p), shape[1])
    return out


def split_fused(tensors: dict[str, np.ndarray], config: ModelConfig) -> dict[str, np.ndarray]:
    """HF-named tensors (fused as the checkpoint stores them) -> the unfused names of `unfused_tensors`."""
    out, by_part = {}, _fused_parts(config)
    for name in unfused_tensors(config):
        if name in tensors:
            out[name] = tensors[name]
            continue
        fused_name, start, rows = by_part[name]
        out[name] = tensors[fused_name][start : start + rows]
    return out


def fuse(tensors: dict[str, np.ndarray], config: ModelConfig) -> dict[str, np.ndarray]:
    """Unfused tensors (`unfused_tensors` names; any subset) -> HF names as the family's checkpoints store them:
    each fused tensor whose parts are all present is their rows concatenated in the family's order."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for part, (fused_name, start, _) in _fused_parts(config).items():
        groups.setdefault(fused_name, []).append((start, part))
    out = {name: a for name, a in tensors.items() if not any(name == p for g in groups.values() for _, p in g)}
    for fused_name, parts in groups.items():
        if all(p in tensors for _, p in parts):
            out[fused_name] = np.concatenate([tensors[p] for _, p in sorted(parts)], axis=0)
    return out


def _fused_parts(config: ModelConfig) -> dict[str, tuple[str, int, int]]:
    """unfused name -> (fused HF name, first row, rows)."""
    from npu_kernels.model.weights import hf_rows

    prefix, out = config.arch.prefix, {}
    for i in range(config.n_layers):
        for suffix, parts in config.arch.fused:
            start = 0
            for p in parts:
                rows = hf_rows(config, p)
                out[f"{prefix}layers.{i}.{_LLAMA_SUFFIX[p]}"] = (f"{prefix}layers.{i}.{suffix}", start, rows)
                start += rows
    return out


FEATURE = Feature("fused_projections", (), present=lambda arch: bool(arch.fused),
                  faults={"qkv_split_order": "the fused qkv_proj is split as [q | v | k] instead of the [q | k | v] "
                                             "rows it holds"})
