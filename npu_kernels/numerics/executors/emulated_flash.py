"""Flash attention as attn_npu2.cc computes it, for the emulated executor: 64-key chunks over a cascade of up
to 4 stages, an online softmax carried in bf16, the NLF unit's exp2 and aie_api's `aie::inv` for 1/l.
Evidence: docs/emulated_numerics.md (FlashAttention).
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import bfp16_quantize, rne_bf16_, to_bf16
from npu_kernels.numerics.executors.emulated_elementwise import add_rounded, mul_rounded
from npu_kernels.numerics.executors.emulated_nlf import LOG2E, exp2_nlf, inv_bf16
from npu_kernels.numerics.executors.emulated_threads import PARALLEL_MIN_ELEMENTS, run_parallel, single_threaded_blas

FA_LKP = 64  # keys per chunk (= the MMA k depth of P.V), lkp in mlir-air
FA_CASCADE_STAGES = 4  # num_cascade_stages: the key range splits over the array's 4 rows
_BF16_LOWEST = np.float32(-3.3895313892515355e38)  # 0xff7f: the kernel's running-max floor


def fa_lkp(dk: int) -> int:
    """Keys (and dk columns) per chunk: FA_LKP, or 32 at head_dim 256 (the head-first tiling mlir-air runs for
    Gemma3, llms/shared/infra/fa_headfirst.py:49-55 at e972f29: lkp 64 overflows L1)."""
    return 32 if dk == 256 else FA_LKP


def flash_attention(q, k, v, causal: bool, q_offset: int, *, mma_operand, bfp16: bool, threads: int,
                    window: int | None = None) -> np.ndarray:
    """attn_npu2.cc's flash attention on float32 (bf16-valued) q (Hq, Lq, Dk), k (Hkv, Lk, Dk), v (Hkv, Lk, Dv):
    `mma_operand(x, axis)` is the executor's MMA operand cast (BFP16 blocks on NPU2); the cascade stages run
    on up to `threads` threads. `window`: a sliding window, keys at or before q - window masked to -inf like the
    future ones (`apply_window_mask`, attn_npu2.cc:730-741 at mlir-air e972f29: it still streams the
    out-of-window blocks and masks them)."""
    hq, lq, dk = q.shape  # (Hq, Lq, Dk)
    hkv, lk, _ = k.shape  # (Hkv, Lk, Dk)
    dv = v.shape[2]
    if hq % hkv:
        raise ValueError(f"flash_attention: {hq} query heads do not group over {hkv} kv heads")
    group = hq // hkv
    lkp = fa_lkp(dk)
    n_chunks = max(1, -(-lk // lkp))
    stages = min(FA_CASCADE_STAGES, n_chunks)
    per_stage = -(-n_chunks // stages)
    fa = _FlashState(
        # rows of a kv head's query group side by side: (Hkv, Lq, G, Dk), BFP16 blocks along Dk
        q=np.ascontiguousarray(mma_operand(q, 2).reshape(hkv, group, lq, dk).transpose(0, 2, 1, 3)),
        kt=np.ascontiguousarray(np.swapaxes(mma_operand(k, 2), 1, 2)),  # (Hkv, Dk, Lk)
        v=mma_operand(v, 1),  # (Hkv, Lk, Dv), blocks along the keys
        l2e=to_bf16(np.float32(LOG2E / math.sqrt(dk))),  # log2(e)/sqrt(dk) as a bf16 vector constant
        causal=causal,
        q_offset=q_offset,
        window=window,
        lkp=lkp,
        bfp16=bfp16,
        up=np.full((stages, hkv, lq, group), _BF16_LOWEST, np.float32),  # running max (bf16 lowest)
        sp=np.zeros((stages, hkv, lq, group), np.float32),  # running denominator
        gp=np.zeros((stages, hkv, lq, group, dv), np.float32),  # running output
    )
    work = [
        (s, range(s * per_stage, min(n_chunks, (s + 1) * per_stage))) for s in range(stages)
    ]
    # a decode step (one query row) is too little work to pay for a thread pool
    threads = threads if hq * lq * lk >= PARALLEL_MIN_ELEMENTS else 1
    run_parallel([lambda s=s, chunks=chunks: fa.run_stage(s, chunks) for s, chunks in work], threads)
    out = fa.merge(stages)  # (Hkv, Lq, G, Dv)
    return np.ascontiguousarray(out.transpose(0, 2, 1, 3)).reshape(hq, lq, dv)


class _FlashState:
    """One flash_attention call: quantised operands and the per-cascade-stage online-softmax state."""

    def __init__(self, **kw) -> None:
        self.__dict__.update(kw)

    def run_stage(self, s: int, chunks: range) -> None:
        """The K chunks of cascade stage s, in order (one stage is one row of AIE tiles)."""
        hkv, lq, group, dk = self.q.shape
        lk = self.kt.shape[2]
        qpos = self.q_offset + np.arange(lq)
        with single_threaded_blas():
            for j in chunks:
                k0, k1 = j * self.lkp, min(lk, (j + 1) * self.lkp)
                # rows that see at least one key of this chunk (earlier rows skip it: an exact identity)
                r0 = min(lq, max(0, k0 - self.q_offset)) if self.causal else 0
                if r0 >= lq:
                    continue
                rows = lq - r0
                qs = self.q[:, r0:].reshape(hkv, rows * group, dk)
                g = None  # bf16 scores (Hkv, R*G, w), accumulated over dk chunks
                for d0 in range(0, dk, self.lkp):
                    part = np.matmul(qs[:, :, d0 : d0 + self.lkp], self.kt[:, d0 : d0 + self.lkp, k0:k1])
                    g = rne_bf16_(part) if g is None else rne_bf16_(np.add(g, part, out=g))
                g = g.reshape(hkv, rows, group, k1 - k0)
                if self.causal:
                    band = min(rows, max(0, k1 - 1 - self.q_offset - r0))  # rows that still see a future key
                    if band > 0:
                        future = np.arange(k0, k1)[None, :] > qpos[r0 : r0 + band, None]  # (band, w)
                        np.copyto(g[:, :band], -np.inf, where=future[:, None, :])
                if self.window:
                    old = np.arange(k0, k1)[None, :] <= qpos[r0:, None] - self.window  # (rows, w)
                    if old.any():
                        np.copyto(g, -np.inf, where=old[None, :, None, :])
                self._chunk(g, self.v[:, k0:k1], self.up[s, :, r0:], self.sp[s, :, r0:], self.gp[s, :, r0:])

    def _chunk(self, g, v_chunk, up, sp, gp) -> None:
        """Online softmax over one chunk: g (Hkv, R, G, w) bf16 scores; up/sp (Hkv, R, G), gp (.., Dv)."""
        hkv, rows, group, w = g.shape
        m = _rowmax(g)
        np.maximum(m, _BF16_LOWEST, out=m)
        u = np.maximum(up, m)  # the new running max
        d = rne_bf16_(np.subtract(g, u[..., None], out=g))  # bf16 (G - max); masked keys stay -inf
        d *= self.l2e  # exact: bf16 x bf16 in FP32
        p = exp2_nlf(d, nonpositive=True)  # bf16 probabilities
        rowsum = _fa_rowsum(p)  # FP32 reduce, bf16 store
        r = exp2_nlf(add_rounded(up, -u, "rne") * self.l2e, nonpositive=True)  # rescale of the carried state
        gp *= r[..., None]
        rne_bf16_(gp)
        pq = bfp16_quantize(p, axis=3, nonneg=True) if self.bfp16 else p
        pv = np.matmul(pq.reshape(hkv, rows * group, w), v_chunk)  # (Hkv, R*G, Dv)
        gp += pv.reshape(gp.shape)
        rne_bf16_(gp)
        sp[...] = add_rounded(sp * r, rowsum, "rne")
        up[...] = u

    def merge(self, stages: int) -> np.ndarray:
        """Cascade merge, last stage first, in the kernel's order; then O * inv(l) (aie::inv)."""
        u_c, s_c, o_c = self.up[stages - 1], self.sp[stages - 1], self.gp[stages - 1]
        for s in range(stages - 2, -1, -1):
            u = np.maximum(u_c, self.up[s])
            rc = exp2_nlf(add_rounded(u_c, -u, "rne") * self.l2e, nonpositive=True)
            rl = exp2_nlf(add_rounded(self.up[s], -u, "rne") * self.l2e, nonpositive=True)
            o_c = add_rounded(mul_rounded(self.gp[s], rl[..., None], "rne"), mul_rounded(o_c, rc[..., None], "rne"), "rne")
            s_c = add_rounded(self.sp[s] * rl, mul_rounded(s_c, rc, "rne"), "rne")
            u_c = u
        inv = _fa_inv(s_c)  # aie::inv
        return mul_rounded(o_c, inv[..., None], "rne")


def _fa_rowsum(p: np.ndarray) -> np.ndarray:
    """sum_g: the FP32 sum of a chunk's bf16 probabilities over the keys, stored as bf16."""
    return to_bf16(p.sum(axis=-1, dtype=np.float32))


def _fa_inv(s: np.ndarray) -> np.ndarray:
    """div_gp_sp's 1/l (attn_npu2.cc:613, `aie::inv` of the bf16 sums)."""
    return inv_bf16(s)


def _rowmax(x: np.ndarray) -> np.ndarray:
    """max over the last axis by halving (faster than numpy's reduction over a short contiguous axis)."""
    while x.shape[-1] > 1 and x.shape[-1] % 2 == 0:
        h = x.shape[-1] // 2
        x = np.maximum(x[..., :h], x[..., h:])
    return x.max(axis=-1)
