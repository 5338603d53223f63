"""The sliding-window mask (Gemma3's local layers, attn_npu2.cc `apply_window_mask` at mlir-air e972f29: keys with
q - window < k <= q) on every executor's flash attention, the FP32 reference and the host decode attention."""

from __future__ import annotations

import contextlib
import io

import numpy as np

from npu_kernels.mlir_air.transcript import parse_harness_transcript
from npu_kernels.mlir_air.twin import harness
from npu_kernels.model.host_ops import host_decode_attention
from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.executors.base import Fp32Executor
from npu_kernels.numerics.executors.emulated import EmulatedExecutor
from npu_kernels.numerics.executors.torch_exec import TorchExecutor
from npu_kernels.numerics.harness_inputs import harness_case
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


FA_SHAPE = {"lq": 256, "lk": 256, "dk": 64, "dv": 64, "heads_q": 2, "heads_kv": 1, "causal": True}


def test_the_harness_reference_masks_the_window_as_attn_npu2_does():
    """mlir-air's harness reference (attn_npu2.py:1464-1469 at e972f29) masks, under --causal, the future
    (`triu(k=1)`) and, with --window W, also `tril(k=-W)`: the keys at or before p - W. The twin's harness compares
    against this reference (issue #48: it was built without the window, so a windowed row FAILed on the twin)."""
    for window in (64, 128):
        case = harness_case("flash_attention", {**FA_SHAPE, "window": window})
        q, k, v = case.inputs["q"], case.inputs["k"], case.inputs["v"]
        ones = np.ones((256, 256), bool)
        mask = np.triu(ones, k=1) | np.tril(ones, k=-window)
        expected = np.empty((2, 256, 64), np.float32)
        for h in range(2):  # (lq, lk) scores per head, the one kv head shared
            scores = np.where(mask, np.float32(-1e9), q[h] @ k[0].T * np.float32(1 / np.sqrt(64)))
            p = np.exp(scores - scores.max(axis=-1, keepdims=True))
            expected[h] = (p / p.sum(axis=-1, keepdims=True)) @ v[0]
        assert _cos(case.reference, to_bf16(expected)) > 0.99999
        assert _cos(case.reference, harness_case("flash_attention", FA_SHAPE).reference) < 0.99


def test_the_twins_attention_harness_passes_a_sliding_window_row():
    """attn_npu2.py's own flags (--causal --window W, argparse :1353-1363), as the harness table's [flags] pass them."""
    for window in ("64", "128"):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = harness.main(["flash_attention", "--lq", "256", "--lk", "256", "--num-heads", "2", "--num-kv-heads",
                               "1", "--causal", "--window", window])
        result = parse_harness_transcript(buf.getvalue())
        assert (rc, result.verdict) == (0, "PASS"), buf.getvalue()
        assert result.outputs[0].mean_rel_L1 < 0.05
