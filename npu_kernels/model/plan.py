"""The (kernel, shape) list a model needs, derived from its config exactly as docs/numerics.md's table says.

`plan(config, target="npu2", seq=2048) -> list[KernelRow]`: prefill runs at `seq` (prompts padded), cut to
the model's context window (`npu_kernels.model.config.bounded_length`: a 512-context model is planned at 512), decode at
batch 1. With E = emb, H = heads, Hkv = kv heads, D = head_dim, F = hidden, V = vocab:

  GEMM (M x K x N, bf16 out)  prefill  Q seq x E x H*D, K/V seq x E x Hkv*D, O seq x H*D x E,
                                        Gate/Up seq x E x F, Down seq x F x E
  GEMV (M x K)                decode   Q H*D x E, K/V Hkv*D x E, O E x H*D, Gate/Up F x E, Down E x F,
                                        LM head per vocabulary partition P (16384 or 8192): P x E
  RMSNorm (M x N)             prefill  seq x E; Qwen3 (qk_norm) q/k norm: seq x D, once per head
  RoPE (rows x D)             prefill  Q H*seq x D, K Hkv*seq x D;  decode  Q H x D, K Hkv x D
  FlashAttention              prefill  seq x seq, dk = dv = D, heads H / Hkv, causal
  Eltwise add (N)             prefill  seq*E (the two residual adds of a layer)
  SiLU-and-Mul (N)            prefill  seq*F

Identical (kernel, shape, phase) rows merge into one, their roles joined by "/" ("Q/O proj" when
H*D == E). The shapes are the ones mlir-air's harnesses run and its registry records:

* Qwen3's q/k norm is RMSNorm seq x D per head (kernel_registry/details/RMSNorm_bf16.md:104,115: "2048x128 ...
  Qwen3-0.6B + Qwen3-1.7B QK-norm (per-head, N=head_dim)"), not every head stacked as rows.
* The LM head runs per vocabulary partition (`npu_kernels.model.config.lm_head_partition`: 16384 rows for Llama's
  `lm_head_gemv.elf`, 8 partitions; 8192 for Qwen's 151936, 19 partitions): a vocabulary that is not a
  multiple of it is padded with zero rows to whole partitions (the padded logits
  are discarded), and a vocabulary below one partition is padded up to the smallest M the GEMV tile rules
  accept, so an odd vocabulary never leaves the plan without a legal tile.
* Config-specific workarounds of mlir-air's playbooks are flagged before anything compiles, in `workarounds`:
  an emb_dim or hidden_dim that is not 1024-aligned risks buffer-descriptor exhaustion at long seq
  (phase-2-single-block-validation/SKILL.md:163-172): the row names the GQA-aware reindexed padding (phantom
  Q heads inside each KV group) or the zero padding of the hidden dim that would align it; a decode GEMV
  with K > 8160 needs `k_split` (K = k_split x inner, k_split <= 255) once it is merged into a multi-launch
  ELF (phase-5-decode-optimization/SKILL.md:129; the standalone harness runs it unsplit).
* Every row names its contract, decided here once and run by Phase 1 on every executor (emulated, torch,
  fp32, mlir-air), so the rehearsal verifies the kernel the hardware runs: the catalog's default, except a
  GEMM with K < GEMM_HIGH_PRECISION_MIN_K (1024), planned on bf16-out-low, the tier mlir-air's registry takes
  where the high-precision atol trips on near-zero references (npu_kernels.thresholds cites the rows). `method`
  and `tier` are the registry's names for it (GEMM: direct / low, else the tile's fused-cast or drain / high).
Each row carries its tile plan (npu_kernels.numerics.tiles) and the warnings of both.

Measured rows first (the playbook's rule, and mlir-air's `registry_lookup.gemm_config`, which refuses to
guess): given `registry` (a `MeasuredRows`: registry.lookup.PlanningRegistry answers from the ledger's
registry and MLIR_AIR_DIR's kernel_registry/, through the lookup `ledger registry lookup` uses), a row whose
exact shape has a measured best takes its tile, herd, method and precision tier from it, the planned tier
first and the other tier when only that one was measured; `source` says `registry: <cite>`. Only an
unseen shape takes the heuristic (`source` "heuristic"), and never on a method whose only measured rows for
that shape FAIL or carry ⚠️ (`failed_methods`): the next method is planned and a warning says why.
npu_kernels.model.plan_record rebuilds a recorded plan (PhaseStarted.plan_sources).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from npu_kernels.model.config import ModelConfig, bounded_length, lm_head_partition
from npu_kernels.model.description import GELU_TANH_GLU, SANDWICH
from npu_kernels.model.features import partial_rope, qk_norm, short_conv, sliding_window
from npu_kernels.model.plan_q4nx import q4nx_device_rows
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.row import KernelRow, row_key
from npu_kernels.numerics.tiles import TilePlan, TileRuleViolation, plan_tile
from npu_kernels.thresholds import GEMM_HIGH_PRECISION_MIN_K

DEFAULT_SEQ = 2048
BD_ALIGN = 1024  # dims not a multiple of this risk buffer-descriptor exhaustion (phase-1 SKILL.md:225)
GEMV_K_SPLIT_ABOVE = 8160  # 255 repeats x 32: above it a merged GEMV needs k_split (phase-5 SKILL.md:129)


HEURISTIC = "heuristic"
_OTHER_TIER = {"high": "low", "low": "high"}
_TIER_CONTRACT = {"high": "bf16-out-high", "low": "bf16-out-low"}


@dataclass(frozen=True)
class MeasuredChoice:
    """A measured row's configuration for one (kernel, shape): what the plan takes from it."""

    tile: dict[str, Any]  # the registry's tile keys (GEMM: tile_m, tile_k_l2, tile_k_l1, tile_n)
    cite: str  # where it was measured: "<file or ledger seq> <shape> best.<tier> <method> <figure>"
    method: str = ""  # GEMM: fused-cast | drain | direct
    tier: str = ""  # GEMM: high | low
    herd: tuple[int, ...] | None = None  # None: the full-chip herd


class MeasuredRows(Protocol):
    """What the planner asks a registry (registry.lookup.PlanningRegistry implements it)."""

    def best(self, kernel: str, shape: dict[str, Any], tier: str) -> MeasuredChoice | None:
        """The best measured row of this exact shape on `tier` ("" for single-contract kernels), or None."""

    def failed_methods(self, kernel: str, shape: dict[str, Any]) -> dict[str, str]:
        """method -> cite, for every method whose only measured rows of this shape FAIL or carry ⚠️."""


@dataclass
class _Row:
    """A row while the planner builds it: its role as names and a shared noun, so that identical rows merge
    their roles ("Q" and "O" of "proj": "Q/O proj"); `plan` makes each merged one a KernelRow."""

    kernel: str
    shape: dict[str, Any]
    phase: str
    names: list[str]  # role names, merged with "/"
    suffix: str  # shared role noun ("proj", "rope", ...)
    warnings: list[str] = field(default_factory=list)
    workarounds: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        """What identical rows share: the row's identity (`row_key`) and its phase."""
        return (*row_key(self.kernel, self.shape), self.phase)

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
    rows.append(_lm_head(V, E, c.arch.lm_head_partition))
    sandwich = c.arch.norms == SANDWICH  # Gemma3: the O and down outputs normed too, before the residual adds
    rows.append(_Row("rmsnorm", {"M": seq, "N": E}, "prefill",
                     ["attn/post-attn/pre-ffn/post-ffn/final" if sandwich else "attn/ffn/final"], "norm"))
    rows += qk_norm.plan_rows(c, seq, _Row)
    rd = partial_rope.shape_extra(c)  # a partial rotary's width
    rows += [
        _Row("rope", {"rows": H * seq, "head_dim": D, **rd}, "prefill", ["Q"], "rope"),
        _Row("rope", {"rows": Hkv * seq, "head_dim": D, **rd}, "prefill", ["K"], "rope"),
        _Row("rope", {"rows": H, "head_dim": D, **rd}, "decode", ["Q"], "rope"),
        _Row("rope", {"rows": Hkv, "head_dim": D, **rd}, "decode", ["K"], "rope"),
        *sliding_window.attention_rows(c, seq, _Row),
        _Row("eltwise_add", {"N": seq * E}, "prefill", ["attn/ffn residual"], "add"),
        (_Row("gelu", {"N": seq * F}, "prefill", ["GELU-tanh GLU (gelu, then x up)"], "")
         if c.arch.mlp == GELU_TANH_GLU else _Row("silu_mul", {"N": seq * F}, "prefill", ["SwiGLU"], "")),
    ]
    return rows + [_Row(*r) for r in short_conv.plan_rows(c, seq)]  # a hybrid's short-convolution layers (LFM2)


def _lm_head(V: int, E: int, fixed: int | None = None) -> _Row:
    """The LM-head partition row: 16384 x E, the vocabulary padded to whole partitions; below one partition,
    V padded up to the smallest M whose GEMV tile is legal."""
    P = lm_head_partition(V, fixed)
    if V >= P:
        row = _Row("gemv", {"M": P, "K": E}, "decode", ["LM head partition"], "")
        parts = -(-V // P)
        if V % P:
            padded = parts * P
            row.warnings.append(f"vocab {V} padded with {padded - V} zero rows to {parts}x{P}: "
                                "every partition runs this shape, the padded logits are discarded")
            row.workarounds["pad_vocab_to"] = padded
        row.workarounds["lm_head_partitions"] = parts
        return row
    M = V
    while M < V + 4096 and not plan_tile("gemv", {"M": M, "K": E}).legal:
        M += 1
    if not plan_tile("gemv", {"M": M, "K": E}).legal:
        M = V  # nothing legal near V: keep the shape, its tile plan says why
    row = _Row("gemv", {"M": M, "K": E}, "decode", ["LM head partition"], "")
    if M != V:
        row.warnings.append(f"vocab {V} has no legal GEMV tile: padded with {M - V} zero rows to {M} "
                            "(the padded logits are discarded)")
        row.workarounds["pad_vocab_to"] = M
    row.workarounds["lm_head_partitions"] = 1
    return row


def _alignment(c: ModelConfig, rows: list[_Row]) -> None:
    """Flag, before anything compiles, dims that are not 1024-aligned (buffer-descriptor exhaustion at long
    seq) with the padding mlir-air's playbook prescribes, and decode GEMVs whose K needs k_split once merged."""
    import math

    E, H, Hkv, D, F = c.emb_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    pad: dict[str, Any] = {}
    if E % BD_ALIGN:
        # phantom Q heads inside each KV group keep n_heads / n_kv_heads whole (SKILL.md:166-170); the head
        # count must make H'*D a multiple of 1024 and stay a multiple of Hkv
        step = math.lcm(BD_ALIGN // math.gcd(BD_ALIGN, D), Hkv)
        heads = -(-max(H, 1) // step) * step
        pad["gqa_reindexed_padding"] = {"n_heads": heads, "q_dim": heads * D, "per_kv_group": heads // Hkv}
        pad["emb_dim_unaligned"] = E
    if F % BD_ALIGN:
        pad["pad_hidden_dim_to"] = -(-F // BD_ALIGN) * BD_ALIGN
    for r in rows:
        dims = [v for k, v in r.shape.items() if k in ("K", "N") or (k == "M" and r.kernel == "gemv")]
        odd = sorted({d for d in dims if isinstance(d, int) and d % BD_ALIGN})
        if r.kernel in ("gemm", "gemv") and odd and pad:
            r.workarounds.update(pad)
            what = []
            if "gqa_reindexed_padding" in pad:
                g = pad["gqa_reindexed_padding"]
                what.append(f"GQA-aware reindexed padding: {g['n_heads']} q heads ({g['per_kv_group']} per kv "
                            f"group, phantom heads inside each group) -> q dim {g['q_dim']}")
            if "pad_hidden_dim_to" in pad:
                what.append(f"hidden dim {F} zero-padded to {pad['pad_hidden_dim_to']}")
            r.warnings.append(f"dims {', '.join(map(str, odd))} are not {BD_ALIGN}-aligned: buffer-descriptor "
                              f"exhaustion risk at long seq (flagged before compile); if the compile reports "
                              f"'Allocator exhausted available buffer descriptor IDs': {'; '.join(what)}")
        if r.kernel == "gemv" and r.shape["K"] > GEMV_K_SPLIT_ABOVE:
            K = r.shape["K"]
            split = next((s for s in range(2, 256) if K % s == 0 and K // s <= GEMV_K_SPLIT_ABOVE
                          and (K // s) % 64 == 0), None)
            r.workarounds["k_split"] = split
            r.warnings.append(f"K={K} > {GEMV_K_SPLIT_ABOVE}: merged into a multi-launch ELF the outer loop "
                              f"exceeds 255 repeats; set k_split={split} (K = {split} x {K // split if split else '?'})"
                              if split else f"K={K} > {GEMV_K_SPLIT_ABOVE} and no k_split <= 255 divides it "
                              "into 64-multiples: pad K")


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
        hit.workarounds.update(r.workarounds)
    return list(out.values())


def planned_contract(kernel: str, shape: dict[str, Any]) -> str:
    """The contract a (kernel, shape) row runs on, on every executor: the catalog's default, except a GEMM with
    K < GEMM_HIGH_PRECISION_MIN_K, which runs on bf16-out-low (npu_kernels.thresholds says why and cites the rows)."""
    if kernel == "gemm" and shape["K"] < GEMM_HIGH_PRECISION_MIN_K:
        return "bf16-out-low"
    return get_spec(kernel).default_contract


def contract_method_tier(kernel: str, contract: str, tile: dict[str, Any]) -> tuple[str, str]:
    """(method, tier) in mlir-air's registry names (details/GEMM_bf16_in_bf16_out.json `methods.<name>.tier`):
    GEMM bf16-out-low -> direct / low, f32-out -> external / high, bf16-out-high -> the tile's method / high;
    other kernels have one contract and neither."""
    if kernel != "gemm":
        return "", ""
    if contract == "bf16-out-low":
        return "direct", "low"
    if contract == "f32-out":
        return "external", "high"
    return str(tile.get("method", "")), "high"


def _measured_tile(kernel: str, choice: MeasuredChoice) -> dict[str, Any]:
    tile = dict(choice.tile)
    if kernel == "gemm":
        herd = choice.herd or (8, 4)
        tile.update(herd_m=int(herd[0]), herd_n=int(herd[1]), method=choice.method)
    return tile


def _from_registry(r: _Row, target: str, registry: MeasuredRows, contract: str):
    """(tile plan, contract, method, tier, source, notes) from the best measured row, or None (unseen shape)."""
    tier = contract_method_tier(r.kernel, contract, {})[1]
    notes = []
    choice = registry.best(r.kernel, r.shape, tier)
    if choice is None and tier in _OTHER_TIER:
        choice = registry.best(r.kernel, r.shape, _OTHER_TIER[tier])
        if choice is not None:
            notes.append(f"the registry measured this shape on the {choice.tier}-precision tier only "
                         f"(no {tier}-precision best): planned on {_TIER_CONTRACT[choice.tier]}, as measured")
    if choice is None:
        return None
    try:
        tile = plan_tile(r.kernel, r.shape, target, _measured_tile(r.kernel, choice), measured=True)
    except TileRuleViolation as e:  # a measured tile this planner's rules refuse: say so, plan the heuristic
        return HEURISTIC, [f"registry row {choice.cite} not used: its tile breaks {e}"]
    if r.kernel == "gemm":
        contract = _TIER_CONTRACT[choice.tier]
    method, tier = contract_method_tier(r.kernel, contract, tile.tile)
    return tile, contract, method, tier, f"registry: {choice.cite}", notes


def _heuristic(r: _Row, target: str, registry: MeasuredRows | None, contract: str):
    """The planner's tile, moved off any method the registry records only failing for this shape."""
    tile = plan_tile(r.kernel, r.shape, target)
    failed = registry.failed_methods(r.kernel, r.shape) if registry is not None and r.kernel == "gemm" else {}
    notes = []
    method, tier = contract_method_tier(r.kernel, contract, tile.tile)
    if method in failed:
        alternatives = [("bf16-out-high", m) for m in ("fused-cast", "drain") if m != method] + [("bf16-out-low", "direct")]
        for alt_contract, alt in alternatives:
            if alt in failed:
                continue
            try:
                alt_tile = plan_tile(r.kernel, r.shape, target, {"method": alt} if alt != "direct" else {"method": "direct"})
            except TileRuleViolation:
                continue
            notes.append(f"method {method} not planned: the registry records it only failing for this shape "
                         f"({failed[method]}); planned {alt} instead")
            tile, contract = alt_tile, alt_contract
            method, tier = contract_method_tier(r.kernel, contract, tile.tile)
            break
        else:
            notes.append(f"every method the planner knows is recorded failing for this shape ({'; '.join(failed.values())}): "
                         f"planned {method} anyway, expect it to fail")
    return tile, contract, method, tier, HEURISTIC, notes


PLAN_WEIGHTS = ("bf16", "q4nx-host", "q4nx-device")


def _weight_rows(config: ModelConfig, seq: int, weights: str) -> list[_Row]:
    """bf16 and q4nx-host (dequantised at load: the bf16 pipeline) plan the same rows; q4nx-device swaps the
    decode GEMVs for the 4-bit GEMV and adds the load-time dequant (npu_kernels.model.plan_q4nx)."""
    if weights not in PLAN_WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; expected one of {', '.join(PLAN_WEIGHTS)}")
    rows = _rows(config, seq)
    if weights != "q4nx-device":
        return rows
    rows = [r for r in rows if r.kernel != "gemv"]
    return rows + [_Row(q.kernel, q.shape, q.phase, q.names, q.suffix, q.warnings, q.workarounds)
                   for q in q4nx_device_rows(config)]


def plan(config: ModelConfig, target: str = "npu2", seq: int = DEFAULT_SEQ,
         registry: MeasuredRows | None = None, weights: str = "bf16") -> list[KernelRow]:
    """Every (kernel, shape) `config` needs on `target`, with roles, phases, tile plans, warnings and, per row,
    the source of its tile (the registry's best measured row, else the heuristic; see the module docstring).
    `weights` "q4nx-device" plans the on-device 4-bit kernels (npu_kernels.model.plan_q4nx); "bf16" and
    "q4nx-host" plan the bf16 rows."""
    if seq <= 0:
        raise ValueError(f"seq must be positive, got {seq}")
    seq = bounded_length(config, seq)  # never past the model's context window (its prompts cannot be longer)
    planned = []
    rows = _merge(_weight_rows(config, seq, weights))
    _alignment(config, rows)
    for r in rows:
        contract = planned_contract(r.kernel, r.shape)
        chosen = _from_registry(r, target, registry, contract) if registry is not None else None
        pre_notes: list[str] = []
        if chosen is not None and chosen[0] == HEURISTIC:
            pre_notes, chosen = chosen[1], None
        tile, contract, method, tier, source, notes = chosen or _heuristic(r, target, registry, contract)
        warnings = (*r.warnings, *pre_notes, *notes, *tile.warnings)
        planned.append(KernelRow(r.kernel, dict(r.shape), contract, role=r.role, phase=r.phase, warnings=warnings,
                                 workarounds=dict(r.workarounds), method=method, tier=tier, source=source
                                 ).planned_on(tile))
    return planned
