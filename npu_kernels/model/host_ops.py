"""What the decoder pipeline runs on the host, as mlir-air's deployments do (`npu_kernels.model.pipeline` says
where each is used): the FP32 RMSNorm / SwiGLU / single-query decode attention, the RoPE frequencies and
cos/sin tables (`RopeTables`), and the per-layer KV cache. Host results are rounded to bf16 with
`npu_kernels.numerics.bf16.to_bf16`, the rounding every kernel reference uses.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from npu_kernels.model.features import partial_rope
from npu_kernels.numerics.bf16 import to_bf16, widened
from npu_kernels.numerics.executors.base import Fp32Executor


def host_rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """The final RMSNorm as mlir-air's deployments run it: on the CPU, in FP32 (x / sqrt(mean(x²) + eps) * w);
    the caller casts the row it streams to the LM head to bf16. The same math as the FP32 reference kernel."""
    return _FP32.rmsnorm(x, w, eps)


_FP32 = Fp32Executor()


def host_silu_mul(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """SwiGLU on the host in FP32, exact exp: g / (1 + e^-g) * u (qwen25_0_5b_decode.py:471-472)."""
    g32 = np.asarray(g, np.float32)
    return (g32 / (np.float32(1.0) + np.exp(-g32))) * np.asarray(u, np.float32)


def host_glu(g: np.ndarray, u: np.ndarray, gelu: bool) -> np.ndarray:
    """The gated MLP's activation on the host in FP32: SwiGLU, or (gelu) Gemma's GELU-tanh GLU
    gelu_tanh(g) * u (gemma3_4b_q4nx README.md:196 `gelu_mul`, mlir-air e972f29)."""
    if not gelu:
        return host_silu_mul(g, u)
    return _FP32.gelu(g) * np.asarray(u, np.float32)


def embed_rows(embed: np.ndarray, tokens, scale: float | None) -> np.ndarray:
    """The embedding gather (S, E); Gemma3 multiplies by its scale, in bf16 as HF does (the scale rounded to bf16,
    the product rounded to bf16; gemma3_4b_q4nx_weights.py:55-57 applies it at the gather). The embedding may be
    held as bf16 bits (npu_kernels.model.weights): the gathered rows are widened, exactly."""
    rows = widened(embed[np.asarray(tokens, dtype=np.int64)])
    return to_bf16(rows * np.float32(scale)) if scale else rows


def host_decode_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, kv_head: np.ndarray,
                          window: int | None = None, scale: float | None = None) -> np.ndarray:
    """Single-query attention of a decode step, as mlir-air's deployments run it: on the CPU in FP32 against
    the KV cache (exact softmax); the caller casts the output to its bf16 buffer. q (H, D), k/v (Hkv, L, D)
    -> (H, D) float32. `kv_head[h]` is the K/V head query head h reads; `window`: only the last `window`
    positions (a sliding-window layer)."""
    if window:
        k, v = k[:, -window:], v[:, -window:]
    q32, k32, v32 = (np.asarray(a, np.float32) for a in (q, k, v))
    scale = np.float32(1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    scores = np.einsum("hd,hld->hl", q32, k32[kv_head]) * scale
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    return np.einsum("hl,hld->hd", probs, v32[kv_head])


def rope_inv_freq(head_dim: int, theta: float, scaling: dict[str, Any] | None = None) -> np.ndarray:
    """RoPE inverse frequencies (D/2,) in float32, as transformers computes them ("default", "linear",
    "llama3" scaling)."""
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(head_dim)
    inv_freq = (np.float32(1.0) / np.power(np.float32(theta), exponents)).astype(np.float32)
    rtype = (scaling or {}).get("rope_type", "default")
    if rtype == "linear":
        inv_freq = inv_freq / np.float32(scaling["factor"])
    elif rtype == "llama3":
        factor = float(scaling["factor"])
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        old_len = float(scaling["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
        inv_freq = np.where(medium, smoothed, scaled).astype(np.float32)
    elif rtype == "longrope":  # the short factors: positions inside original_max_position_embeddings only
        inv_freq = partial_rope.short_inv_freq(scaling, theta, exponents)
    elif rtype != "default":
        raise ValueError(f"RoPE scaling '{rtype}' is not supported")
    return inv_freq


def rope_lut(inv_freq: np.ndarray, start: int, stop: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin tables (stop-start, D/2) for positions [start, stop), rounded to bf16 like transformers' tables.

    The angle is the float32 product position * inv_freq (as transformers forms it); cos/sin are taken in
    float64. numpy's float32 cos/sin give SIMD-lane-dependent last bits, so a value would depend on where it
    sits in the array (a resident table vs one position at a time) - the float64 ones do not, after rounding.
    """
    pos = np.arange(start, stop, dtype=np.float32)
    angles = (pos[:, None] * inv_freq[None, :]).astype(np.float64)  # (positions, D/2)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    if scale != 1.0:  # LongRoPE's attention factor: HF scales cos and sin in float32 before the bf16 cast
        cos, sin = cos * np.float32(scale), sin * np.float32(scale)
    return to_bf16(cos), to_bf16(sin)


def rotate_host(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Half-split RoPE in float32 on the host (for the Qwen2 bias term)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


class KVCache:
    """Per-layer K/V, head-major (Hkv, L, D) or seq-first (L, Hkv, D); grows by doubling."""

    def __init__(self, n_layers: int, n_kv: int, head_dim: int, capacity: int, seq_first: bool) -> None:
        self.seq_first, self.n_layers, self.n_kv, self.head_dim = seq_first, n_layers, n_kv, head_dim
        self.capacity = 0
        self.k: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.reserve(capacity)

    def _shape(self, length: int) -> tuple[int, int, int]:
        return (length, self.n_kv, self.head_dim) if self.seq_first else (self.n_kv, length, self.head_dim)

    def reserve(self, length: int) -> None:
        if length <= self.capacity:
            return
        new_cap = max(length, 2 * self.capacity, 64)
        axis = 0 if self.seq_first else 1
        for store in (self.k, self.v):
            for i in range(self.n_layers):
                grown = np.zeros(self._shape(new_cap), np.float32)
                if i < len(store):
                    old = store[i]
                    if self.seq_first:
                        grown[: old.shape[axis]] = old
                    else:
                        grown[:, : old.shape[axis]] = old
                    store[i] = grown
                else:
                    store.append(grown)
        self.capacity = new_cap

    def write(self, layer: int, start: int, k: np.ndarray, v: np.ndarray) -> None:
        """k, v in the cache's own layout, covering positions [start, start + n)."""
        n = k.shape[0 if self.seq_first else 1]
        self.reserve(start + n)
        if self.seq_first:
            self.k[layer][start : start + n] = k
            self.v[layer][start : start + n] = v
        else:
            self.k[layer][:, start : start + n] = k
            self.v[layer][:, start : start + n] = v

    def read(self, layer: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """Views (Hkv, length, D) of the first `length` positions."""
        if self.seq_first:
            return self.k[layer][:length].transpose(1, 0, 2), self.v[layer][:length].transpose(1, 0, 2)
        return self.k[layer][:, :length], self.v[layer][:, :length]


class RopeTables:
    """The cos/sin tables a pipeline's rope kernel reads, built on the host from `inv_freq`: per position
    (`positions`), one row per (head, position) in the pipeline's activation layout (`rows`), and Q rows then
    K rows for the fused single call (`stacked`). `resident` (weight residency): the per-position table is
    built once and grown by doubling, and the row tables outlive a prefill; otherwise each prefill rebuilds."""

    def __init__(self, inv_freq: np.ndarray, n_heads: int, n_kv_heads: int, *, resident: bool,
                 seq_first: bool, scale: float = 1.0, max_positions: int | None = None) -> None:
        self.inv_freq, self.n_heads, self.n_kv_heads = inv_freq, n_heads, n_kv_heads
        self.scale, self.max_positions = scale, max_positions
        self.resident, self.seq_first = resident, seq_first
        self._table: tuple[np.ndarray, np.ndarray] | None = None  # the resident per-position table
        self._rows: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def new_prefill(self) -> None:
        """A prefill starts: the row tables are kept only when resident."""
        if not self.resident:
            self._rows.clear()

    def positions(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """cos/sin (stop-start, D/2) for positions [start, stop); slices of the resident table when resident.
        Positions past `max_positions` (LongRoPE's original_max_position_embeddings: the long factors, which
        are not implemented) are refused."""
        if self.max_positions is not None and stop > self.max_positions:
            raise ValueError(f"position {stop - 1} is past original_max_position_embeddings {self.max_positions}: "
                             "LongRoPE's long factors are not implemented")
        if not self.resident:
            return rope_lut(self.inv_freq, start, stop, self.scale)
        if self._table is None or len(self._table[0]) < stop:
            size = max(stop, 256, 2 * len(self._table[0]) if self._table is not None else 0)
            if self.max_positions is not None:
                size = min(size, self.max_positions)
            self._table = rope_lut(self.inv_freq, 0, size, self.scale)
        return self._table[0][start:stop], self._table[1][start:stop]

    def rows(self, start: int, n: int, heads: int) -> tuple[np.ndarray, np.ndarray]:
        """cos/sin expanded to one row per (head, position) in the pipeline's activation layout."""
        key = (start, n, heads)
        if key in self._rows:
            return self._rows[key]
        cos, sin = self.positions(start, start + n)
        if self.seq_first:  # rows ordered (position, head)
            out = np.repeat(cos, heads, axis=0), np.repeat(sin, heads, axis=0)
        else:  # rows ordered (head, position)
            out = np.tile(cos, (heads, 1)), np.tile(sin, (heads, 1))
        if n > 1:  # reused by every layer of this prefill (and by later prefills when resident)
            self._rows[key] = out
        return out

    def stacked(self, start: int, S: int) -> tuple[np.ndarray, np.ndarray]:
        """cos/sin for Q rows then K rows (the fused single RoPE call)."""
        key = ("stacked", start, S)
        if key in self._rows:
            return self._rows[key]
        cq, sq = self.rows(start, S, self.n_heads)
        ck, sk = self.rows(start, S, self.n_kv_heads)
        out = np.concatenate([cq, ck]), np.concatenate([sq, sk])
        if S > 1:
            self._rows[key] = out
        return out


def layer_rope_tables(c, folder_scaling: dict[str, Any] | None, *, resident: bool, seq_first: bool) -> list[RopeTables]:
    """Each layer's RoPE tables of config `c` (one per distinct theta / scaling: Gemma3's local and global),
    over the rotary width (the leading `rotary_dim` of a partial rotary). A config recorded before the
    architecture description takes its scaling from the folder (`folder_scaling`), as it did."""
    tables: dict = {}
    rd, arch = c.rotary_dim, c.arch
    for layer in arch.layers:
        if layer.rope not in tables:
            scaling = layer.rope.scaling_dict() if c.description is not None else folder_scaling
            tables[layer.rope] = RopeTables(
                rope_inv_freq(rd, layer.rope.theta, scaling), c.n_heads, c.n_kv_heads, resident=resident,
                seq_first=seq_first, scale=float((scaling or {}).get("attention_factor", 1.0)),
                max_positions=arch.rope_max_positions)
    return [tables[layer.rope] for layer in arch.layers]
