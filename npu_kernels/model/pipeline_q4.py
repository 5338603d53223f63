"""The decoder of an on-device 4-bit (Q4NX) deployment, as mlir-air's llama32_1b_q4nx runs it.

Prefill is the bf16 pipeline (`npu_kernels.model.pipeline`) on the bundle's weights dequantised at load (the
dequant_q4nx kernel's numbers: FP32 add of the exact product, one RNE; Phase 1 verifies the kernel on its
rows). Decode replaces every projection GEMV and the LM head with `gemv_q4nx` on the re-quantised codes
(`npu_kernels.model.q4nx_device`; q4_k.h's order and roundings in the emulated executor): fused steps (QKV,
gate/up) concatenate their rows, as q4nx_requant.py concatenates q|k|v before re-quantising (per-row groups:
the same codes). Everything else in the decode (norms, RoPE, attention, residuals) is the bf16 pipeline's.
Not modelled: the fused superkernel's own norm / residual datapath (fused_decode/README.md@597d7ff); those
steps follow the 2-ELF / 5-ELF decode the bf16 pipeline models.
"""

from __future__ import annotations

import numpy as np

from npu_kernels.model.pipeline import NpuPipeline
from npu_kernels.model.q4nx_device import DecodeWeights
from npu_kernels.numerics.executors.base import Fp32Executor, MixedExecutor


class Q4DecodeMixin:
    """Overrides a pipeline's decode GEMVs and decode LM head with the 4-bit GEMV on `self.decode`."""

    decode: DecodeWeights

    def _gemv(self, layer: int, name: str, x: np.ndarray) -> np.ndarray:
        codes, scale, mn = self.decode.rows(layer, name)
        return self.k.gemv_q4nx(codes, scale, mn, x, static_key=self._key(f"q4.L{layer}.{name}"))[None, :]

    def _lm_head(self, normed: np.ndarray) -> np.ndarray:
        if self._phase != "decode":
            return super()._lm_head(normed)  # the prefill's predicted position: the bf16 LM-head GEMV
        with self._stage("lm_head", "gemv_q4nx"):
            return self.k.gemv_q4nx(*self.decode.lm_head, normed, static_key=self._key("q4.lm_head"))


class Q4DevicePipeline(Q4DecodeMixin, NpuPipeline):
    """The production on-device 4-bit pipeline."""

    def __init__(self, weights, config, executor, options, decode: DecodeWeights) -> None:
        super().__init__(weights, config, executor, options)
        self.decode = decode
        self.name = f"pipeline-q4[{self.k.name}]"

    def with_fp32_kernels(self, swapped):
        return Q4DevicePipeline(self.weights, self.config, MixedExecutor(self.k, Fp32Executor(), set(swapped)),
                                self.options, self.decode)
