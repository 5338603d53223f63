"""Test faults, injected around the production decoder: gate drills (`ledger verify-model --inject FAULT`)
and the tests of the gates run the same pipeline with one deliberate bug.

A kernel fault wraps the executor (`FaultyExecutor`); a pipeline fault is a `FaultyPipeline`, a subclass of
`npu_kernels.model.pipeline.NpuPipeline` that overrides the one step the fault breaks and delegates the rest, so
the production path holds no fault. `build_pipeline` is what callers use: the production pipeline when the
options declare no fault, the faulty one otherwise. The names and their one-line descriptions are
`npu_kernels.model.options.FAULTS` / `FAULT_HELP`:

  rope_interleaved          the rope kernel uses the interleaved convention (a kernel fault)
  kv_cache_off_by_one       decode writes the KV cache one position late
  down_bf16_accumulate      the down projection accumulates in bf16 over K chunks of DOWN_BF16_CHUNK
  stale_decode_buffer       a decode step reads the previous step's O-projection output
  lm_head_partition_offset  decode's first LM-head partition streams its rows one row late
  kv_head_group_mismap      query head h attends with K/V head h % Hkv instead of h // (H / Hkv)
  rotary_full_width         a partial rotary (Phi-3) rotates the whole head: the config the pipeline reads
                            describes the whole head as rotary, so its RoPE tables are built over head_dim
  qkv_split_order           the fused qkv_proj split as [q | v | k]: K and V swap (a load-time split fault)
  window_ignored            Gemma3's sliding-window layers run full causal attention (prefill and decode)
  norm_fold_missing         a `1+w` family's norm weights used as w: the loaded (folded, bf16) weights less 1,
                            rounded to bf16 again (a load-time fault)
  conv_look_ahead           a short-convolution layer (LFM2) reads one row ahead: y[t] = w0 h[t-1] + w1 h[t] + w2 h[t+1]
                            (the kernel's window shifted a row into the future; zeros past the end)
  conv_state_dropped        the prefill's convolution state is not handed to the decode: its first step pads with
                            zeros (later steps carry their own)
  conv_taps_reversed        the depthwise taps read newest-first (HF's (C, 1, 3) taps not put oldest-first)
  q4nx_group_scale_shift    a 4-bit deployment's host dequantisation uses group g+1's scale for group g (the
                            last group of a row keeps its own): a weights fault, `bundle_dequantiser` wraps the
                            codec's `dequantise`
The speculative loop's faults (`SPEC_FAULT_HELP`) wrap its acceptance (`speculation_acceptance`):
  spec_unverified_accept    every drafted token is committed without the target's check
  spec_accept_off_by_one    the accepted prefix runs one token past the first mismatch (the rejected draft kept)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.executors.base import Executor, Fp32Executor, MixedExecutor
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.features import partial_rope
from npu_kernels.model.options import FAULTS, SPEC_FAULTS, PipelineOptions
from npu_kernels.model.pipeline import NpuPipeline
from npu_kernels.model.pipeline_q4 import Q4DecodeMixin, Q4DevicePipeline
from npu_kernels.model.q4nx import dequantise
from npu_kernels.model.q4nx_device import DecodeWeights
from npu_kernels.model.runner import PrefillRecord
from npu_kernels.model.speculative import Acceptance, accepted_prefix
from npu_kernels.model.weights import NORM_FIELDS, ModelWeights

KERNEL_FAULTS = frozenset({"rope_interleaved"})
WEIGHT_FAULTS = frozenset({"q4nx_group_scale_shift"})
PIPELINE_FAULTS = FAULTS - KERNEL_FAULTS - WEIGHT_FAULTS
DOWN_BF16_CHUNK = 32  # K chunk of the "down_bf16_accumulate" fault


class FaultyExecutor(Executor):
    """An executor whose kernels carry deliberate bugs (tests of the gates). Everything else delegates."""

    def __init__(self, inner: Executor, faults: frozenset[str]) -> None:
        self.inner, self.faults = inner, frozenset(faults)
        self.name = f"{inner.name}!{','.join(sorted(self.faults))}"
        self.target, self.timer, self.bf16_buffers = inner.target, inner.timer, inner.bf16_buffers

    def __getattr__(self, item: str):
        return getattr(self.inner, item)

    def describe(self) -> dict:
        return {**self.inner.describe(), "faults": sorted(self.faults)}

    def clear_cache(self) -> None:
        self.inner.clear_cache()

    def rope(self, x, cos, sin):
        if "rope_interleaved" not in self.faults:
            return self.inner.rope(x, cos, sin)
        # interleaved convention: rotate pairs (x[2i], x[2i+1]) instead of (x[i], x[i + D/2])
        x = np.asarray(x, np.float32)
        half = x.shape[-1] // 2
        out = self.inner.rope(np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1), cos, sin)
        res = np.empty_like(out)
        res[..., 0::2], res[..., 1::2] = out[..., :half], out[..., half:]
        return res


def with_faults(executor: Executor, faults: frozenset[str]) -> Executor:
    """`executor` with the kernel faults among `faults` (itself when there are none)."""
    faults = frozenset(faults) & KERNEL_FAULTS
    return FaultyExecutor(executor, faults) if faults else executor


class FaultyPipeline(NpuPipeline):
    """The production pipeline with the faults its options declare; each override breaks one step."""

    injects_faults = True

    def __init__(self, weights: ModelWeights, config: ModelConfig | None = None,
                 executor: Executor | None = None, options: PipelineOptions | None = None) -> None:
        faults = (options or PipelineOptions()).faults
        config = config or weights.config
        if "rotary_full_width" in faults:
            config = replace(config, description=partial_rope.full_width(config))
        if "norm_fold_missing" in faults and config.arch.norm_offset:
            weights = replace(weights, layers=[replace(lw, **{f: to_bf16(getattr(lw, f) - np.float32(1.0))
                                                              for f in NORM_FIELDS if getattr(lw, f) is not None})
                                               for lw in weights.layers],
                              final_norm=to_bf16(weights.final_norm - np.float32(1.0)),
                              key=weights.key + "-norm_fold_missing", derived={})
        if "qkv_split_order" in faults:
            weights = replace(weights, layers=[replace(lw, wk=lw.wv, wv=lw.wk) for lw in weights.layers],
                              key=weights.key + "-qkv_split_order", derived={})
        super().__init__(weights, config, executor, options)
        self.k = with_faults(self.base_executor, self.options.faults)
        self.name = f"pipeline[{self.k.name}]"
        self._n_real = 0
        self._stale: dict[int, np.ndarray] = {}  # "stale_decode_buffer": layer -> the previous step's output
        self._stepped: set[int] = set()  # "conv_state_dropped": conv layers that decoded since the prefill

    def with_fp32_kernels(self, swapped: set[str] | frozenset[str]) -> NpuPipeline:
        """As the production pipeline's; kernel faults stay with this pipeline's kernels, so swapping the
        faulty one removes it, and the pipeline faults stay."""
        mixed = MixedExecutor(self.k, Fp32Executor(), set(swapped))
        return build_pipeline(self.weights, self.config, mixed,
                              replace(self.options, faults=self.options.faults - KERNEL_FAULTS))

    def prefill(self, prompt_tokens) -> PrefillRecord:
        self._n_real = int(np.asarray(prompt_tokens, dtype=np.int64).reshape(-1).shape[0])
        self._stale.clear()
        self._stepped.clear()
        return super().prefill(prompt_tokens)

    def _lm_head_rows(self, p0: int) -> np.ndarray:
        """"lm_head_partition_offset": the first partition starts one row late (row p0 + i + 1 lands in logit
        p0 + i; the last wraps to p0)."""
        rows = super()._lm_head_rows(p0)
        if p0 != 0 or "lm_head_partition_offset" not in self.options.faults:
            return rows
        return self.weights.derive(("lm_head_offset", p0), lambda: np.ascontiguousarray(np.roll(rows, -1, axis=0)))

    def _kv_head_of(self) -> np.ndarray:
        """"kv_head_group_mismap": query head h attends with K/V head h % Hkv."""
        if "kv_head_group_mismap" not in self.options.faults:
            return super()._kv_head_of()
        return np.arange(self.config.n_heads) % self.config.n_kv_heads

    def _attention(self, q: np.ndarray, k_all: np.ndarray, v_all: np.ndarray, **kw) -> np.ndarray:
        """"kv_head_group_mismap" on flash_attention: the kernel maps head j to K/V head j // (H / Hkv), so the
        query heads go in sorted by h % Hkv and the outputs come back in head order."""
        if "kv_head_group_mismap" not in self.options.faults:
            return super()._attention(q, k_all, v_all, **kw)
        H, Hkv = self.config.n_heads, self.config.n_kv_heads
        perm = np.argsort(np.arange(H) % Hkv, kind="stable")  # kernel slot j <- query head perm[j]
        out = self.k.flash_attention(q[perm], k_all, v_all, **kw)  # (H, S, D) in slot order
        res = np.empty_like(out)
        res[perm] = out
        return res

    def _down(self, layer: int, a: np.ndarray, decode: bool) -> np.ndarray:
        """"down_bf16_accumulate": the partial sum is held in bf16 between K chunks."""
        if "down_bf16_accumulate" not in self.options.faults:
            return super()._down(layer, a, decode)
        k = self.k
        w_down = self.weights.layers[layer].w_down if decode else self._gemm_w(layer, "w_down")
        acc = None
        for k0 in range(0, w_down.shape[0], DOWN_BF16_CHUNK):
            w = w_down[k0 : k0 + DOWN_BF16_CHUNK]
            part = k.gemv(self._gemv_w(layer, "w_down")[:, k0 : k0 + DOWN_BF16_CHUNK],
                          a[0, k0 : k0 + DOWN_BF16_CHUNK])[None, :] if decode \
                else k.gemm(a[:, k0 : k0 + DOWN_BF16_CHUNK], w)
            acc = to_bf16(part) if acc is None else to_bf16(acc + to_bf16(part))
        return acc

    def _o_proj(self, layer: int, attn: np.ndarray, decode: bool) -> np.ndarray:
        """"stale_decode_buffer": the buffer this step reads still holds the previous step's output (after a
        prefill: the last real position's); this step's output lands in it for the next step."""
        o = super()._o_proj(layer, attn, decode)
        if "stale_decode_buffer" not in self.options.faults:
            return o
        fresh = o[self._n_real - 1 : self._n_real] if not decode else o
        o, self._stale[layer] = (self._stale.get(layer, fresh) if decode else o), fresh
        return o

    def _window(self, layer: int) -> dict:
        """"window_ignored": no window reaches the attention (full causal on every layer)."""
        return {} if "window_ignored" in self.options.faults else super()._window(layer)

    def _conv_fed(self, window: np.ndarray) -> np.ndarray:
        """"conv_look_ahead": the window the kernel reads starts a row late, so tap 2 meets the next row."""
        if "conv_look_ahead" not in self.options.faults:
            return super()._conv_fed(window)
        return np.concatenate([window[1:], np.zeros_like(window[:1])])

    def _conv_window(self, layer: int, h: np.ndarray, decode: bool) -> np.ndarray:
        """"conv_state_dropped": the first decode step after a prefill pads with zeros, not the carried state."""
        if "conv_state_dropped" in self.options.faults and decode and layer not in self._stepped:
            self._stepped.add(layer)
            return super()._conv_window(layer, h, False)
        return super()._conv_window(layer, h, decode)

    def _conv_taps(self, layer: int) -> np.ndarray:
        """"conv_taps_reversed": newest tap first."""
        taps = super()._conv_taps(layer)
        return np.ascontiguousarray(taps[::-1]) if "conv_taps_reversed" in self.options.faults else taps

    def _kv_slot(self, pos: int) -> int:
        """"kv_cache_off_by_one": decode writes position `pos`'s K/V one slot late."""
        return pos + 1 if "kv_cache_off_by_one" in self.options.faults else pos


def bundle_dequantiser(faults: frozenset[str]):
    """The codec's `dequantise`, or (fault q4nx_group_scale_shift) one that hands group g the scale of g+1."""
    if "q4nx_group_scale_shift" not in faults:
        return dequantise

    def shifted(codes, scales, mins, layout):
        s = np.array(scales, np.float32)
        s[:, :-1] = scales[:, 1:]
        return dequantise(codes, s, mins, layout)

    return shifted


class FaultyQ4DevicePipeline(Q4DecodeMixin, FaultyPipeline):
    """`FaultyPipeline` with the on-device 4-bit decode (npu_kernels.model.pipeline_q4)."""

    def __init__(self, weights: ModelWeights, config: ModelConfig | None, executor: Executor | None,
                 options: PipelineOptions | None, decode: DecodeWeights) -> None:
        super().__init__(weights, config, executor, options)
        self.decode = decode

    def with_fp32_kernels(self, swapped: set[str] | frozenset[str]) -> NpuPipeline:
        mixed = MixedExecutor(self.k, Fp32Executor(), set(swapped))
        return build_pipeline(self.weights, self.config, mixed,
                              replace(self.options, faults=self.options.faults - KERNEL_FAULTS), self.decode)


def build_pipeline(weights: ModelWeights, config: ModelConfig | None = None, executor: Executor | None = None,
                   options: PipelineOptions | None = None, decode: DecodeWeights | None = None) -> NpuPipeline:
    """The production `NpuPipeline`, or a `FaultyPipeline` when `options` declare test faults; with `decode`
    (an on-device 4-bit deployment's re-quantised weights) their 4-bit-decode variants."""
    faulty = options is not None and bool(options.faults)
    if decode is not None:
        if faulty:
            return FaultyQ4DevicePipeline(weights, config, executor, options, decode)
        return Q4DevicePipeline(weights, config, executor, options or PipelineOptions(), decode)
    if faulty:
        return FaultyPipeline(weights, config, executor, options)
    return NpuPipeline(weights, config, executor, options)


def speculation_acceptance(faults: frozenset[str]) -> Acceptance:
    """The speculative loop's acceptance with the test faults in `faults` (`accepted_prefix` itself without one)."""
    unknown = set(faults) - SPEC_FAULTS
    if unknown:
        raise ValueError(f"unknown speculation faults {sorted(unknown)}; known: {sorted(SPEC_FAULTS)}")
    if "spec_unverified_accept" in faults:
        return lambda drafts, post: len(drafts)  # nothing checked: every draft committed
    if "spec_accept_off_by_one" in faults:
        return lambda drafts, post: min(accepted_prefix(drafts, post) + 1, len(drafts))  # the first rejected kept
    return accepted_prefix
