"""The two 4-bit (Q4NX) kernels of mlir-air's on-device 4-bit deployment, as their AIE2P code computes them.

Layouts (dimensions named once; G = K / 32 groups of 32 columns per row):
  codes (M, K)   the 4-bit codes q, 0..15, as float32
  scale (M, G)   bf16 per-group scale       min (M, G)   bf16 per-group min      w = q * scale + min

`dequant_q4nx` follows llama32_1b_q4nx/dequant_q4nx.cc:36-57@0d63308: the accumulator is loaded with the
group's min (`acc.from_vector(mnv)`), `aie::mac(acc, w_bf16, sv)` adds q*scale in accfloat, and
`to_vector<bfloat16>` rounds once under `set_rounding(conv_even)`. The product q*scale (4-bit integer times an
8-bit bf16 mantissa) is exact in FP32, so the model is: one FP32 add (round to nearest even), then one
round-to-nearest-even to bf16. Where q*scale + min is exact in FP32 (always, unless min and q*scale are more
than 2^12 apart in magnitude) that is a single bf16 rounding of the exact value.

`gemv_q4nx` follows fused_decode/kernels/q4_k.h:38-183@54341c8 (`_qmm_q4k_bf16`, the default unsigned-int4
+ min layout) and proj_qmm.cc `proj_qmm_acc256` / `proj_qmm_flush`@5bcb24c: it never builds W. Per group g of
32 columns, in column order:
  t[r]   = sum_c q[r, c] * x[c]              FP32 mul/mac chain (exact products, one rounding per add)
  acc[r] += bf16(t[r]) * scale[r, g]         `mac(c_accum, temp_acc.to_vector<bf16>(), a_scales)`
  acc[r] += min[r, g] * bf16(sum_c x[c])     `mac(c_accum, a_mins, reduce_b)`; the group sum of x is
                                             `bf16(aie::reduce_add(load_v<32>(x)))` (proj_qmm.cc:74-80)
and `proj_qmm_flush` rounds acc to bf16 (round to nearest even). Groups are walked in order across the whole
row (col-block j outer, the 8 groups of a 256-column block inner: the same order).
Modelled, not verified on hardware: `aie::reduce_add` of a 32-wide bf16 vector is taken as an FP32 halving
tree (lanes i + (i+16), then 8, 4, 2, 1) rounded once to bf16; on inputs whose group sums are exact (the
hand-chosen tests) the order cannot matter.
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import f32, to_bf16

Q4_GROUP = 32  # dequant_q4nx.cc DIM_GS; q4_k.h's sub_chunk of 32 columns
Q4_ROW_BLOCK = 32  # proj_qmm.cc Q4NX_ROW_BLOCK_SIZE (one q4k block: 32 rows x 256 columns)
Q4_COL_BLOCK = 256  # proj_qmm.cc Q4NX_COL_BLOCK_SIZE


def group_views(codes, scale, mn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes (M, G, 32), scale (M, G), min (M, G)) as float32, checking that the shapes agree."""
    q = f32(codes)
    s, m = f32(scale), f32(mn)
    M, K = q.shape
    if K % Q4_GROUP:
        raise ValueError(f"Q4NX: K={K} is not a multiple of the {Q4_GROUP}-column group")
    G = K // Q4_GROUP
    if s.shape != (M, G) or m.shape != (M, G):
        raise ValueError(f"Q4NX: codes {q.shape} need scale and min of shape {(M, G)}, got {s.shape} and {m.shape}")
    return q.reshape(M, G, Q4_GROUP), s, m  # (rows, groups, columns of a group)


def dequant_q4nx(codes, scale, mn) -> np.ndarray:
    """w = q * scale + min as dequant_q4nx.cc rounds it: FP32 add of the exact product, one RNE to bf16."""
    q3, s, m = group_views(codes, scale, mn)
    w = q3 * s[:, :, None] + m[:, :, None]  # (M, G, 32): product exact, one FP32 rounding for the add
    return to_bf16(w.reshape(q3.shape[0], -1))


def reduce_add_32(v: np.ndarray) -> np.ndarray:
    """FP32 halving-tree sum over the last axis (32 lanes): i + (i+16), + (i+8), + (i+4), + (i+2), + (i+1)."""
    t = f32(v)
    while t.shape[-1] > 1:
        h = t.shape[-1] // 2
        t = t[..., :h] + t[..., h:]
    return t[..., 0]


def group_columns(codes) -> np.ndarray:
    """The codes as (32, M, G): column c of every group contiguous, the operand order of the mac chain (a layout
    copy only: `gemv_q4nx` computes the same numbers from it, 32 contiguous passes instead of 32 strided ones)."""
    q = f32(codes)
    M, K = q.shape
    return np.ascontiguousarray(q.reshape(M, K // Q4_GROUP, Q4_GROUP).transpose(2, 0, 1))


def gemv_q4nx(codes, scale, mn, x, columns: np.ndarray | None = None) -> np.ndarray:
    """y = W x with W = q * scale + min, in q4_k.h's order and roundings (module docstring); bf16 out.
    `columns`: `group_columns(codes)`, when the caller keeps it (a resident weight)."""
    q3, s, m = group_views(codes, scale, mn)
    M, G, _ = q3.shape
    cols = group_columns(codes) if columns is None else columns
    xg = f32(x).reshape(G, Q4_GROUP)  # (groups, columns of a group)
    t = np.zeros((M, G), np.float32)
    for c in range(Q4_GROUP):  # the mul/mac chain over the group's 32 columns, in column order
        t += cols[c] * xg[:, c]
    tb = to_bf16(t)  # temp_acc.to_vector<bf16>()
    rb = to_bf16(reduce_add_32(xg))  # (G,) bf16(reduce_add(x of the group))
    acc = np.zeros(M, np.float32)
    for g in range(G):  # c_accum over the groups in order; each product is exact in FP32
        acc += tb[:, g] * s[:, g]
        acc += m[:, g] * rb[g]
    return to_bf16(acc)


def dequantised_fp32(codes, scale, mn) -> np.ndarray:
    """The exact FP32 dequantised matrix (M, K): the references' W (no bf16 rounding)."""
    q3, s, m = group_views(codes, scale, mn)
    return (q3 * s[:, :, None] + m[:, :, None]).reshape(q3.shape[0], -1)
