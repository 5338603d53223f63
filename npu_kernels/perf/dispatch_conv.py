"""The dispatch of a hybrid model's short-convolution layers (LFM2; the CONV mixer of npu_kernels.model.description):
the leaf launches in front of the MLP tail the attention layers share, and the host work between them.

Prefill, one layer, as mlir-air's lfm2_1_2b_q4nx runs it (programming_examples/llms/lfm2_1_2b_q4nx/
lfm2_1_2b_q4nx_prefill.py at 2b09ca0a, `run_conv_block`; the ELFs of `compile_all_kernels`):
  rms_op    RMSNorm (S, E)
  in_proj   GEMM S x E x 3E on the high-precision *drain* tier at tile_m 32 ("in_proj runs on the registry's OTHER
            high-precision bf16-out tier, drain ... Fused-cast does not place as a standalone ELF at this shape")
  host      B | C | x split into contiguous arrays (three strided copies), the pad prepended (a copy of h)
  gate_mul  eltwise_mul S*E (h = B * x)
  conv1d    conv1d (S + 2, E) -> (S, E) at herd 8x1, tile_s 8 ("the measured-best Conv1D config")
  gate_mul  eltwise_mul S*E (y = C * conv)
  then the o_ffn tail the attention layers run ("the SAME o_ffn ELF serves BOTH block types"), y in place of the
  attention output.
Decode: mlir-air runs the whole 4-bit decode as one fused dispatch whose kernels branch on the layer type
(README.md at 78aadcff "Fused per-token decode"); for the bf16 decode this model prices, a conv layer is one
call of the same leaves at one row (`rms_conv_gemv`, a name of ours: mlir-air has no bf16 conv decode ELF)
followed by the decode FFN tail of the attention layers; no decode attention on the host.
"""

from __future__ import annotations

from typing import Any

BF16 = 2
CONV1D_TILE = {"tile_s": 8, "herd_x": 8, "herd_y": 1}  # lfm2_1_2b_q4nx_prefill.py `build_conv1d(seq_len, conv_dim, 8, ...)`
IN_PROJ_TILE = {"method": "drain", "tile_m": 32}  # gemm_method_spec("drain"): tile_m 32


def conv_prefill_front(c, S: int, launch) -> tuple[list[list[Any]], list[str], dict[str, int], set[str]]:
    """The launch groups before the shared tail, their ELF names, buffer sizes and static buffers; `launch`
    builds a npu_kernels.perf.dispatch.Launch (kernel, shape, role, inputs, outputs, tile)."""
    E = c.emb_dim
    size = {"x": S * E, "normed": S * E, "bcx": 3 * S * E, "h": S * E, "h_pad": (S + 2) * E, "conv": S * E,
            "attn_out": S * E, "w_norm": E, "w_in": 3 * E * E, "w_conv": 3 * E}
    static = {"w_norm", "w_in", "w_conv"}
    groups = [[launch("rmsnorm", {"M": S, "N": E}, "conv RMSNorm (operator_norm)", ("x", "w_norm"), ("normed",))],
              [launch("gemm", {"M": S, "K": E, "N": 3 * E}, "conv in_proj (B | C | x)", ("normed", "w_in"), ("bcx",),
                      IN_PROJ_TILE)],
              [launch("eltwise_mul", {"N": S * E}, "gate h = B * x", ("bcx",), ("h",))],
              [launch("conv1d", {"seq": S, "C": E}, "causal depthwise conv (zero pad)", ("h_pad", "w_conv"), ("conv",),
                      CONV1D_TILE)],
              [launch("eltwise_mul", {"N": S * E}, "gate y = C * conv", ("bcx", "conv"), ("attn_out",))]]
    return groups, ["rms_op", "in_proj", "gate_mul", "conv1d", "gate_mul"], size, static


def conv_decode_front(c, launch, gemv_tile) -> tuple[list[list[Any]], list[str], dict[str, int], set[str]]:
    E = c.emb_dim
    size = {"x": E, "normed": E, "bcx": 3 * E, "h": E, "state": 3 * E, "conv": E, "attn_out": E, "w_norm": E,
            "w_in": 3 * E * E, "w_conv": 3 * E}
    static = {"w_norm", "w_in", "w_conv"}
    group = [launch("rmsnorm", {"M": 1, "N": E}, "conv RMSNorm (operator_norm)", ("x", "w_norm"), ("normed",)),
             launch("gemv", {"M": 3 * E, "K": E}, "conv in_proj", ("normed", "w_in"), ("bcx",), gemv_tile(3 * E, E)),
             launch("eltwise_mul", {"N": E}, "gate h = B * x", ("bcx",), ("h",)),
             launch("conv1d", {"seq": 1, "C": E}, "conv against the carried state", ("state", "h", "w_conv"), ("conv",)),
             launch("eltwise_mul", {"N": E}, "gate y = C * conv", ("bcx", "conv"), ("attn_out",))]
    return [group], ["rms_conv_gemv"], size, static


def conv_prefill_host_bytes(c, S: int) -> dict[str, int]:
    """The host copies of one conv layer's prefill: the B | C | x split and the padded conv input."""
    E = c.emb_dim
    return {"conv B|C|x split": 3 * S * E * BF16, "conv pad + state": (S + 2) * E * BF16}
