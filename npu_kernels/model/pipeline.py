"""The decoder built only from an executor's leaf kernels: prefill and KV-cached decode.

Per layer (prefill, S positions; decode is the same with S = 1 and GEMV for every projection):

  x (S, E) ─ rmsnorm ─ Q/K/V gemm ─ [Qwen3 q/k rmsnorm, heads as rows] ─ rope (half-split, host LUT)
    ─ [Qwen2: + RoPE(bias) on the host, RoPE(q+b) = RoPE(q) + RoPE(b); v + b_v] ─ flash_attention (GQA,
    causal) ─ O gemm ─ eltwise_add (residual) ─ rmsnorm ─ gate/up gemm ─ silu_mul ─ down gemm ─ eltwise_add
  then the final RMSNorm and the LM head. The embedding is a host gather.

Where mlir-air's bf16 deployments (llama32_1b, whose prefill/decode smollm2_1_7b and the other Llama-family
model directories reuse) run a step other than as the standalone kernel, the pipeline does the same:
  decode attention  single-query GQA attention against the KV cache on the CPU in FP32 with an exact
                    softmax, cast to bf16 (llama32_1b_decode.py `decode_attention_cpu`, :98-133, called at
                    :240-253: "at head_dim=64 the NPU FA kernel's per-call overhead dominates");
  final RMSNorm     CPU FP32 on the predicted row, cast to bf16 for the LM head (llama32_1b_inference.py
                    :496-511 prefill, :595-600 decode; llama32_1b_cpu_helpers.py `rms_norm`);
  LM head           the same 8-partition GEMV ELF for prefill's predicted position and every
                    decode step (llama32_1b_inference.py :513-531, :602-620), one GEMV per 16384-row
                    vocabulary partition.
  decode glue       lean models (`npu_kernels.model.config.is_lean`, the 2-ELF decode): the two residual adds
                    are the tails of o_gemv_ffn's matvec_2tile_add stages (mv_bf16.cc `partial_plus_r` under
                    the conv_even its matvec sets: one nearest-even rounding), not the standalone eltwise_add
                    kernel prefill's o_ffn ELF launches (floor rounding); the FFN RMSNorm and SwiGLU are
                    in-kernel (matvec_swiglu_rms, the same codegen as the standalone kernels). Not modelled:
                    matvec_2tile_add keeps its partial sum in bf16 between 512-wide K chunks (mv_bf16.cc
                    `matvec_vectorized_impl`), one more rounding per chunk after the first.
                    Other models (5-ELF decode, e.g. qwen25_0_5b_decode.py:422-486, and SmolLM2-135M with
                    E = 576): the residual adds, the FFN RMSNorm and SwiGLU run on the host in FP32; the
                    attention residual stays FP32, the RMSNorm and SwiGLU outputs and the block output are
                    cast to bf16.
The performance model's dispatch plan (`npu_kernels.perf.dispatch`) has the same split.

The switches of `PipelineOptions` (`npu_kernels.model.options`) change how the work is dispatched, never the
numbers. Test faults never run here: `npu_kernels.model.faults.FaultyPipeline` overrides the step each one
breaks, and `build_pipeline` chooses. The host-side steps are `npu_kernels.model.host_ops`.

Every stage runs inside `stage_timer` under "<prefill|decode>:<stage>", and `stage_kernels` maps each
stage to the leaf kernel it uses ("host" for gathers, bias adds and layout copies): `profile()` joins them
with the executor's own per-kernel timer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16, widened
from npu_kernels.numerics.executors.base import Executor, Fp32Executor, KernelTimer, MixedExecutor
from npu_kernels.model.config import ModelConfig, is_lean
from npu_kernels.model.description import GELU_TANH_GLU
from npu_kernels.model.features import qk_norm, sliding_window
from npu_kernels.model.features.partial_rope import rotate_partial
from npu_kernels.model.features.short_conv import ShortConvMixer
from npu_kernels.model.host_ops import (
    KVCache,
    host_decode_attention,
    host_rmsnorm,
    embed_rows,
    host_glu,
    layer_rope_tables,
    rotate_host,
)
from npu_kernels.model.options import PipelineOptions
from npu_kernels.model.stages import StageBookkeeping
from npu_kernels.model.runner import DecodeStepRecord, PrefillRecord
from npu_kernels.model.weights import FUSED_ROWS, ModelWeights

# the leaf kernels of one prefill block, in the order the block first uses them (the bisect's order)
BLOCK_KERNEL_ORDER = ("rmsnorm", "gemm", "rope", "flash_attention", "eltwise_add", "silu_mul")
LM_HEAD_PARTITION = 16384  # GEMV rows per LM-head call (buffer-descriptor repeat limit)


class NpuPipeline(ShortConvMixer, StageBookkeeping):
    """A decoder-only model run from leaf kernels on `executor`; implements the Runner protocol."""

    injects_faults = False  # only npu_kernels.model.faults.FaultyPipeline runs the test faults options may name

    def __init__(self, weights: ModelWeights, config: ModelConfig | None = None,
                 executor: Executor | None = None, options: PipelineOptions | None = None) -> None:
        self.weights = weights
        self.config = config or weights.config
        self.options = options or PipelineOptions()
        if self.options.faults and not self.injects_faults:
            raise ValueError(f"test faults {sorted(self.options.faults)} run only in npu_kernels.model.faults "
                             "(build_pipeline / FaultyPipeline), never in the production pipeline")
        self.base_executor = executor if executor is not None else Fp32Executor()
        self.k = self.base_executor
        self.name = f"pipeline[{self.k.name}]"
        self.stage_timer = KernelTimer()
        self.stage_kernels: dict[str, str] = {}
        c = self.config
        self._ropes = layer_rope_tables(c, weights.rope_scaling, resident=self.options.weight_residency,
                                        seq_first=self.options.seq_first)
        self._fused = self.options.fusion
        self._lean = is_lean(self.config)  # mlir-air's 2-ELF decode; otherwise 5 ELFs with host glue
        self._cache: KVCache | None = None
        self._phase = "prefill"
        self._assembly = np.empty(0, np.uint8)  # `_gemv_w`'s buffer for a fused step's rows assembled per call

    # --- setup ------------------------------------------------------------------------------------

    def _fused_w(self, layer: int, name: str) -> np.ndarray:
        """Concatenated weights of a fused step, (in, out): "wqkv" (E, (H+2Hkv)·D), "w_gate_up" (E, 2F); a view
        of the rows held once (`_gemm_w`)."""
        return self._gemv_w(layer, name).T

    def _gemm_w(self, layer: int, name: str) -> np.ndarray:
        """A projection as the GEMM takes it, (in, out): the weights hold it once, as the GEMV's rows
        (npu_kernels.model.weights), so this is a transposed view (of bf16 bits, which every executor widens
        exactly). Every executor's GEMM makes its B operand C-contiguous before BLAS sees it (under weight residency
        once, into the operand it keeps), so the sums run in the order they did on a C-contiguous (in, out) copy:
        no number moves."""
        return getattr(self.weights.layers[layer], name)

    def _gemv_w(self, layer: int, name: str) -> np.ndarray:
        """A projection as GEMV streams it: row-major (out, in). `load_weights` holds it so (the parts of a fused
        step row blocks of one array); weights built otherwise (a test fault's) get it built once here.

        Handing the executor a transposed view instead would let its BLAS sum in another order than for
        the resident (row-major) copy, and weight residency must never change the numbers."""
        lw = self.weights.layers[layer]
        key = ("rows", layer, name)
        if name in FUSED_ROWS and key not in self.weights.derived:
            # weights sharing the HF reference's tensors hold the parts apart (npu_kernels.model.weights
            # `load_weights`): their rows are assembled per call into one reused buffer, never kept (a second copy
            # of most of the model) - the same rows, so the same numbers. Valid until the next call: the
            # executors keep no held-bits operand (the emulated GEMV widens it per call, a resident GEMM operand
            # is a copy)
            parts = [np.asarray(getattr(lw, p)).T for p in FUSED_ROWS[name]]
            if len({p.dtype for p in parts}) > 1:  # never a uint16 concatenated as a number
                parts = [widened(p) for p in parts]
            shape = (sum(p.shape[0] for p in parts), parts[0].shape[1])
            dtype = np.result_type(*parts)
            size = shape[0] * shape[1] * np.dtype(dtype).itemsize
            if self._assembly.size < size:
                self._assembly = np.empty(size, np.uint8)
            return np.concatenate(parts, axis=0, out=self._assembly[:size].view(dtype).reshape(shape))
        if name in FUSED_ROWS:
            parts = FUSED_ROWS[name]
            build = lambda: np.concatenate([np.asarray(getattr(lw, p)).T for p in parts], axis=0)  # noqa: E731
        else:
            build = lambda: np.ascontiguousarray(getattr(lw, name).T)  # noqa: E731
        return self.weights.derive(("rows", layer, name), build)

    def _gemv(self, layer: int, name: str, x: np.ndarray) -> np.ndarray:
        """(1, out) = W x for a decode projection."""
        return self.k.gemv(self._gemv_w(layer, name), x, static_key=self._key(f"L{layer}.{name}^T"))[None, :]

    def with_fp32_kernels(self, swapped: set[str] | frozenset[str]) -> "NpuPipeline":
        """The same pipeline with the kernels in `swapped` replaced by their FP32 versions (the bisect's
        runner)."""
        return NpuPipeline(self.weights, self.config, MixedExecutor(self.k, Fp32Executor(), set(swapped)), self.options)

    def describe(self) -> dict[str, Any]:
        return {**self.k.describe(), "pipeline": self.options.to_dict()}

    def _key(self, name: str) -> str | None:
        return f"{self.weights.key}/{name}" if self.options.weight_residency else None

    # --- Runner protocol ------------------------------------------------------------------------------

    def prefill(self, prompt_tokens) -> PrefillRecord:
        tokens = np.asarray(prompt_tokens, dtype=np.int64).reshape(-1)
        n_real = int(tokens.shape[0])
        if self.options.prefill_len and self.options.prefill_len > n_real:
            pad = np.full(self.options.prefill_len - n_real, self.options.pad_token, np.int64)
            tokens = np.concatenate([tokens, pad])
        S = int(tokens.shape[0])
        c = self.config
        self._phase = "prefill"
        for tables in set(self._ropes):
            tables.new_prefill()
        if self._cache is None or not self.options.weight_residency or self._cache.seq_first != self.options.seq_first:
            self._cache = KVCache(c.n_layers, c.n_kv_heads, c.head_dim, S + 64, self.options.seq_first)
        else:
            self._cache.reserve(S + 64)
        with self._stage("embedding", "host"):
            x = embed_rows(self.weights.embed, tokens, self.config.arch.embed_scale)  # (S, E)
        intermediates = []
        for layer in range(c.n_layers):
            x = self._conv_layer(layer, x, n_real) if c.arch.is_conv(layer) else self._prefill_layer(layer, x, S)
            intermediates.append({"ffn_out": x[:n_real]})
        with self._stage("final_norm", "host"):
            normed = host_rmsnorm(x[:n_real], self.weights.final_norm, c.rms_norm_eps)  # FP32, every real row
        logits = self._lm_head(self._buffer(normed[n_real - 1]))  # the predicted position only
        return PrefillRecord(layer_intermediates=intermediates, final_hidden_normed=normed,
                             logits_at_pred=logits, top1_token=int(np.argmax(logits)))

    def decode_step(self, input_token: int, current_pos: int) -> DecodeStepRecord:
        if self._cache is None:
            raise RuntimeError("decode_step called before prefill")
        c = self.config
        self._phase = "decode"
        with self._stage("embedding", "host"):
            x = embed_rows(self.weights.embed, [int(input_token)], self.config.arch.embed_scale)  # (1, E)
        for layer in range(c.n_layers):
            x = self._conv_layer(layer, x, 1) if c.arch.is_conv(layer) else self._decode_layer(layer, x, int(current_pos))
        with self._stage("final_norm", "host"):
            normed = self._buffer(host_rmsnorm(x, self.weights.final_norm, c.rms_norm_eps)[0])  # (E,)
        logits = self._lm_head(normed)
        return DecodeStepRecord(lm_head_logits=logits, top1_token=int(np.argmax(logits)))

    def _lm_head(self, normed: np.ndarray) -> np.ndarray:
        """Logits (V,) of one normed row (bf16 values): one GEMV per LM_HEAD_PARTITION-row vocabulary
        partition, the same ELF for prefill's predicted position and for every decode step."""
        with self._stage("lm_head", "gemv"):
            parts = [self.k.gemv(self._lm_head_rows(p0), normed, static_key=self._key(f"lm_head[{p0}]"))
                     for p0 in range(0, self.weights.lm_head.shape[0], LM_HEAD_PARTITION)]
            return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _lm_head_rows(self, p0: int) -> np.ndarray:
        """The rows (n, E) one LM-head GEMV partition streams."""
        return self.weights.lm_head[p0 : p0 + LM_HEAD_PARTITION]

    def _buffer(self, x: np.ndarray) -> np.ndarray:
        """A host step's result as the next kernel reads it: bf16 on a bf16-buffer executor, else FP32."""
        return to_bf16(x) if self.k.bf16_buffers else np.asarray(x, np.float32)

    def _kv_head_of(self) -> np.ndarray:
        """The K/V head each query head attends with: h // (H / Hkv)."""
        H, Hkv = self.config.n_heads, self.config.n_kv_heads
        return np.arange(H) // (H // Hkv)

    def _attention(self, q: np.ndarray, k_all: np.ndarray, v_all: np.ndarray, **kw) -> np.ndarray:
        return self.k.flash_attention(q, k_all, v_all, **kw)

    def _kv_slot(self, pos: int) -> int:
        """The KV-cache position decode step `pos` writes its K/V to."""
        return pos

    # --- one block ------------------------------------------------------------------------------------

    def _qkv(self, layer: int, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Q (S, H·D), K (S, Hkv·D), V (S, Hkv·D) from the normed activations (views when fused)."""
        c, lw, k = self.config, self.weights.layers[layer], self.k
        hq, hkv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        decode = self._phase == "decode"
        with self._stage("qkv", "gemv" if decode else "gemm"):
            if self._fused:
                y = (self._gemv(layer, "wqkv", h[0]) if decode
                     else k.gemm(h, self._fused_w(layer, "wqkv"), static_key=self._key(f"L{layer}.wqkv")))
                q, kk, v = y[:, :hq], y[:, hq : hq + hkv], y[:, hq + hkv :]
            elif decode:
                q, kk, v = (self._gemv(layer, n, h[0]) for n in ("wq", "wk", "wv"))
            else:
                q, kk, v = (k.gemm(h, self._gemm_w(layer, n), static_key=self._key(f"L{layer}.{n}"))
                            for n in ("wq", "wk", "wv"))
        if lw.bv is not None:
            with self._stage("qkv_bias", "host"):
                v = self._buffer(v + lw.bv)
        return q, kk, v

    def _heads_as_rows(self, y: np.ndarray, heads: int) -> np.ndarray:
        """(S, heads·D) -> rows (S·heads, D) seq-first, or (heads·S, D) head-major (a copy: the baseline's
        layout round-trip)."""
        S, D = y.shape[0], self.config.head_dim
        y3 = y.reshape(S, heads, D)  # (S, heads, D)
        if self.options.seq_first:
            return y3.reshape(S * heads, D)
        with self._stage("layout", "host"):
            return np.ascontiguousarray(y3.transpose(1, 0, 2)).reshape(heads * S, D)  # (heads·S, D)

    def _rows_to_attention(self, rows: np.ndarray, S: int, heads: int) -> np.ndarray:
        """Rows in this layout -> (heads, S, D) for flash attention (a view)."""
        D = self.config.head_dim
        if self.options.seq_first:
            return rows.reshape(S, heads, D).transpose(1, 0, 2)
        return rows.reshape(heads, S, D)

    def _attention_inputs(self, layer: int, q: np.ndarray, kk: np.ndarray, start: int):
        """q/k rows through [q/k norm], RoPE and [the rotated bias], in this pipeline's layout."""
        c, lw, k = self.config, self.weights.layers[layer], self.k
        S, H, Hkv = q.shape[0], c.n_heads, c.n_kv_heads
        q_rows, k_rows = self._heads_as_rows(q, H), self._heads_as_rows(kk, Hkv)
        q_rows, k_rows = qk_norm.apply(self, layer, q_rows, k_rows)
        rope = self._ropes[layer]
        cos_q, sin_q = rope.rows(start, S, H)
        cos_k, sin_k = rope.rows(start, S, Hkv)
        if self._fused:
            with self._stage("rope", "rope"):
                both = self._rotate(k.rope, np.concatenate([q_rows, k_rows]), *rope.stacked(start, S))
            q_rows, k_rows = both[: S * H], both[S * H :]
        else:
            with self._stage("rope", "rope"):
                q_rows = self._rotate(k.rope, q_rows, cos_q, sin_q)
                k_rows = self._rotate(k.rope, k_rows, cos_k, sin_k)
        if lw.bq is not None:
            with self._stage("qkv_bias", "host"):
                # RoPE is linear: RoPE(q + b) = RoPE(q) + RoPE(b); b is rotated on the host in float32
                q_rows = self._buffer(q_rows + self._rotate(rotate_host, self._bias_rows(lw.bq, H, S), cos_q, sin_q))
                k_rows = self._buffer(k_rows + self._rotate(rotate_host, self._bias_rows(lw.bk, Hkv, S), cos_k, sin_k))
        return q_rows, k_rows

    def _rotate(self, rope, rows: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        return rotate_partial(rope, rows, cos, sin, self.config.rotary_dim)

    def _bias_rows(self, b: np.ndarray, heads: int, S: int) -> np.ndarray:
        """The per-head bias (heads·D,) repeated to one row per (head, position) in this layout."""
        D = self.config.head_dim
        b2 = b.reshape(heads, D)
        if self.options.seq_first:
            return np.tile(b2, (S, 1))  # rows (position, head)
        return np.repeat(b2, S, axis=0)  # rows (head, position)

    def _mlp(self, layer: int, x: np.ndarray) -> np.ndarray:
        """rmsnorm -> gate/up -> silu_mul -> down -> residual add, on (S, E)."""
        c, lw, k = self.config, self.weights.layers[layer], self.k
        decode = self._phase == "decode"
        mm = "gemv" if decode else "gemm"
        glue = decode and not self._lean  # the M=1 glue of a 5-ELF decode runs on the host
        with self._stage("ffn_norm", "host" if glue else "rmsnorm"):
            h = (self._buffer(host_rmsnorm(x, lw.ffn_norm, c.rms_norm_eps)) if glue
                 else k.rmsnorm(x, lw.ffn_norm, c.rms_norm_eps))
        with self._stage("gate_up", mm):
            if self._fused:
                y = (self._gemv(layer, "w_gate_up", h[0]) if decode
                     else k.gemm(h, self._fused_w(layer, "w_gate_up"), static_key=self._key(f"L{layer}.w_gate_up")))
                g, u = y[:, : c.hidden_dim], y[:, c.hidden_dim :]
            elif decode:
                g, u = self._gemv(layer, "w_gate", h[0]), self._gemv(layer, "w_up", h[0])
            else:
                g = k.gemm(h, self._gemm_w(layer, "w_gate"), static_key=self._key(f"L{layer}.w_gate"))
                u = k.gemm(h, self._gemm_w(layer, "w_up"), static_key=self._key(f"L{layer}.w_up"))
        gelu = self.config.arch.mlp == GELU_TANH_GLU  # gelu_and_mul: the GELU kernel, then the multiply by up
        with self._stage("gelu_mul" if gelu else "silu_mul", "host" if glue else "gelu" if gelu else "silu_mul"):
            a = (self._buffer(host_glu(g, u, gelu)) if glue else self._buffer(k.gelu(g) * u) if gelu
                 else k.silu_mul(g, u))
        with self._stage("down", mm):
            d = self._post_norm("post_ffn_norm", layer, self._down(layer, a, decode), glue)
        return self._residual("ffn_residual", x, d, decode)

    def _post_norm(self, which: str, layer: int, y: np.ndarray, glue: bool) -> np.ndarray:
        """Gemma3's sandwich: the sublayer output normed before the residual add (a no-op for the pre-norm form)."""
        w = getattr(self.weights.layers[layer], which)
        if w is None:
            return y
        with self._stage(which, "host" if glue else "rmsnorm"):
            eps = self.config.rms_norm_eps
            return self._buffer(host_rmsnorm(y, w, eps)) if glue else self.k.rmsnorm(y, w, eps)

    def _down(self, layer: int, a: np.ndarray, decode: bool) -> np.ndarray:
        """The down projection of the SwiGLU output `a` (a GEMV per decode step)."""
        if decode:
            return self._gemv(layer, "w_down", a[0])
        return self.k.gemm(a, self._gemm_w(layer, "w_down"), static_key=self._key(f"L{layer}.w_down"))

    def _o_proj(self, layer: int, attn: np.ndarray, decode: bool) -> np.ndarray:
        """(H, S, D) attention output -> the O projection (S, E)."""
        H, S, D = attn.shape
        with self._stage("layout", "host"):
            o_in = attn.reshape(H * D) if decode else np.ascontiguousarray(attn.transpose(1, 0, 2)).reshape(S, H * D)
        with self._stage("o_proj", "gemv" if decode else "gemm"):
            return (self._gemv(layer, "wo", o_in) if decode
                    else self.k.gemm(o_in, self._gemm_w(layer, "wo"), static_key=self._key(f"L{layer}.wo")))

    def _attention_out(self, layer: int, x: np.ndarray, attn: np.ndarray) -> np.ndarray:
        """(H, S, D) attention output -> O projection -> residual add."""
        decode = self._phase == "decode"
        o = self._post_norm("post_attn_norm", layer, self._o_proj(layer, attn, decode), decode and not self._lean)
        return self._residual("attn_residual", x, o, decode)

    def _window(self, layer: int) -> dict:
        """A sliding-window layer's window, as the attention calls take it (features.sliding_window)."""
        return sliding_window.attention_kwargs(self.config.arch, layer)

    def _residual(self, stage: str, x: np.ndarray, y: np.ndarray, decode: bool) -> np.ndarray:
        """x + y. Prefill: the eltwise_add kernel (mlir-air's o_ffn ELF launches the direct-codegen bf16 add,
        o_ffn_multi.py `_build_add_2d_to_2d`). Decode: the add is the tail of the GEMV ELF that produced y
        (o_gemv_ffn's matvec_2tile_add: `partial_plus_r` in mv_bf16.cc, under the conv_even rounding its matvec
        sets), i.e. one nearest-even rounding of the FP32 sum."""
        if not decode:
            with self._stage(stage, "eltwise_add"):
                return self.k.eltwise_add(x, y)
        total = np.asarray(x, np.float32) + np.asarray(y, np.float32)
        if self._lean:
            with self._stage(stage, "gemv"):
                return self._buffer(total)
        # 5-ELF decode: the host adds in FP32; the attention residual stays FP32 for the FFN RMSNorm and the
        # second add, which casts the block output to bf16 (qwen25_0_5b_decode.py:436-486)
        with self._stage(stage, "host"):
            return total if stage == "attn_residual" else self._buffer(total)

    def _prefill_layer(self, layer: int, x: np.ndarray, S: int) -> np.ndarray:
        c, lw, k = self.config, self.weights.layers[layer], self.k
        H, Hkv = c.n_heads, c.n_kv_heads
        with self._stage("attn_norm", "rmsnorm"):
            h = k.rmsnorm(x, lw.attn_norm, c.rms_norm_eps)  # (S, E)
        q, kk, v = self._qkv(layer, h)
        q_rows, k_rows = self._attention_inputs(layer, q, kk, 0)
        q_att = self._rows_to_attention(q_rows, S, H)  # (H, S, D)
        k_att = self._rows_to_attention(k_rows, S, Hkv)  # (Hkv, S, D)
        if self.options.seq_first:
            v_att = v.reshape(S, Hkv, c.head_dim).transpose(1, 0, 2)  # view (Hkv, S, D)
            self._cache.write(layer, 0, k_rows.reshape(S, Hkv, c.head_dim), v.reshape(S, Hkv, c.head_dim))
        else:
            with self._stage("layout", "host"):
                v_att = np.ascontiguousarray(v.reshape(S, Hkv, c.head_dim).transpose(1, 0, 2))
            self._cache.write(layer, 0, k_att, v_att)
        with self._stage("attention", "flash_attention"):
            attn = self._attention(q_att, k_att, v_att, causal=True, **self._window(layer))  # (H, S, D)
        x = self._attention_out(layer, x, attn)
        return self._mlp(layer, x)

    def _decode_layer(self, layer: int, x: np.ndarray, pos: int) -> np.ndarray:
        c, lw, k = self.config, self.weights.layers[layer], self.k
        H, Hkv, D = c.n_heads, c.n_kv_heads, c.head_dim
        with self._stage("attn_norm", "rmsnorm"):
            h = k.rmsnorm(x, lw.attn_norm, c.rms_norm_eps)  # (1, E)
        q, kk, v = self._qkv(layer, h)
        q_rows, k_rows = self._attention_inputs(layer, q, kk, pos)  # (H, D), (Hkv, D)
        slot = self._kv_slot(pos)
        if self.options.seq_first:
            self._cache.write(layer, slot, k_rows.reshape(1, Hkv, D), v.reshape(1, Hkv, D))
        else:
            self._cache.write(layer, slot, k_rows.reshape(Hkv, 1, D), v.reshape(Hkv, 1, D))
        k_all, v_all = self._cache.read(layer, pos + 1)  # (Hkv, pos+1, D)
        with self._stage("attention", "host"):
            attn = self._buffer(host_decode_attention(q_rows.reshape(H, D), k_all, v_all, self._kv_head_of(),
                                                      **self._window(layer)))[:, None, :]
        x = self._attention_out(layer, x, attn)
        return self._mlp(layer, x)
