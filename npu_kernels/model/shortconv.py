"""LFM2's gated short-convolution block on an executor's leaf kernels (the CONV mixer of
`npu_kernels.model.description`), with the convolution state carried from prefill to decode.

As mlir-air's lfm2_1_2b_q4nx runs it (Xilinx/mlir-air programming_examples/llms/lfm2_1_2b_q4nx/
lfm2_1_2b_q4nx_prefill.py at 2b09ca0a, `run_conv_block` and `Lfm2Q4nxPrefill.prefill`; README.md at 78aadcff
"Architecture" and "The prefill hands the decode TWO regions"):

  prefill  rmsnorm(operator_norm) -> in_proj gemm (E -> 3E; columns B | C | x) -> h = B * x (eltwise_mul)
           -> conv1d over [zero pad | h] (causality is the left pad, not a mask) -> y = C * conv (eltwise_mul)
           -> out_proj gemm -> residual add -> the MLP tail the attention layers share (o_ffn serves both);
  state    the last taps - 1 rows of the PRE-convolution h at the REAL end of the prompt (row n - 1, not the
           padded end), zero rows in front when the prompt is shorter than that;
  decode   the same block at one row: conv1d over [carried state | h] (the Conv1D page: "prefill and decode are
           the same kernel with a different pad"), the new state the last taps - 1 rows of that window;
           projections as GEMVs. mlir-air runs the decode as one fused dispatch whose kernels branch on the
           layer type; its in-kernel numerics are not published, so the standalone kernels stand for them here.

`ShortConvMixer` is a mixin of `npu_kernels.model.pipeline.NpuPipeline` (it uses the pipeline's `k`, `_stage`,
`_gemv`, `_key`, `_residual`, `_mlp`, `config`, `weights`); `npu_kernels.model.faults` overrides `_conv_fed`,
`_conv_window` and `_conv_taps` for the drills (a look-ahead convolution, a state not carried, reversed taps).
"""

from __future__ import annotations

import numpy as np


class ShortConvMixer:
    """The CONV layers of a hybrid model; the state lives in `self._conv_state` (layer -> (taps - 1, E))."""

    _conv_state: dict[int, np.ndarray]

    def conv_state(self, layer: int) -> np.ndarray | None:
        """The carried state of a CONV layer after the last prefill / decode step (None: never run)."""
        return getattr(self, "_conv_state", {}).get(layer)

    def _conv_taps(self, layer: int) -> np.ndarray:
        """(taps, E) tap-major, oldest tap first (mlir-air's host transposes HF's (E, 1, taps) once at load)."""
        return self.weights.layers[layer].conv_w

    def _conv_window(self, layer: int, h: np.ndarray, decode: bool) -> np.ndarray:
        """The conv1d input: taps - 1 pad rows then h. The pad is zeros at a prefill, the carried state at a
        decode step."""
        halo = self.config.arch.conv_taps - 1
        pad = self._conv_state[layer] if decode else np.zeros((halo, h.shape[1]), np.float32)
        return np.concatenate([pad, h], axis=0)

    def _conv_fed(self, window: np.ndarray) -> np.ndarray:
        """What the conv1d kernel reads: the window itself (a fault shifts it)."""
        return window

    def _keep_state(self, layer: int, window: np.ndarray, n_real: int) -> None:
        """The last taps - 1 rows of the window ending at real row n_real - 1 (the window holds the pad first)."""
        halo = self.config.arch.conv_taps - 1
        self._conv_state[layer] = np.array(window[n_real : n_real + halo])

    def _conv_layer(self, layer: int, x: np.ndarray, n_real: int) -> np.ndarray:
        """One short-convolution block over x (S, E); `n_real` real rows (prefill) or 1 (a decode step)."""
        c, lw, k = self.config, self.weights.layers[layer], self.k
        decode = self._phase == "decode"
        if not decode and not hasattr(self, "_conv_state"):
            self._conv_state = {}
        E, mm = c.emb_dim, "gemv" if decode else "gemm"
        with self._stage("attn_norm", "rmsnorm"):
            h = k.rmsnorm(x, lw.attn_norm, c.rms_norm_eps)
        with self._stage("conv_in_proj", mm):
            bcx = (self._gemv(layer, "conv_in", h[0]) if decode
                   else k.gemm(h, self._gemm_w(layer, "conv_in"), static_key=self._key(f"L{layer}.conv_in")))
        b, gate_c, xx = bcx[:, :E], bcx[:, E : 2 * E], bcx[:, 2 * E :]
        with self._stage("conv_gate_in", "eltwise_mul"):
            g = k.eltwise_mul(np.ascontiguousarray(b), np.ascontiguousarray(xx))  # h = B * x
        window = self._conv_window(layer, g, decode)
        with self._stage("conv1d", "conv1d"):
            conv = k.conv1d(self._conv_fed(window), self._conv_taps(layer))
        self._keep_state(layer, window, 1 if decode else n_real)
        with self._stage("conv_gate_out", "eltwise_mul"):
            y = k.eltwise_mul(np.ascontiguousarray(gate_c), conv)  # y = C * conv(h)
        with self._stage("o_proj", mm):
            o = (self._gemv(layer, "conv_out", y[0]) if decode
                 else k.gemm(y, self._gemm_w(layer, "conv_out"), static_key=self._key(f"L{layer}.conv_out")))
        x = self._residual("attn_residual", x, o, decode)  # o_ffn: out_proj lands where attention output would
        return self._mlp(layer, x)
