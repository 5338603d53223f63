"""The 4-bit kernels and shapes of an on-device 4-bit (Q4NX) deployment, as mlir-air's llama32_1b_q4nx runs it.

`q4nx_device_rows(config) -> list[Q4Row]`, which `npu_kernels.model.plan.plan(..., weights="q4nx-device")` puts in
place of the bf16 decode GEMVs (and beside the bf16 prefill rows, which stay as they are):

  load     dequant_q4nx (M = out, K = in) per distinct projection shape: the prefill's weights are dequantised
           on the NPU into resident bf16 BOs (llama32_1b_q4nx_prefill.py `device_dequant`: DequantEngine at
           (DQ, D), (DK, D), (INTER, D), (D, INTER); dequant_q4nx.py@0d63308 `DequantEngine(N_out, K)`)
  prefill  the bf16 GEMMs, norms, RoPE, flash attention of the bf16 plan, unchanged (llama32_1b_q4nx/README.md
           @137ff7c: "dequant Q4NX->bf16, op-by-op bf16 GEMM / RMSNorm / RoPE / SwiGLU / causal-GQA flash
           attention all on the NPU with resident weight BOs")
  decode   gemv_q4nx per projection (Q H*D x E, K/V Hkv*D x E, O E x H*D, Gate/Up F x E, Down E x F) and the
           LM head over the vocabulary padded to whole emb_dim-row blocks (q4nx_requant.py@a75ea2e: the tied
           embed_tokens re-quantised to the same 4-bit layout), all inside the ONE fused decode dispatch
           (fused_decode/README.md@597d7ff). The GEMV's 32 x 256 q4k block needs M % 32 == 0 and K % 256 == 0:
           a dimension that is not is zero-padded (zero columns, zero codes, scale/min 0: exact), and the row
           says so in `workarounds` and a warning.

Plain data; plan.py turns each row into a planned, tile-checked, registry-first row like every other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from npu_kernels.model.config import ModelConfig

Q4_ROW_BLOCK, Q4_COL_BLOCK = 32, 256  # proj_qmm.cc Q4NX_ROW_BLOCK_SIZE / Q4NX_COL_BLOCK_SIZE
Q4_GROUP = 32  # dequant_q4nx.cc DIM_GS


@dataclass
class Q4Row:
    kernel: str
    shape: dict[str, Any]
    phase: str  # "load" | "decode"
    names: list[str]
    suffix: str
    warnings: list[str] = field(default_factory=list)
    workarounds: dict[str, Any] = field(default_factory=dict)


def _up(n: int, step: int) -> int:
    return -(-n // step) * step


def padded_shape(kernel: str, M: int, K: int) -> tuple[dict[str, int], list[str], dict[str, Any]]:
    """(shape, warnings, workarounds): (M, K) zero-padded to whole 32 x 256 q4k blocks (gemv_q4nx) or whole
    32-column groups (dequant_q4nx)."""
    rows, cols = (Q4_ROW_BLOCK, Q4_COL_BLOCK) if kernel == "gemv_q4nx" else (1, Q4_GROUP)
    Mp, Kp = _up(M, rows), _up(K, cols)
    if (Mp, Kp) == (M, K):
        return {"M": M, "K": K}, [], {}
    warn = (f"{M}x{K} is not a whole number of {rows}x{cols} Q4NX blocks: zero-padded to {Mp}x{Kp} (zero columns, "
            "zero codes, zero scale and min: the padded part adds exactly 0)")
    return {"M": Mp, "K": Kp}, [warn], {"pad_q4nx_to": {"M": Mp, "K": Kp}, "logical": {"M": M, "K": K}}


def q4nx_device_rows(c: ModelConfig) -> list[Q4Row]:
    """The load-time dequant rows and the decode's 4-bit GEMV rows (module docstring)."""
    E, H, Hkv, D, F = c.emb_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    projections = [("Q", H * D, E), ("K/V", Hkv * D, E), ("O", E, H * D), ("Gate/Up", F, E), ("Down", E, F)]
    rows = []
    for kernel, phase in (("dequant_q4nx", "load"), ("gemv_q4nx", "decode")):
        for name, M, K in projections:
            shape, warnings, workarounds = padded_shape(kernel, M, K)
            rows.append(Q4Row(kernel, shape, phase, [name], "proj", warnings, workarounds))
    vocab = _up(c.vocab_size, E)
    shape, warnings, workarounds = padded_shape("gemv_q4nx", vocab, E)
    head = Q4Row("gemv_q4nx", shape, "decode", ["LM head"], "", warnings, workarounds)
    if vocab != c.vocab_size:
        head.warnings.insert(0, f"vocab {c.vocab_size} padded with {vocab - c.vocab_size} zero rows to {vocab} "
                                f"(whole {E}-row blocks, VOCAB_SIZE_PADDED_FULL): the padded logits are discarded")
        head.workarounds.setdefault("pad_vocab_to", vocab)
    head.workarounds["tied"] = bool(c.tie_word_embeddings)
    rows.append(head)
    return rows
