"""The Q4NX codec (npu_kernels.model.q4nx) against bundles written byte by byte in this test from the format
description (proj_qmm_pack.py:4-9@0d63308; llama32_1b_q4nx_weights.py:56-64@5b5fc4a; qwen3_0_6b_q4nx_weights.py:
6-16@81d902e), and reader(writer(W)) exact."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest

from npu_kernels.model.q4nx import Q4nxError, dequantise, pack, quantise, read_bundle, unpack, write_container

BF16 = ml_dtypes.bfloat16


def hand_block(q, scale, mn):
    """One 32x256 block, byte by byte: bf16 scale[group][row], bf16 min[group][row], then for row group g,
    column c, pair k the byte (code[g*16+2k+1] << 4) | code[g*16+2k]."""
    out = bytearray()
    for table in (scale, mn):
        for g in range(8):
            for r in range(32):
                out += np.array(table[r][g], np.float32).astype(BF16).tobytes()
    for g in range(2):
        for c in range(256):
            for k in range(8):
                out.append((int(q[g * 16 + 2 * k + 1][c]) << 4) | int(q[g * 16 + 2 * k][c]))
    assert len(out) == 5120
    return bytes(out)


def hand_file(path, name, dtype, shape, data, metadata=None):
    header = {name: {"dtype": dtype, "shape": shape, "data_offsets": [0, len(data)]}}
    if metadata:
        header["__metadata__"] = metadata
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)


def chosen_blocks(rows_blocks, col_blocks):
    """Codes/scales/mins chosen by hand: a code pattern that differs in every row and column, scales and mins
    exact in bf16 and different per row and group."""
    M, K = 32 * rows_blocks, 256 * col_blocks
    q = np.array([[(3 * r + 5 * c + r * c // 7) % 16 for c in range(K)] for r in range(M)], np.uint8)
    scale = np.array([[0.0078125 * (1 + (r + 2 * g) % 5) for g in range(K // 32)] for r in range(M)], np.float32)
    mn = np.array([[-0.0625 + 0.015625 * ((r * 3 + g) % 9) for g in range(K // 32)] for r in range(M)], np.float32)
    return q, scale, mn


def reference_dequant(q, scale, mn, layout):
    M, K = q.shape
    w = np.zeros((M, K), np.float32)
    for r in range(M):
        for c in range(K):
            s, m = float(scale[r][c // 32]), float(mn[r][c // 32])
            w[r, c] = s * (q[r, c] - m) if layout == "llama" else s * q[r, c] + m
    return w.astype(BF16).astype(np.float32)


@pytest.mark.parametrize("layout", ["llama", "qwen3"])
def test_the_reader_dequantises_hand_written_blocks_as_the_format_describes(tmp_path, layout):
    q, scale, mn = chosen_blocks(2, 2)  # a 64x512 matrix: 4 blocks, (row block, column block) order
    data = b"".join(hand_block(q[i * 32:(i + 1) * 32, j * 256:(j + 1) * 256], scale[i * 32:(i + 1) * 32, j * 8:(j + 1) * 8],
                               mn[i * 32:(i + 1) * 32, j * 8:(j + 1) * 8]) for i in range(2) for j in range(2))
    name = "model.layers.0.self_attn.q_proj.weight"
    dtype, shape = ("I16", [64, 512]) if layout == "llama" else ("I8", [4, 5120])
    hand_file(tmp_path / "model.q4nx", name, dtype, shape, data)  # no metadata: the layout is read off the header
    bundle = read_bundle(tmp_path)
    assert bundle.layout() == layout
    codes, scales, mins = bundle.projection(name, 64, 512)
    assert np.array_equal(codes, q)
    assert np.array_equal(scales, scale) and np.array_equal(mins, mn)
    assert np.array_equal(dequantise(codes, scales, mins, layout), reference_dequant(q, scale, mn, layout))
    assert pack(q, scale, mn) == data


def test_the_two_layouts_dequantise_the_same_fields_differently():
    q, scale, mn = chosen_blocks(1, 1)
    a, b = dequantise(q, scale, mn, "llama"), dequantise(q, scale, mn, "qwen3")
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("layout", ["llama", "qwen3"])
@pytest.mark.parametrize("shape", [(64, 512), (576, 576), (40, 1536)])
def test_reader_of_writer_is_exact_and_padding_is_zero(layout, shape):
    rng = np.random.default_rng(7)
    w = (rng.standard_normal(shape) * 0.05).astype(BF16).astype(np.float32)
    w[0, :32] = 0.25  # a constant group
    codes, scales, mins = quantise(w, layout)
    M, K = shape
    assert codes.shape == (-(-M // 32) * 32, -(-K // 256) * 256)
    assert not codes[M:].any() and not codes[:, K:].any() and not scales[:, K // 32:].any()
    back = unpack(pack(codes, scales, mins), *codes.shape)
    for x, y in zip(back, (codes, scales, mins)):
        assert np.array_equal(x, y)
    deq = dequantise(*back, layout)
    assert not deq[M:].any() and not deq[:, K:].any()  # zero columns dequantise to exactly 0
    assert np.allclose(deq[0, :32], 0.25)
    # round-to-nearest over the group's range: error within half a step, plus (llama) the zero point's own bf16
    # rounding (|z| * 2^-8 steps, which may also clip an end of the range) and the bf16 rounding of the result
    step = np.repeat(scales[:M, :K // 32], 32, axis=1)
    zero = np.repeat(np.abs(mins[:M, :K // 32]), 32, axis=1) if layout == "llama" else 0.0
    assert np.all(np.abs(deq[:M, :K] - w) <= (0.5 + zero * 2 ** -8) * step + np.abs(w) * 2 ** -8 + 1e-7)


def test_a_padding_that_is_not_zero_and_a_wrong_scale_dtype_are_refused(tmp_path):
    w = np.random.default_rng(1).standard_normal((32, 576)).astype(np.float32) * 0.1
    codes, scales, mins = quantise(w, "qwen3")
    codes[3, 700] = 1
    name = "model.layers.0.mlp.down_proj.weight"
    write_container(tmp_path / "bad.q4nx", {name: ("I8", [3, 5120], pack(codes, scales, mins))}, {"layout": "qwen3"})
    with pytest.raises(Q4nxError, match="padding"):
        read_bundle(tmp_path / "bad.q4nx").projection(name, 32, 576)
    codes[3, 700] = 0
    write_container(tmp_path / "f16.q4nx", {name: ("I8", [3, 5120], pack(codes, scales, mins, "float16"))},
                    {"layout": "qwen3", "scale_dtype": "float16"})
    with pytest.raises(Q4nxError, match="float16"):
        read_bundle(tmp_path / "f16.q4nx").projection(name, 32, 576)
