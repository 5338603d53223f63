"""The emulated NPU2 executor: a CPU model of the AIE2P datapath of every leaf kernel (numpy + ml_dtypes).

Every error this executor makes comes from modelling a step of the hardware datapath: number formats,
rounding modes, accumulation granularity and the approximations of the vector non-linear-function (NLF)
unit; nothing is random. docs/emulated_numerics.md holds the model with the evidence behind each choice
(mlir-air sources, the NPU2 figures of its kernel registry and `[precision]` lines); `make bench` prints
the comparison. This module is the executor and its GEMM; the other kernels' datapaths are its siblings:
`emulated_elementwise` (RMSNorm, LayerNorm, RoPE, SiLU-and-Mul, GELU, the bf16 rounding steps),
`emulated_gemv` (mv.cc's lane order), `emulated_q4` (the 4-bit dequant and GEMV), `emulated_flash` (attn_npu2.cc), `emulated_nlf` (exp2, tanh,
aie::inv) and `emulated_threads`. `npu1` (AIE2) has a native bf16 MMA: the MMA kernels skip the BFP16 step;
everything else is modelled as on NPU2.

Speed: operands are quantised once per call (weights once per `static_key`), then one float32 BLAS call;
elementwise kernels and the activation quantisation split their rows over `threads` (default 2) Python
threads, flash attention its cascade stages - numpy releases the GIL, and the split never changes a bit.
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import bfp16_quantize, f32, rne_bf16_
from npu_kernels.numerics.executors.base import Executor, bind_kernels
from npu_kernels.numerics.executors.emulated_elementwise import (
    rounded,
)
from npu_kernels.numerics.executors.emulated_nlf import EXP2_INPUT_FRAC_BITS
from npu_kernels.numerics.executors.emulated_threads import PARALLEL_MIN_ELEMENTS, default_threads, run_parallel
from npu_kernels.numerics.tiles import FUSED_CAST_MIN_MKN, default_tile

# The version of the emulated NPU2 numerics (docs/emulated_numerics.md): bump it whenever a datapath step changes
# what a kernel returns, so `ledger reverify` re-runs the Phase 1 rows measured on the previous model (npu_kernels.toolchain).
EMULATED_NUMERICS_VERSION = "emulated-npu2/4"

TARGETS = ("npu2", "npu1")
GEMM_CONTRACTS = ("f32-out", "bf16-out-high", "bf16-out-low")
GEMM_DEFAULT_TILE = {"tile_m": 64, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 128, "herd_m": 8, "herd_n": 4}


def held_bf16(x: np.ndarray) -> np.ndarray:
    """A float32 array as its upper 16 bits (uint16) when every value is a bf16 (the lower 16 bits all zero):
    half the memory, nothing lost; otherwise `x` itself."""
    bits = x.view(np.uint32)
    if (bits & np.uint32(0xFFFF)).any():
        return x
    return (bits >> np.uint32(16)).astype(np.uint16)


def widened(held: np.ndarray) -> np.ndarray:
    """`held_bf16`'s array as float32 again, bit for bit (a float32 array is returned as it is)."""
    if held.dtype != np.uint16:
        return held
    return np.left_shift(held, 16, dtype=np.uint32).view(np.float32)


def _covered(n: int, step: int) -> int:
    """How much of an axis of length n a launch grid of floor(n / step) steps covers."""
    return (n // step) * step if step > 0 else n


def _k_used(K: int, tile: dict) -> np.ndarray | None:
    """Indices of K the L2/L1 loops reach for a (possibly illegal) tile; None when all of K is reached."""
    tk2, tk1 = int(tile["tile_k_l2"]), int(tile["tile_k_l1"])
    n_l2 = K // tk2 if tk2 > 0 else 0
    per_l2 = (tk2 // tk1) * tk1 if tk1 > 0 else 0
    if n_l2 * tk2 == K and per_l2 == tk2:
        return None
    return np.concatenate([np.arange(i * tk2, i * tk2 + per_l2) for i in range(n_l2)] or [np.zeros(0, int)])


class EmulatedExecutor(Executor):
    """NPU2 (or NPU1) leaf kernels on the CPU, modelled step by step (docs/emulated_numerics.md)."""

    name = "emulated"

    def __init__(self, target: str = "npu2", *, threads: int | None = None, gemv_order: str = "mv.cc") -> None:
        """`gemv_order` "mv.cc" sums a GEMV in the kernel's own lane order (`mv_lane_sum`); "blas" sums it in
        this host's BLAS order, 10x faster and equal but for an output whose FP32 sum sits on a bf16 rounding
        boundary (gemv-2048x2048: 1 output of 2048 moves one ulp). The model pipeline asks for "blas"
        (`npu_kernels.backends.in_process`); kernel runs, the registry and the precision lines use "mv.cc"."""
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
        if gemv_order not in ("mv.cc", "blas"):
            raise ValueError(f"unknown gemv_order {gemv_order!r}; expected mv.cc or blas")
        self.gemv_order = gemv_order
        super().__init__(target)
        self.bfp16 = target == "npu2"
        self.threads = threads if threads is not None else default_threads()
        self._weights: dict[tuple, tuple[tuple[int, ...], np.ndarray]] = {}

    def describe(self) -> dict:
        return {
            "executor": self.name,
            "target": self.target,
            "mma_operands": "bfp16 (8 along K, 8-bit mantissa, RNE, +128 bumps the block exponent)" if self.bfp16 else "bf16 (native MMA)",
            "rounding": "conv_even in mm.cc/mv.cc/attn_npu2.cc, floor (AIE default) elsewhere",
            "gemv_order": self.gemv_order,
            "nlf": f"exp2: input truncated to {EXP2_INPUT_FRAC_BITS} fraction bits, 2^i*(1+f) bf16; "
            "tanh = 1 - 2/(1+exp2(2 log2e |x|))",
        }

    def clear_cache(self) -> None:
        self._weights.clear()

    # --- weight residency --------------------------------------------------------------------------------

    def _static(self, kind: str, arr, static_key, make) -> np.ndarray:
        """`make(arr)` cached under (kind, static_key); the cached form never differs from a fresh one."""
        if static_key is None:
            return make(arr)
        key = (kind, static_key)
        shape = tuple(np.shape(arr))
        hit = self._weights.get(key)
        if hit is not None:
            if hit[0] != shape:
                raise ValueError(f"static_key {static_key!r} was cached with shape {hit[0]}, now given {shape}")
            return hit[1]
        value = make(arr)
        self._weights[key] = (shape, value)
        return value

    def _gemm_operand(self, b, static_key) -> np.ndarray:
        """GEMM's B as the matrix unit sees it (BFP16 blocks along K), C-contiguous whatever `b`'s layout (a
        model pipeline hands its weights as transposed views of the rows it holds, npu_kernels.model.weights):
        the same numbers, summed in the same BLAS order. Resident (a `static_key`), it is held as bf16 bits:
        every BFP16 value (8-bit mantissa, block exponent >= -120) and every bf16 weight is one exactly
        (`held_bf16` keeps float32 otherwise), so widening it back for the call gives every bit again, at half
        the memory of a float32 copy (issue 48 item 3)."""
        make = lambda w: self._mma_operand(np.ascontiguousarray(w, dtype=np.float32), 0)  # noqa: E731
        if static_key is None:
            return make(b)
        return widened(self._static("gemm.b", b, static_key, lambda w: held_bf16(make(w))))

    def _mma_operand(self, x, axis: int) -> np.ndarray:
        """An MMA operand as the matrix unit sees it: BFP16 blocks along the reduction axis (NPU2)."""
        return bfp16_quantize(x, axis=axis) if self.bfp16 else f32(x)

    # --- GEMM / GEMV -------------------------------------------------------------------------------------

    def gemm(self, a, b, *, contract: str = "bf16-out-high", tile=None, static_key=None):
        if contract not in GEMM_CONTRACTS:
            raise ValueError(f"unknown gemm contract {contract!r}; expected one of {', '.join(GEMM_CONTRACTS)}")
        with self.timer.time("gemm"):
            a = f32(a)
            M, K = a.shape
            if np.shape(b)[0] != K:
                raise ValueError(f"gemm: a is {a.shape} but b is {np.shape(b)}")
            N = np.shape(b)[1]
            t = {**self._gemm_default_tile(M, K, N), **(tile or {})} if tile else GEMM_DEFAULT_TILE
            qb = self._gemm_operand(b, static_key)
            qa = self._rows(lambda x: self._mma_operand(x, 1), [a]) if self.bfp16 else a  # blocks along K
            if tile is not None:
                used = _k_used(K, t)
                if used is not None:  # an illegal K tiling: the loops never reach part of K
                    qa, qb = qa[:, used], qb[used]
            if contract == "bf16-out-low":
                c = self._accumulate_bf16(qa, qb, int(t["tile_k_l1"]))
            else:
                c = np.matmul(qa, qb)
                if contract == "bf16-out-high":
                    c = rounded(c, "floor" if self._gemm_method(t, M, K, N) == "fused-cast" else "rne")
            if tile is not None:  # the launch grid floors M/(tile_m*herd_m) and N/(tile_n*herd_n)
                rows = _covered(M, int(t["tile_m"]) * int(t["herd_m"]))
                cols = _covered(N, int(t["tile_n"]) * int(t["herd_n"]))
                c[rows:, :] = 0.0
                c[:, cols:] = 0.0
            return c

    def _gemm_default_tile(self, M: int, K: int, N: int) -> dict:
        """The planner's tile for this shape: fills the keys a partial user tile leaves out."""
        return default_tile("gemm", {"M": M, "K": K, "N": N}, self.target)

    @staticmethod
    def _gemm_method(t: dict, M: int, K: int, N: int) -> str:
        method = t.get("method") or "auto"
        if method == "auto":
            return "fused-cast" if M * K * N >= FUSED_CAST_MIN_MKN else "drain"
        if method not in ("fused-cast", "drain"):
            raise ValueError(f"unknown gemm method {method!r} (auto | fused-cast | drain)")
        return method

    @staticmethod
    def _accumulate_bf16(qa: np.ndarray, qb: np.ndarray, tile_k_l1: int) -> np.ndarray:
        """Direct-codegen bf16 GEMM: the partial sum is rounded to bf16 (RNE) after every L1 K tile."""
        M, K = qa.shape
        c = np.zeros((M, qb.shape[1]), np.float32)
        part = np.empty_like(c)
        step = max(1, tile_k_l1)
        for k0 in range(0, K, step):
            np.matmul(qa[:, k0 : k0 + step], qb[k0 : k0 + step], out=part)
            c += part
            rne_bf16_(c)
        return c

    # --- row-parallel kernels (each row / element independent) ---------------------------------------

    def _rows(self, fn, split: list, *shared):
        """fn(*split, *shared) on up to `threads` slices of the leading axis of every `split` array, in
        parallel (bit-identical: these kernels treat rows independently)."""
        split = [f32(a) for a in split]
        n = split[0].shape[0] if split[0].ndim else 0
        if self.threads <= 1 or n < 2 or split[0].size < PARALLEL_MIN_ELEMENTS:
            return fn(*split, *shared)
        parts = min(self.threads, n)
        bounds = [n * i // parts for i in range(parts + 1)]
        results: list = [None] * parts

        def job(i):
            lo, hi = bounds[i], bounds[i + 1]
            results[i] = fn(*[a[lo:hi] for a in split], *shared)

        run_parallel([lambda i=i: job(i) for i in range(parts)], parts)
        return np.concatenate(results, axis=0)

    # --- normalisations ----------------------------------------------------------------------------------

    # --- elementwise -------------------------------------------------------------------------------------


# the kernels of the registry (npu_kernels.numerics.kernels): each module declares its emulated datapath
bind_kernels(EmulatedExecutor, "emulated")
