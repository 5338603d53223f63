"""4-bit for the new families (issue #36): `ledger quantize`'s bundle of the tiny Phi-3 stores its fused qkv_proj /
gate_up_proj split into q/k/v and gate/up (as mlir-air's Phi-4-mini bundle is written, phi4_mini_q4nx_weights.py:9-15
at e972f29), the dequantised reference folder fuses them back in the [q | k | v], [gate | up] row order and loads
in transformers, and the pipeline's host-dequantised weights are those rows."""

from __future__ import annotations

import numpy as np

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.q4nx import read_bundle
from npu_kernels.model.q4nx_bundle import bundle_problem, host_dequantised_weights, write_bundle, write_reference_folder
from npu_kernels.model.weights import fuse, read_checkpoint, split_fused


def test_split_then_fuse_gives_back_the_phi3_checkpoint_bit_for_bit(tiny_phi3):
    config = resolve(load_raw_config(tiny_phi3))
    stored = read_checkpoint(tiny_phi3, config)
    parts = split_fused(stored, config)
    assert "model.layers.0.self_attn.q_proj.weight" in parts and "model.layers.0.self_attn.qkv_proj.weight" not in parts
    back = fuse(parts, config)
    assert set(back) == set(stored) and all(np.array_equal(back[n], stored[n]) for n in stored)


def test_a_phi3_bundle_stores_split_projections_and_its_reference_folder_loads(tiny_phi3, tmp_path):
    config = resolve(load_raw_config(tiny_phi3))
    bundle = tmp_path / "model.q4nx"
    write_bundle(tiny_phi3, bundle, config)
    names = set(read_bundle(bundle).names)
    assert {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.up_proj.weight"} <= names
    assert not any("qkv_proj" in n or "gate_up_proj" in n for n in names)
    assert bundle_problem(bundle, config) is None
    ref = tmp_path / "ref"
    write_reference_folder(bundle, tiny_phi3, ref, config)
    dq = read_checkpoint(ref, config)  # fused again, as Phi3ForCausalLM loads it
    qkv = dq["model.layers.0.self_attn.qkv_proj.weight"]
    H, Hkv, D = config.n_heads, config.n_kv_heads, config.head_dim
    weights = host_dequantised_weights(ref, config)
    assert np.array_equal(weights.layers[0].wq.T, qkv[: H * D])
    assert np.array_equal(weights.layers[0].wv.T, qkv[(H + Hkv) * D :])

    from npu_kernels.model.hf_reference import HfRunner

    assert HfRunner(ref).config_mismatches(load_raw_config(ref)) == []
