"""The sliding-window mask (Gemma3's local layers, attn_npu2.cc `apply_window_mask` at mlir-air e972f29: keys with
q - window < k <= q) on every executor's flash attention, the FP32 reference and the host decode attention."""

from __future__ import annotations

import numpy as np

from npu_kernels.model.host_ops import host_decode_attention
from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.executors.base import Fp32Executor
from npu_kernels.numerics.executors.emulated import EmulatedExecutor
from npu_kernels.numerics.executors.torch_exec import TorchExecutor
from npu_kernels.numerics.references import attention_reference

RNG = np.random.default_rng(7)
Q, K, V = (to_bf16(RNG.standard_normal(s).astype(np.float32)) for s in ((4, 128, 64), (2, 128, 64), (2, 128, 64)))
WINDOW = 32


def _cos(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_the_fp32_executor_masks_exactly_the_keys_outside_the_window():
    out = Fp32Executor().flash_attention(Q, K, V, causal=True, window=WINDOW)
    ref = attention_reference(Q, K, V, True, window=WINDOW)
    assert np.allclose(out, ref, atol=1e-5)
    # row 100 sees keys 69..100 only: the same as attention over that slice alone
    alone = attention_reference(Q[:, 100:101], K[:, 69:101], V[:, 69:101], False)
    assert np.allclose(out[:, 100:101], alone, atol=1e-5)
    assert not np.allclose(out, Fp32Executor().flash_attention(Q, K, V, causal=True), atol=1e-3)


def test_the_emulated_and_torch_executors_follow_the_reference_window():
    ref = attention_reference(Q, K, V, True, window=WINDOW)
    for ex in (EmulatedExecutor("npu2"), TorchExecutor()):
        assert _cos(ex.flash_attention(Q, K, V, causal=True, window=WINDOW), ref) > 0.999, ex.name


def test_host_decode_attention_reads_only_the_last_window_positions():
    pos = 100  # the query at position 100 against the cache of positions 0..100
    got = host_decode_attention(Q[:, pos], K[:, : pos + 1], V[:, : pos + 1], np.arange(4) // 2, window=WINDOW)
    ref = attention_reference(Q[:, pos : pos + 1], K[:, : pos + 1], V[:, : pos + 1], True, q_offset=pos, window=WINDOW)
    assert np.allclose(got, ref[:, 0], atol=1e-5)
