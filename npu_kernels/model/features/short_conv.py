"""The gated short convolution (LFM2's Lfm2ShortConv; the CONV mixer of npu_kernels.model.description) with the
convolution state carried from prefill to decode. Everything the tool knows about it is here:

  config keys     `conv_L_cache` (the taps: the Conv1D kernel has CONV_TAPS), `conv_bias` (refused), read by
                  `problems`; the schedule (which layers convolve) is the family's (LFM2: `layer_types` /
                  `full_attn_idxs`);
  tensors         in_proj (E -> 3E, columns B | C | x), the depthwise taps, out_proj (description CONV_FIELDS),
                  their checkpoint shapes (`SHAPES`);
  reference       `ShortConvMixer`, a mixin of npu_kernels.model.pipeline.NpuPipeline;
  plan            `plan_rows` (npu_kernels.model.plan merges them with the attention layers' rows);
  perf            the conv layers' dispatch fronts (npu_kernels.perf.dispatch_conv, the performance model's room);
  bisect          `block_kernel_order`: a conv layer's kernels in the block bisect;
  decode check    `carried_state_check`: each conv layer's carried state and one decode step's logits against the
                  HF reference (Phase 2's ConvStateChecked; thresholds CONV_STATE_THRESHOLDS), whose state
                  `hf_conv_state` reads from transformers' conv cache;
  drills          conv_look_ahead, conv_state_dropped, conv_taps_reversed (npu_kernels.model.faults overrides
                  `_conv_fed`, `_conv_window` and `_conv_taps`).

As mlir-air's lfm2_1_2b_q4nx runs it (Xilinx/mlir-air programming_examples/llms/lfm2_1_2b_q4nx/
lfm2_1_2b_q4nx_prefill.py at 2b09ca0a, `run_conv_block`, `Lfm2Q4nxPrefill.prefill` and `compile_all_kernels` "conv
block leaves (rms_op, in_proj, gate_mul, conv1d)"; README.md at 78aadcff "Architecture", "The prefill hands the
decode TWO regions" and "Reading the decode gate"):

  prefill  rmsnorm(operator_norm) -> in_proj gemm (E -> 3E; columns B | C | x) -> h = B * x (eltwise_mul)
           -> conv1d over [zero pad | h] (causality is the left pad, not a mask) -> y = C * conv (eltwise_mul)
           -> out_proj gemm -> residual add -> the MLP tail the attention layers share (o_ffn serves both);
  state    the last taps - 1 rows of the PRE-convolution h at the REAL end of the prompt (row n - 1, not the
           padded end), zero rows in front when the prompt is shorter than that;
  decode   the same block at one row: conv1d over [carried state | h] (the Conv1D page: "prefill and decode are
           the same kernel with a different pad"), the new state the last taps - 1 rows of that window;
           projections as GEMVs. mlir-air runs the decode as one fused dispatch whose kernels branch on the
           layer type; its in-kernel numerics are not published, so the standalone kernels stand for them here.

Plan rows (kernel, shape, phase, role names, role noun):

  GEMM         prefill  in_proj seq x E x 3E (columns B | C | x), out_proj seq x E x E (the o_ffn ELF's O GEMM)
  GEMV         decode   in_proj 3E x E, out_proj E x E
  eltwise_mul  prefill  seq*E, twice per layer (h = B * x; y = C * conv(h)): `gate_mul`, built at (seq, conv_dim)
               decode   E
  conv1d       prefill  seq x E (the pad the zero start, 3 taps); decode 1 x E against the carried state

The carried state is the pad the next token's convolution consumes, so a state that is not carried or is taken
from the wrong rows shows in `carried_state_check` before any token does."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from npu_kernels.model.features import Feature
from npu_kernels.numerics.compare import cosine
from npu_kernels.thresholds import CONV_STATE_THRESHOLDS

KEYS = ("conv_L_cache", "conv_bias")
CONV_TAPS = 3  # the Conv1D kernel's k (kernel_registry/details/Conv1D_bf16.md at ff1efdb0)
TENSORS = ("conv_in", "conv_w", "conv_out")
# LayerWeights field -> (HF shape from the config, transposed at load) (npu_kernels.model.weights reads them)
SHAPES = {
    "conv_in": (lambda c: (3 * c.emb_dim, c.emb_dim), True),
    "conv_w": (lambda c: (c.emb_dim, 1, c.arch.conv_taps), True),  # (E, 1, k) -> (k, E) at load
    "conv_out": (lambda c: (c.emb_dim, c.emb_dim), True),
}


def problems(raw: dict[str, Any], arch: str) -> list[str]:
    """What the short-convolution block cannot run: biases, another tap count."""
    reasons = []
    if raw.get("conv_bias"):
        reasons.append(f"{arch} has convolution biases (conv_bias=true); the short-convolution block is bias-free.")
    taps = raw.get("conv_L_cache", CONV_TAPS)
    if taps != CONV_TAPS:
        reasons.append(f"{arch} convolves {taps!r} taps (conv_L_cache); the Conv1D kernel has {CONV_TAPS}.")
    return reasons


# --- the reference: the CONV layers of the pipeline --------------------------------------------------------


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


def hf_conv_state(past, layer: int) -> np.ndarray | None:
    """The reference's carried state (npu_kernels.model.hf_reference.HfRunner.conv_state): the newest taps - 1 rows
    of transformers' conv cache `past` (it keeps conv_L_cache rows, oldest first; the oldest falls out of the next
    step's window), (taps - 1, E) float32. None: no cache or no such state."""
    get = getattr(past, "get_conv_state", None)
    state = get(layer) if get is not None else None
    if state is None:
        return None
    return state[0].detach().float().numpy().T[1:].copy()  # (E, L) -> (L, E), the newest L - 1 rows


def block_kernel_order(order: tuple[str, ...]) -> tuple[str, ...]:
    """The block bisect's kernel order (npu_kernels.model.compare.block_kernel_order) for a short-convolution
    layer: its eltwise_mul and conv1d where attention uses rope and flash_attention."""
    return tuple(x for k in order for x in {"rope": ("eltwise_mul",), "flash_attention": ("conv1d",)}.get(k, (k,)))


# --- the plan rows ---------------------------------------------------------------------------------------


def plan_rows(c, seq: int) -> list[tuple[str, dict[str, Any], str, list[str], str]]:
    n = len(c.arch.conv_layers())
    if not n:
        return []
    E = c.emb_dim
    gates = f"B*x / C*conv gates ({2 * n} calls)"
    return [
        ("gemm", {"M": seq, "K": E, "N": 3 * E}, "prefill", ["conv in"], "proj"),
        ("gemm", {"M": seq, "K": E, "N": E}, "prefill", ["conv out"], "proj"),
        ("gemv", {"M": 3 * E, "K": E}, "decode", ["conv in"], "proj"),
        ("gemv", {"M": E, "K": E}, "decode", ["conv out"], "proj"),
        ("eltwise_mul", {"N": seq * E}, "prefill", [gates], ""),
        ("eltwise_mul", {"N": E}, "decode", [gates], ""),
        ("conv1d", {"seq": seq, "C": E}, "prefill", [f"short conv ({n} layers; gated on a nonzero pad)"], ""),
        ("conv1d", {"seq": 1, "C": E}, "decode", ["short conv (carried state)"], ""),
    ]


# --- the decode check of the carried state -----------------------------------------------------------------


@dataclass
class ConvStateCheck:
    layers: list[dict[str, Any]] = field(default_factory=list)  # [{layer, cosine, max_abs}]
    logits_cosine: float = float("nan")
    top1_agrees: bool = False
    thresholds: dict[str, float] = field(default_factory=lambda: dict(CONV_STATE_THRESHOLDS))
    passed: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def carried_state_check(pipeline, reference, tokens) -> ConvStateCheck:
    """Prefill both on `tokens`, compare every conv layer's carried state, then one decode step's logits (both fed
    the reference's predicted token at the next position)."""
    conv_layers = pipeline.config.arch.conv_layers()
    pre_ref = reference.prefill(tokens)
    pipeline.prefill(tokens)
    out = ConvStateCheck()
    ok = True
    for layer in conv_layers:
        ours, ref = pipeline.conv_state(layer), reference.conv_state(layer)
        cos = cosine(ours, ref)
        err = float(np.max(np.abs(np.asarray(ours, np.float64) - ref)))
        out.layers.append({"layer": layer, "cosine": cos, "max_abs": err})
        ok &= cos >= out.thresholds["state_cosine"]
    n = len(tokens)
    ours_step = pipeline.decode_step(pre_ref.top1_token, n).lm_head_logits
    ref_step = reference.decode_step(pre_ref.top1_token, n).lm_head_logits
    out.logits_cosine = cosine(ours_step, ref_step)
    out.top1_agrees = int(np.argmax(ours_step)) == int(np.argmax(ref_step))
    out.passed = bool(ok and out.logits_cosine >= out.thresholds["logits_cosine"])
    return out


FEATURE = Feature("short_conv", KEYS, present=lambda arch: bool(arch.conv_layers()),
                  faults={"conv_look_ahead": "the short convolution looks one step ahead (non-causal): y[t] reads "
                                             "h[t-1], h[t], h[t+1]",
                          "conv_state_dropped": "the prefill's convolution state is not carried: the first decode step "
                                                "pads with zeros",
                          "conv_taps_reversed": "the depthwise taps are read newest-first instead of oldest-first"},
                  tensors=TENSORS)
