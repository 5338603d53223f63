"""The emulated NPU2 executor: a CPU model of the AIE2P datapath of every leaf kernel (numpy + ml_dtypes).

Every error this executor makes comes from modelling a step of the hardware datapath: number formats,
rounding modes, accumulation granularity and the approximations of the vector non-linear-function (NLF)
unit; nothing is random. docs/emulated_numerics.md holds the model with the evidence behind each choice
(mlir-air sources, the NPU2 figures of its kernel registry and `[precision]` lines); `make bench` prints
the comparison. This module is the executor (weight residency, the MMA operands, the row split); each kernel's
datapath is declared in its module of npu_kernels.numerics.kernels, from its siblings here: `emulated_gemm` (GEMM's
launch grid and K loops), `emulated_elementwise` (RMSNorm, LayerNorm, RoPE, SiLU-and-Mul, GELU, the bf16 rounding steps),
`emulated_gemv` (mv.cc's lane order), `emulated_q4` (the 4-bit dequant and GEMV), `emulated_flash` (attn_npu2.cc), `emulated_nlf` (exp2, tanh,
aie::inv) and `emulated_threads`. `npu1` (AIE2) has a native bf16 MMA: the MMA kernels skip the BFP16 step;
everything else is modelled as on NPU2.

Speed: operands are quantised once per call (weights once per `static_key`), then one float32 BLAS call;
elementwise kernels and the activation quantisation split their rows over `threads` (default 2) Python
threads, flash attention its cascade stages - numpy releases the GIL, and the split never changes a bit.
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import bfp16_quantize, f32, held_bf16, widened
from npu_kernels.numerics.executors.base import Executor, bind_kernels
from npu_kernels.numerics.executors.emulated_nlf import EXP2_INPUT_FRAC_BITS
from npu_kernels.numerics.executors.emulated_threads import PARALLEL_MIN_ELEMENTS, default_threads, run_parallel

# The version of the emulated NPU2 numerics (docs/emulated_numerics.md): bump it whenever a datapath step changes
# what a kernel returns, so `ledger reverify` re-runs the Phase 1 rows measured on the previous model (npu_kernels.toolchain).
EMULATED_NUMERICS_VERSION = "emulated-npu2/4"

TARGETS = ("npu2", "npu1")


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
        the same numbers, summed in the same BLAS order; a weight held as bf16 bits (uint16, `held_bf16`) is
        widened first, exactly. Resident (a `static_key`), it is held as bf16 bits:
        every BFP16 value (8-bit mantissa, block exponent >= -120) and every bf16 weight is one exactly
        (`held_bf16` keeps float32 otherwise), so widening it back for the call gives every bit again, at half
        the memory of a float32 copy (issue 48 item 3)."""
        make = lambda w: self._mma_operand(np.ascontiguousarray(widened(w)), 0)  # noqa: E731
        if static_key is None:
            return make(b)
        return widened(self._static("gemm.b", b, static_key, lambda w: held_bf16(make(w))))

    def _mma_operand(self, x, axis: int) -> np.ndarray:
        """An MMA operand as the matrix unit sees it: BFP16 blocks along the reduction axis (NPU2)."""
        return bfp16_quantize(x, axis=axis) if self.bfp16 else f32(x)

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
