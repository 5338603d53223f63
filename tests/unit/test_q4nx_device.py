"""The on-device 4-bit decode's re-quantisation (npu_kernels.model.q4nx_device), on groups whose codes are chosen by
hand: q4nx_requant.py's `_requant_q4k` (min/max codes from float32 scale and min, numpy's round) and
proj_qmm_pack.py's bf16 storage of scale and min."""

from __future__ import annotations

import numpy as np

from npu_kernels.model.q4nx import to_bf16
from npu_kernels.model.q4nx_device import DecodeWeights, decode_tensors, requantise, requantised_fp32


def test_a_group_on_an_exact_16_level_grid_requantises_to_its_own_codes():
    s, m = np.float32(0.0625), np.float32(-0.5)  # both bf16-exact
    q = np.array(list(range(16)) + list(range(15, -1, -1)), np.float32)[None, :]
    codes, scale, mn = requantise(m + q * s)
    assert np.array_equal(codes, q) and scale.tolist() == [[0.0625]] and mn.tolist() == [[-0.5]]
    assert np.array_equal(requantised_fp32((codes, scale, mn)), m + q * s)


def test_a_constant_group_gets_scale_one_its_value_as_min_and_zero_codes():
    w = np.full((1, 32), 0.3, np.float32)
    codes, scale, mn = requantise(w)
    assert scale.tolist() == [[1.0]] and mn[0, 0] == to_bf16(np.float32(0.3)) and not codes.any()


def test_halfway_codes_round_to_even_and_scale_and_min_are_stored_as_bf16():
    units = np.zeros(32, np.float32)
    units[1], units[2], units[3] = 15.0, 2.5, 3.5  # min 0, max 15: scale 1 exactly
    codes, _, _ = requantise(units[None, :])
    assert codes[0, :4].tolist() == [0.0, 15.0, 2.0, 4.0]  # 2.5 -> 2, 3.5 -> 4 (numpy's round, as the requant's)
    w = np.linspace(0.0, 1.0, 32, dtype=np.float32)[None, :]  # (max - min) / 15 = 1/15: not a bf16 value
    _, scale, mn = requantise(w)
    assert scale[0, 0] == to_bf16(np.float32(1.0) / np.float32(15.0)) and scale[0, 0] != np.float32(1.0) / np.float32(15.0)
    assert mn[0, 0] == 0.0


def test_fused_steps_stream_their_projections_rows_concatenated_and_the_reference_holds_the_same_weights():
    rng = np.random.default_rng(0)
    layer = {name: requantise(rng.standard_normal((32 * (i + 1), 64)).astype(np.float32))
             for i, name in enumerate(("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"))}
    weights = DecodeWeights([layer], requantise(rng.standard_normal((40, 64)).astype(np.float32)))
    codes, scale, mn = weights.rows(0, "wqkv")
    assert codes.shape == (32 * 6, 64) and np.array_equal(codes[32:96], layer["wk"][0])
    assert np.array_equal(scale[96:], layer["wv"][1]) and np.array_equal(weights.rows(0, "w_gate_up")[2][160:], layer["w_up"][2])
    tensors = decode_tensors(weights)
    assert np.array_equal(tensors["model.layers.0.self_attn.k_proj.weight"], to_bf16(requantised_fp32(layer["wk"])))
    assert tensors["lm_head.weight"].shape == (40, 64)
