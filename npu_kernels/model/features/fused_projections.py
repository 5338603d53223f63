"""Fused projections: a checkpoint that stores several projections as one tensor, their rows concatenated in a
documented order (Phi-3 / Phi-4-mini's `self_attn.qkv_proj` [q | k | v] and `mlp.gate_up_proj` [gate | up]).
Everything the tool knows about them is here:

  description     `Description.fused` (HF suffix -> the LayerWeights fields, in row order); the standard layouts
                  `QKV` and `GATE_UP` for an adapter to name;
  load            npu_kernels.model.weights splits a fused tensor into its fields row block after row block
                  (`_layer_tensors`), checked against the shapes `expected_tensors` lists;
  4-bit bundles   npu_kernels.model.weights `unfused_tensors` / `split_fused` / `fuse`: a bundle stores the parts
                  under their Llama names (mlir-air's Phi-4-mini bundle is written split,
                  phi4_mini_q4nx_weights.py:9-15 at e972f29); they read the weights' shapes, and the weights
                  read the description this registry serves, so they live beside the shapes (no import cycle);
  drill           `qkv_split_order` (npu_kernels.model.faults: the split as [q | v | k]).

mlir-air e972f29: phi4_mini_q4nx_weights.py:238-247 slices them in this order; README.md:55-60 "Fused source
tensors": the [q,k,v] / [gate,up] row order is confirmed by the 0.997 cosine."""

from __future__ import annotations

from npu_kernels.model.features import Feature

QKV = ("self_attn.qkv_proj.weight", ("wq", "wk", "wv"))
GATE_UP = ("mlp.gate_up_proj.weight", ("w_gate", "w_up"))


FEATURE = Feature("fused_projections", (), present=lambda arch: bool(arch.fused),
                  faults={"qkv_split_order": "the fused qkv_proj is split as [q | v | k] instead of the [q | k | v] "
                                             "rows it holds"})
