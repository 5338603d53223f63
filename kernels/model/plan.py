"""The (kernel, shape) list a model needs, derived from its config exactly as NUMERICS.md's table says.

`plan(config, target="npu2", seq=2048) -> list[PlannedKernel]`: prefill runs at `seq` (prompts padded),
decode at batch 1. With E = emb, H = heads, Hkv = kv heads, D = head_dim, F = hidden, V = vocab:

  GEMM (M x K x N, bf16 out)  prefill  Q seq x E x H*D, K/V seq x E x Hkv*D, O seq x H*D x E,
                                        Gate/Up seq x E x F, Down seq x F x E
  GEMV (M x K)                decode   Q H*D x E, K/V Hkv*D x E, O E x H*D, Gate/Up F x E, Down E x F,
                                        LM head per 16384-row vocabulary partition: 16384 x E
  RMSNorm (M x N)             prefill  seq x E; Qwen3 (qk_norm) q/k norm: (H*seq) x D and (Hkv*seq) x D
  RoPE (rows x D)             prefill  Q H*seq x D, K Hkv*seq x D;  decode  Q H x D, K Hkv x D
  FlashAttention              prefill  seq x seq, dk = dv = D, heads H / Hkv, causal
  Eltwise add (N)             prefill  seq*E (the two residual adds of a layer)
  SiLU-and-Mul (N)            prefill  seq*F

Identical (kernel, shape, phase) rows merge into one, their roles joined by "/" ("Q/O proj" when
H*D == E). Qwen3's q/k norm: NUMERICS says "seq x D per head (heads as rows)"; the plan takes that
literally as the one call the pipeline makes - every head's seq x D block stacked as rows, i.e.
(H*seq) x D for q and (Hkv*seq) x D for k (the same convention as RoPE's rows). A vocabulary that is not a
multiple of 16384 runs a shorter last partition on the same datapath; the row carries a warning saying so.
Each row carries its tile plan (kernels.tiles) and the warnings of both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernels.model.config import ModelConfig
from kernels.tiles import TilePlan, plan_tile

LM_HEAD_PARTITION = 16384
DEFAULT_SEQ = 2048


@dataclass
class PlannedKernel:
    kernel: str
    shape: dict[str, Any]
    role: str
    phase: str  # "prefill" | "decode"
    tile: TilePlan
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel,
            "shape": dict(self.shape),
            "role": self.role,
            "phase": self.phase,
            "tile": self.tile.to_json(),
            "warnings": list(self.warnings),
        }


@dataclass
class _Row:
    kernel: str
    shape: dict[str, Any]
    phase: str
    names: list[str]  # role names, merged with "/"
    suffix: str  # shared role noun ("proj", "rope", ...)
    warnings: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple:
        return (self.kernel, tuple(sorted(self.shape.items())), self.phase)

    @property
    def role(self) -> str:
        names = "/".join(self.names)
        return f"{names} {self.suffix}".strip() if self.suffix else names


def _rows(c: ModelConfig, seq: int) -> list[_Row]:
    E, H, Hkv, D, F, V = c.emb_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size
    g = lambda M, K, N: {"M": M, "K": K, "N": N}  # noqa: E731
    rows = [
        _Row("gemm", g(seq, E, H * D), "prefill", ["Q"], "proj"),
        _Row("gemm", g(seq, E, Hkv * D), "prefill", ["K/V"], "proj"),
        _Row("gemm", g(seq, H * D, E), "prefill", ["O"], "proj"),
        _Row("gemm", g(seq, E, F), "prefill", ["Gate/Up"], "proj"),
        _Row("gemm", g(seq, F, E), "prefill", ["Down"], "proj"),
        _Row("gemv", {"M": H * D, "K": E}, "decode", ["Q"], "proj"),
        _Row("gemv", {"M": Hkv * D, "K": E}, "decode", ["K/V"], "proj"),
        _Row("gemv", {"M": E, "K": H * D}, "decode", ["O"], "proj"),
        _Row("gemv", {"M": F, "K": E}, "decode", ["Gate/Up"], "proj"),
        _Row("gemv", {"M": E, "K": F}, "decode", ["Down"], "proj"),
    ]
    head = min(V, LM_HEAD_PARTITION)
    lm = _Row("gemv", {"M": head, "K": E}, "decode", ["LM head partition"], "")
    if V > LM_HEAD_PARTITION and V % LM_HEAD_PARTITION:
        full, rest = divmod(V, LM_HEAD_PARTITION)
        lm.warnings.append(f"vocab {V} = {full}x{LM_HEAD_PARTITION} + {rest}: the last partition runs {rest} rows "
                           "on the same datapath")
    rows.append(lm)
    rows.append(_Row("rmsnorm", {"M": seq, "N": E}, "prefill", ["attn/ffn/final"], "norm"))
    if c.qk_norm:
        rows.append(_Row("rmsnorm", {"M": H * seq, "N": D}, "prefill", ["q"], "norm (heads as rows)"))
        rows.append(_Row("rmsnorm", {"M": Hkv * seq, "N": D}, "prefill", ["k"], "norm (heads as rows)"))
    rows += [
        _Row("rope", {"rows": H * seq, "head_dim": D}, "prefill", ["Q"], "rope"),
        _Row("rope", {"rows": Hkv * seq, "head_dim": D}, "prefill", ["K"], "rope"),
        _Row("rope", {"rows": H, "head_dim": D}, "decode", ["Q"], "rope"),
        _Row("rope", {"rows": Hkv, "head_dim": D}, "decode", ["K"], "rope"),
        _Row(
            "flash_attention",
            {"lq": seq, "lk": seq, "dk": D, "dv": D, "heads_q": H, "heads_kv": Hkv, "causal": True},
            "prefill",
            ["attention"],
            "",
        ),
        _Row("eltwise_add", {"N": seq * E}, "prefill", ["attn/ffn residual"], "add"),
        _Row("silu_mul", {"N": seq * F}, "prefill", ["SwiGLU"], ""),
    ]
    return rows


def _merge(rows: list[_Row]) -> list[_Row]:
    out: dict[tuple, _Row] = {}
    for r in rows:
        hit = out.get(r.key)
        if hit is None:
            out[r.key] = r
            continue
        if hit.suffix == r.suffix:
            hit.names += [n for n in r.names if n not in hit.names]
        else:
            hit.names, hit.suffix = [hit.role, r.role], ""
        hit.warnings += [w for w in r.warnings if w not in hit.warnings]
    return list(out.values())


def plan(config: ModelConfig, target: str = "npu2", seq: int = DEFAULT_SEQ) -> list[PlannedKernel]:
    """Every (kernel, shape) `config` needs on `target`, with roles, phases, tile plans and warnings."""
    if seq <= 0:
        raise ValueError(f"seq must be positive, got {seq}")
    planned = []
    for r in _merge(_rows(config, seq)):
        tile = plan_tile(r.kernel, r.shape, target)
        planned.append(PlannedKernel(r.kernel, dict(r.shape), r.role, r.phase, tile, r.warnings + tile.warnings))
    return planned
