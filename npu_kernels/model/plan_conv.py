"""The plan rows of a hybrid model's short-convolution layers (LFM2; the CONV mixer of npu_kernels.model.description),
as mlir-air's lfm2_1_2b_q4nx runs them (programming_examples/llms/lfm2_1_2b_q4nx/lfm2_1_2b_q4nx_prefill.py at
2b09ca0a, `compile_all_kernels` "conv block leaves (rms_op, in_proj, gate_mul, conv1d)" and `run_conv_block`):

  GEMM         prefill  in_proj seq x E x 3E (columns B | C | x), out_proj seq x E x E (the o_ffn ELF's O GEMM)
  GEMV         decode   in_proj 3E x E, out_proj E x E
  eltwise_mul  prefill  seq*E, twice per layer (h = B * x; y = C * conv(h)): `gate_mul`, built at (seq, conv_dim)
               decode   E
  conv1d       prefill  seq x E (the pad the zero start, 3 taps); decode 1 x E against the carried state

`conv_rows(config, seq)` returns (kernel, shape, phase, role names, role noun) tuples; npu_kernels.model.plan turns
them into its rows (and merges the ones an attention layer plans at the same shape). None for a model without
CONV layers."""

from __future__ import annotations

from typing import Any

from npu_kernels.model.config import ModelConfig


def conv_rows(c: ModelConfig, seq: int) -> list[tuple[str, dict[str, Any], str, list[str], str]]:
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
