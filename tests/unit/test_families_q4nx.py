"""4-bit for the new families (issue #36): `ledger quantize`'s bundle of the tiny Phi-3 stores its fused qkv_proj /
gate_up_proj split into q/k/v and gate/up (as mlir-air's Phi-4-mini bundle is written, phi4_mini_q4nx_weights.py:9-15
at e972f29), the dequantised reference folder fuses them back in the [q | k | v], [gate | up] row order and loads
in transformers, and the pipeline's host-dequantised weights are those rows."""

from __future__ import annotations

import numpy as np

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.q4nx import read_bundle
from npu_kernels.model.q4nx_bundle import bundle_problem, host_dequantised_weights, write_bundle, write_reference_folder
from npu_kernels.model.weights import fuse, split_fused
from npu_kernels.model.weights import read_checkpoint
from npu_kernels.numerics.bf16 import widened


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
    assert np.array_equal(widened(weights.layers[0].wq).T, qkv[: H * D])  # held as bf16 bits
    assert np.array_equal(widened(weights.layers[0].wv).T, qkv[(H + Hkv) * D :])

    from npu_kernels.model.hf_reference import HfRunner

    assert HfRunner(ref).config_mismatches(load_raw_config(ref)) == []


def test_every_projection_of_every_family_is_quantised_lfm2_conv_and_ffn_included(
        tiny_llama, tiny_qwen3, tiny_phi3, tiny_gemma3, tiny_lfm2, tmp_path):
    # issue 48 item 5: at dd99c44 `quantize` matched Llama's suffixes only, so LFM2's feed_forward.w1/w2/w3,
    # self_attn.out_proj and conv.in_proj/out_proj stayed bf16 (3 of its 17 projections quantised) and said nothing
    from npu_kernels.model.q4nx_bundle import projection_names

    for folder in (tiny_llama, tiny_qwen3, tiny_phi3, tiny_gemma3, tiny_lfm2):
        config = resolve(load_raw_config(folder))
        bundle = tmp_path / f"{folder.name}.q4nx"
        written = write_bundle(folder, bundle, config)
        header = read_bundle(bundle).header
        four_bit = {n for n, h in header.items() if h["dtype"] != "BF16"}
        assert four_bit == set(projection_names(config)), folder.name
        assert written["n_projections"] == written["n_projections_total"] == len(four_bit)
        assert bundle_problem(bundle, config) is None
    lfm2 = resolve(load_raw_config(tiny_lfm2))
    names = set(projection_names(lfm2))
    # layers conv, attention, conv: 2 x (in_proj, out_proj) + q/k/v/out_proj + 3 x (w1, w2, w3)
    assert len(names) == 2 * 2 + 4 + 3 * 3
    assert {"model.layers.0.conv.in_proj.weight", "model.layers.0.conv.out_proj.weight",
            "model.layers.1.self_attn.out_proj.weight", "model.layers.2.feed_forward.w2.weight"} <= names
    assert not any("conv.conv" in n or "norm" in n for n in names)  # the depthwise taps and norms stay bf16


def test_a_bundle_that_left_a_projection_bf16_is_refused_naming_it(tiny_lfm2, tmp_path):
    # a bundle as dd99c44 wrote it for LFM2 (feed_forward.w1 kept BF16) is not read as 4-bit codes
    from npu_kernels.model.q4nx import write_container
    from npu_kernels.model.q4nx_bundle import bf16_bytes, hf_tensors

    config = resolve(load_raw_config(tiny_lfm2))
    bundle = tmp_path / "model.q4nx"
    write_bundle(tiny_lfm2, bundle, config)
    b = read_bundle(bundle)
    name = "model.layers.0.feed_forward.w1.weight"
    tensors = {n: (h["dtype"], list(h["shape"]), bytes(b.raw(n))) for n, h in b.header.items()}
    w1 = hf_tensors(tiny_lfm2, config)[name]
    tensors[name] = ("BF16", list(w1.shape), bf16_bytes(w1))
    older = tmp_path / "older.q4nx"
    write_container(older, tensors, dict(b.metadata))
    problem = bundle_problem(older, config)
    assert problem is not None and name in problem and "stored BF16, not 4-bit" in problem
