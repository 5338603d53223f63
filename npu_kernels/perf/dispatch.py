"""The dispatch plan of a deployment: which leaf launches form which XRT/ELF call, and its buffers.

`dispatch_plan(config, switches, seq, ctx) -> DispatchPlan` reproduces, from the config alone, the per-layer
ELF sequence mlir-air deploys (programming_examples/llms/<model>/ARCHITECTURE.md at e972f29; the test
tests/unit/test_dispatch_architectures.py holds each of the nine models' sequences, cited line by line).
The rules, named:

  * attention input, one ELF: RMSNorm + Q/K/V GEMM + RoPE Q/K (`rms_gemms_rope`); Qwen2's Q/K/V bias is an
    NPU broadcast-add fused after the GEMMs (`rms_qkv_bias_rope`, qwen25_0_5b/ARCHITECTURE.md:85-87), Qwen3's
    per-head QK-norm an RMSNorm slice before RoPE (`rms_qkv_qknorm_rope`, qwen3_0_6b/ARCHITECTURE.md:84-86);
    q_dim = n_heads*head_dim is decoupled from emb_dim (qwen3_0_6b/ARCHITECTURE.md:89-90: O is q_dim -> emb);
  * flash attention, its own ELF; head_dim != 64 runs head-first with host seq<->head transposes;
  * O + FFN, prefill: one merged ELF (`o_ffn`; Qwen3 `o_ffn_qwen`) when hidden_dim is 1024-aligned; above
    that L1/BD limit it splits (qwen3_4b_prefill.py:41-42: "hidden=9728 exhausts the merged ELF L1/BD
    budget"), the Down GEMM always launch 0 of its own `down_add` (K=hidden not 512-aligned gives NaN
    elsewhere, qwen25_0_5b/ARCHITECTURE.md:92-93). Up to hidden 4864 O + Gate/Up + SwiGLU still co-reside
    (`o_ffn_head`, qwen25_0_5b); beyond it `o_res_norm` alone, Gate + Up in one `gate_up` up to hidden 8960
    (qwen25_1_5b_prefill.py:388-390) and separate `gate` / `up` beyond (two direct GEMMs' L2 staging
    overflows the MemTiles, qwen25_3b_prefill.py:381-386), then `swiglu` on the NPU, then `down_add`;
  * decode: the attention-input GEMV ELF (`rms_gemv_rope`, `rms_qkv_bias_rope_gemv`,
    `rms_qkv_qknorm_rope_gemv`), attention on the CPU, then the fused `o_gemv_ffn` cascade where
    `npu_kernels.model.config.is_lean` allows it (K divisible by 512; emb_dim/512 cascade stages within the 4
    core rows), else `o_gemv`, `gate_gemv`, `up_gemv`, `down_gemv` with the M=1 glue on the host; at e972f29
    `o_gemv_ffn` is three cascade launches (O + residual, FFN RMSNorm + Gate/Up + SwiGLU, Down + residual;
    shared/builders/o_gemv_ffn_multi.py:4-16), each costed as the plain GEMV of its weights (the registry has
    no rows of the cascade kernels); `profiled=True` gives the eight-launch form the Llama-3.2-1B profile
    measured (before mlir-air #1631); every decode GEMV carries the tile its deployment builds (`decode_gemv_tile`);
  * the LM head: one ELF of ceil(V/P) GEMV partitions, P = `npu_kernels.model.config.lm_head_partition(V)`
    (prefill: the last row only, after a CPU RMSNorm).
Switches (all on = the profiled deployment): `fusion` (multi-launch merge; off: one call per launch),
`weight_residency` (static weight BOs, written once; off: every call re-writes its weights),
`intermediate_bos` (buffers a call's launches overwrite are not synced; off: they are written each call),
`seq_first` (seq-first RoPE/attention layout at head_dim 64; off: host transposes around attention).
Each buffer of a call falls in one category - write (activation in), static (weights), intermediate
(written by a launch of the call), read (an output the host or a later call needs). Pure; no timing here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from npu_kernels.model.config import is_lean, lm_head_partition
from npu_kernels.model.description import GELU_TANH_GLU, SANDWICH
from npu_kernels.model.features import partial_rope, qk_norm, sliding_window
from npu_kernels.perf.dispatch_conv import conv_decode_front, conv_prefill_front, conv_prefill_host_bytes

FFN_MERGE_ALIGN = 1024  # hidden_dim alignment the merged prefill O+FFN ELF needs
O_FFN_HEAD_MAX_HIDDEN = 4864  # O + Gate/Up + SwiGLU in one ELF up to here (qwen25_0_5b)
GATE_UP_MAX_HIDDEN = 8960  # Gate + Up in one ELF up to here (qwen25_1_5b), separate beyond (qwen25_3b, qwen3_4b)
SWITCHES = ("fusion", "weight_residency", "intermediate_bos", "seq_first")
BF16 = 2


@dataclass(frozen=True)
class Launch:
    kernel: str
    shape: dict[str, Any]
    role: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    tile: dict[str, Any] | None = None  # the tile the deployment builds it with; None: the planner's default


# The decode GEMV tiles mlir-air's deployments build (e972f29), as rules of the config:
#  * every model links one mv.o compiled at DIM_M_OUTPUT = tile_m = 8 (llama32_3b_decode.py:179, "tile_m=8 ->
#    shared mv.o"; a Down GEMV that needs less compiles its own, qwen25_3b_decode.py:278-282) and takes a
#    smaller tile_m only where the GEMV's L2 budget (herd_m*tile_m*K*2 + herd_m*tile_m*2 <= 512 KiB,
#    GEMV_bf16.md:65) forbids 8: llama32_3b_decode.py:83-85, qwen3_4b_decode.py:110-121,
#    qwen25_1_5b_decode.py:69-73; m_input = tile_m;
#  * the shared attention-input GEMV builders default to tile_m 8, m_input 4 (rms_gemv_rope_multi.py:379-381,
#    rms_qkv_qknorm_rope_multi.py:677-679; Qwen2.5's bias ELF is built at 8/8/8, qwen25_0_5b_decode.py:70-71);
#  * the LM-head partitions: tile_m 8, m_input 4, herd_m 8 (lm_head_gemv_multi.py:43-45, passed explicitly by
#    every Qwen decode, e.g. qwen25_0_5b_decode.py:157-159).
GEMV_HERD_M, GEMV_TILE_M, GEMV_L2_BYTES = 8, 8, 512 * 1024
LM_HEAD_TILE = {"herd_m": 8, "tile_m": 8, "m_input": 4}


def decode_gemv_tile(M: int, K: int, m_input: int | None = None) -> dict[str, int]:
    """The decode GEMV tile of the deployments (rules above); `m_input` where a builder fixes it."""
    for tm in (GEMV_TILE_M, 4, 2):
        if M % (GEMV_HERD_M * tm) == 0 and GEMV_HERD_M * tm * (K + 1) * BF16 <= GEMV_L2_BYTES:
            return {"herd_m": GEMV_HERD_M, "tile_m": tm, "m_input": min(tm, m_input or tm)}
    return {}  # no legal deployment tile: the planner's default


@dataclass
class ElfCall:
    elf: str
    launches: list[Launch]
    write: dict[str, int] = field(default_factory=dict)
    static: dict[str, int] = field(default_factory=dict)
    intermediate: dict[str, int] = field(default_factory=dict)
    read: dict[str, int] = field(default_factory=dict)


@dataclass
class HostOp:
    name: str
    kind: str  # "strided_copy" | "memcpy" | "embed" | "fixed" | "decode_attention" | "decode_glue"
    nbytes: int = 0


@dataclass
class DispatchPlan:
    prefill_layer: list[ElfCall]
    prefill_host_layer: list[HostOp]
    prefill_once: list[HostOp]
    lm_head: ElfCall
    decode_layer: list[ElfCall]
    decode_host_layer: list[HostOp]
    decode_once: list[HostOp]
    n_layers: int
    lean: bool
    switches: dict[str, bool]
    # a hybrid's short-convolution layers (LFM2, npu_kernels.perf.dispatch_conv): their calls and host ops per layer;
    # the calls above run on the other n_layers - n_conv_layers layers
    n_conv_layers: int = 0
    conv_prefill_layer: list[ElfCall] = field(default_factory=list)
    conv_prefill_host_layer: list[HostOp] = field(default_factory=list)
    conv_decode_layer: list[ElfCall] = field(default_factory=list)
    conv_decode_host_layer: list[HostOp] = field(default_factory=list)


def normalize_switches(switches: dict[str, bool] | Iterable[str] | str | None) -> dict[str, bool]:
    """None: all on. A dict overrides; names (list or 'a,b') mean exactly those on, the rest off."""
    if switches is None:
        return {s: True for s in SWITCHES}
    if isinstance(switches, str):
        switches = [s.strip() for s in switches.split(",") if s.strip()]
    if isinstance(switches, dict):
        unknown = set(switches) - set(SWITCHES)
        out = {s: True for s in SWITCHES}
        out.update({k: bool(v) for k, v in switches.items()})
    else:
        switches = list(switches)
        unknown = set(switches) - set(SWITCHES) - {"none"}
        out = {s: s in switches for s in SWITCHES}
    if unknown:
        raise ValueError(f"unknown switch(es) {', '.join(sorted(unknown))}; known: {', '.join(SWITCHES)}")
    return out


def _prefill_launches(c, S: int) -> tuple[list[list[Launch]], dict[str, int], set[str]]:
    E, H, Hkv, D, F = c.emb_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    HD, KD = H * D, Hkv * D
    g = lambda M, K, N: {"M": M, "K": K, "N": N}  # noqa: E731
    size = {"x": S * E, "normed": S * E, "q": S * HD, "k": S * KD, "v": S * KD, "q_roped": S * HD,
            "k_roped": S * KD, "attn_out": S * HD, "proj": S * E, "res1": S * E, "normed2": S * E,
            "gate": S * F, "up": S * F, "swiglu": S * F, "down": S * E, "out": S * E,
            "w_norm": E, "wq": E * HD, "wk": E * KD, "wv": E * KD, "lut_q": S * D, "lut_k": S * D,
            "wo": HD * E, "w_norm2": E, "w_gate": E * F, "w_up": E * F, "w_down": F * E}
    static = {"w_norm", "wq", "wk", "wv", "lut_q", "lut_k", "wo", "w_norm2", "w_gate", "w_up", "w_down"}
    attn_in = [Launch("rmsnorm", {"M": S, "N": E}, "attn RMSNorm", ("x", "w_norm"), ("normed",)),
               Launch("gemm", g(S, E, HD), "Q proj", ("normed", "wq"), ("q",)),
               Launch("gemm", g(S, E, KD), "K proj", ("normed", "wk"), ("k",)),
               Launch("gemm", g(S, E, KD), "V proj", ("normed", "wv"), ("v_raw" if c.qkv_bias else "v",))]
    q, k = "q", "k"
    if c.qkv_bias:
        attn_in += _bias_launches(size, static, S, HD, KD)
        q, k = "q_b", "k_b"
    if c.qk_norm:
        attn_in += qk_norm.launches(c, S, size, static, Launch)
        q, k = "q_n", "k_n"
    rd = partial_rope.shape_extra(c)  # a partial rotary (phi4_mini_q4nx `rope_partial`)
    attn_in += [Launch("rope", {"rows": H * S, "head_dim": D, **rd}, "RoPE Q", (q, "lut_q"), ("q_roped",)),
                Launch("rope", {"rows": Hkv * S, "head_dim": D, **rd}, "RoPE K", (k, "lut_k"), ("k_roped",))]
    fa = [Launch("flash_attention", {"lq": S, "lk": S, "dk": D, "dv": D, "heads_q": H, "heads_kv": Hkv,
                                     "causal": True}, _attention_role(c), ("q_roped", "k_roped", "v"), ("attn_out",))]
    o = [Launch("gemm", g(S, HD, E), "O proj", ("attn_out", "wo"), ("proj",)),
         Launch("eltwise_add", {"N": S * E}, "attn residual", ("proj", "x"), ("res1",)),
         Launch("rmsnorm", {"M": S, "N": E}, "ffn RMSNorm", ("res1", "w_norm2"), ("normed2",))]
    gu = [Launch("gemm", g(S, E, F), "Gate proj", ("normed2", "w_gate"), ("gate",)),
          Launch("gemm", g(S, E, F), "Up proj", ("normed2", "w_up"), ("up",)),
          Launch("silu_mul", {"N": S * F}, "SwiGLU", ("gate", "up"), ("swiglu",))]
    dn = [Launch("gemm", g(S, F, E), "Down proj", ("swiglu", "w_down"), ("down",)),
          Launch("eltwise_add", {"N": S * E}, "ffn residual", ("down", "res1"), ("out",))]
    names = prefill_elfs(c)
    if c.arch.norms == SANDWICH:
        return [attn_in, fa, *_sandwich_tail(c, S, size, static)], size, static
    gate, up, silu = gu
    tail = {"o_ffn": [o + gu + dn], "o_ffn_qwen": [o + gu + dn], "o_ffn_head": [o + gu, dn],
            "gate_up": [o, [gate, up], [silu], dn], "gate": [o, [gate], [up], [silu], dn]}
    key = next(n for n in names[2:] if n in tail)
    return [attn_in, fa, *tail[key]], size, static


def _attention_role(c) -> str:
    """The attention launch's role: a windowed model's is the sliding-window feature's (npu_kernels.model.features)."""
    return sliding_window.dispatch_label(c) or "attention"


def _sandwich_tail(c, S: int, size: dict[str, int], static: set[str]) -> list[list[Launch]]:
    """Gemma3's prefill after attention (gemma3_4b_q4nx_prefill.py:182-186 `o_norm_res_norm`: O + post-attention
    norm + residual + pre-FFN norm; :259 `gate` / `up` single-GEMM ELFs; :305-306 `gelu_mul`; :319-322
    `down_norm_add`: Down + post-FFN norm + residual; mlir-air e972f29)."""
    E, HD, F = c.emb_dim, c.n_heads * c.head_dim, c.hidden_dim
    g = lambda M, K, N: {"M": M, "K": K, "N": N}  # noqa: E731
    size.update({"o_n": S * E, "d_n": S * E, "w_post_attn": E, "w_post_ffn": E})
    static |= {"w_post_attn", "w_post_ffn"}
    act = (Launch("gelu", {"N": S * F}, "GELU-tanh GLU (gelu_and_mul)", ("gate", "up"), ("swiglu",))
           if c.arch.mlp == GELU_TANH_GLU else Launch("silu_mul", {"N": S * F}, "SwiGLU", ("gate", "up"), ("swiglu",)))
    return [[Launch("gemm", g(S, HD, E), "O proj", ("attn_out", "wo"), ("proj",)),
             Launch("rmsnorm", {"M": S, "N": E}, "post-attention RMSNorm", ("proj", "w_post_attn"), ("o_n",)),
             Launch("eltwise_add", {"N": S * E}, "attn residual", ("o_n", "x"), ("res1",)),
             Launch("rmsnorm", {"M": S, "N": E}, "pre-FFN RMSNorm", ("res1", "w_norm2"), ("normed2",))],
            [Launch("gemm", g(S, E, F), "Gate proj", ("normed2", "w_gate"), ("gate",))],
            [Launch("gemm", g(S, E, F), "Up proj", ("normed2", "w_up"), ("up",))],
            [act],
            [Launch("gemm", g(S, F, E), "Down proj", ("swiglu", "w_down"), ("down",)),
             Launch("rmsnorm", {"M": S, "N": E}, "post-FFN RMSNorm", ("down", "w_post_ffn"), ("d_n",)),
             Launch("eltwise_add", {"N": S * E}, "ffn residual", ("d_n", "res1"), ("out",))]]


def _bias_launches(size: dict[str, int], static: set[str], rows: int, HD: int, KD: int) -> list[Launch]:
    """Qwen2's Q/K/V bias: a broadcast add per projection inside the attention-input ELF, Q/K before RoPE."""
    size.update({"q_b": rows * HD, "k_b": rows * KD, "v_raw": rows * KD, "bq": HD, "bk": KD, "bv": KD})
    static |= {"bq", "bk", "bv"}
    return [Launch("eltwise_add", {"N": rows * HD}, "Q bias add", ("q", "bq"), ("q_b",)),
            Launch("eltwise_add", {"N": rows * KD}, "K bias add", ("k", "bk"), ("k_b",)),
            Launch("eltwise_add", {"N": rows * KD}, "V bias add", ("v_raw", "bv"), ("v",))]


def attention_input_elf(c) -> str:
    """The prefill attention-input ELF's name (its decode sibling adds `_gemv`; Llama's is `rms_gemv_rope`)."""
    return "rms_qkv_bias_rope" if c.qkv_bias else "rms_qkv_qknorm_rope" if c.qk_norm else "rms_gemms_rope"


def prefill_elfs(c) -> list[str]:
    """The per-layer prefill ELF names, in order (see the module docstring's rules)."""
    names = [attention_input_elf(c), "flash_attn"]
    if c.arch.norms == SANDWICH:  # Gemma3 (`_sandwich_tail`)
        return names + ["o_norm_res_norm", "gate", "up", "gelu_mul" if c.arch.mlp == GELU_TANH_GLU else "swiglu",
                        "down_norm_add"]
    F = c.hidden_dim
    if F % FFN_MERGE_ALIGN == 0:
        return names + ["o_ffn_qwen" if c.qk_norm else "o_ffn"]
    if F <= O_FFN_HEAD_MAX_HIDDEN:
        return names + ["o_ffn_head", "down_add"]
    return names + ["o_res_norm", *(["gate_up"] if F <= GATE_UP_MAX_HIDDEN else ["gate", "up"]), "swiglu", "down_add"]


def decode_elfs(c) -> list[str]:
    """The per-layer decode ELF names, in order (attention and, off the lean form, the M=1 glue on the host)."""
    first = "rms_gemv_rope" if not (c.qkv_bias or c.qk_norm) else f"{attention_input_elf(c)}_gemv"
    return [first, "o_gemv_ffn"] if is_lean(c) else [first, "o_gemv", "gate_gemv", "up_gemv", "down_gemv"]


def _decode_launches(c, profiled: bool = False) -> tuple[list[list[Launch]], dict[str, int], set[str]]:
    E, H, Hkv, D, F = c.emb_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim
    HD, KD = H * D, Hkv * D
    size = {"x": E, "normed": E, "q": HD, "k": KD, "v": KD, "q_roped": HD, "k_roped": KD, "attn_out": HD,
            "proj": E, "res1": E, "normed2": E, "gate": F, "up": F, "swiglu": F, "down": E, "out": E,
            "w_norm": E, "wq": E * HD, "wk": E * KD, "wv": E * KD, "lut_q": H * D, "lut_k": Hkv * D,
            "wo": HD * E, "w_norm2": E, "w_gate": E * F, "w_up": E * F, "w_down": F * E}
    static = {"w_norm", "wq", "wk", "wv", "wo", "w_norm2", "w_gate", "w_up", "w_down"}  # LUTs change per token
    mi = None if c.qkv_bias else 4  # the shared attention-input builders' m_input (rules above)
    first = [Launch("rmsnorm", {"M": 1, "N": E}, "attn RMSNorm", ("x", "w_norm"), ("normed",)),
             Launch("gemv", {"M": HD, "K": E}, "Q proj", ("normed", "wq"), ("q",), decode_gemv_tile(HD, E, mi)),
             Launch("gemv", {"M": KD, "K": E}, "K proj", ("normed", "wk"), ("k",), decode_gemv_tile(KD, E, mi)),
             Launch("gemv", {"M": KD, "K": E}, "V proj", ("normed", "wv"), ("v_raw" if c.qkv_bias else "v",),
                    decode_gemv_tile(KD, E, mi))]
    q, k = "q", "k"
    if c.qkv_bias:
        first += _bias_launches(size, static, 1, HD, KD)
        q, k = "q_b", "k_b"
    if c.qk_norm:
        first += qk_norm.launches(c, 1, size, static, Launch)
        q, k = "q_n", "k_n"
    rd = partial_rope.shape_extra(c)
    first += [Launch("rope", {"rows": H, "head_dim": D, **rd}, "RoPE Q", (q, "lut_q"), ("q_roped",)),
              Launch("rope", {"rows": Hkv, "head_dim": D, **rd}, "RoPE K", (k, "lut_k"), ("k_roped",))]
    o = Launch("gemv", {"M": E, "K": HD}, "O proj", ("attn_out", "wo"), ("proj",), decode_gemv_tile(E, HD))
    gate = Launch("gemv", {"M": F, "K": E}, "Gate proj", ("normed2", "w_gate"), ("gate",), decode_gemv_tile(F, E))
    up = Launch("gemv", {"M": F, "K": E}, "Up proj", ("normed2", "w_up"), ("up",), decode_gemv_tile(F, E))
    down = Launch("gemv", {"M": E, "K": F}, "Down proj", ("swiglu", "w_down"), ("down",), decode_gemv_tile(E, F))
    if is_lean(c) and not profiled:  # e972f29: o_gemv_ffn is three cascade launches (o_gemv_ffn_multi.py:4-16)
        size["w_gateup"] = 2 * F * E
        static.add("w_gateup")
        ffn = [Launch("gemv", {"M": E, "K": HD}, "O proj + residual (matvec_2tile_add)", ("attn_out", "wo", "x"),
                      ("res1",)),
               Launch("gemv", {"M": 2 * F, "K": E}, "FFN RMSNorm + Gate/Up + SwiGLU (matvec_swiglu_rms)",
                      ("res1", "w_norm2", "w_gateup"), ("swiglu",)),
               Launch("gemv", {"M": E, "K": F}, "Down proj + residual (matvec_2tile_add)", ("swiglu", "w_down", "res1"),
                      ("out",))]
        return [first, ffn], size, static
    if is_lean(c):  # as profiled (profile.md:257-260): eight launches, before mlir-air #1631
        ffn = [o, Launch("eltwise_add", {"N": E}, "attn residual", ("proj", "x"), ("res1",)),
               Launch("rmsnorm", {"M": 1, "N": E}, "ffn RMSNorm", ("res1", "w_norm2"), ("normed2",)),
               gate, up, Launch("silu_mul", {"N": F}, "SwiGLU", ("gate", "up"), ("swiglu",)), down,
               Launch("eltwise_add", {"N": E}, "ffn residual", ("down", "res1"), ("out",))]
        return [first, ffn], size, static
    return [first, [o], [gate], [up], [down]], size, static



def _calls(groups: list[list[Launch]], names: list[str], size: dict[str, int], static: set[str],
           fusion: bool, host_needs: set[str]) -> list[ElfCall]:
    if not fusion:  # one XRT call per launch, named after its ELF and role
        groups2, names2 = [], []
        for grp, name in zip(groups, names):
            for la in grp:
                groups2.append([la])
                names2.append(f"{name}:{la.role}" if len(grp) > 1 else name)
        groups, names = groups2, names2
    consumers: dict[str, set[int]] = {}
    for i, grp in enumerate(groups):
        for la in grp:
            for b in la.inputs:
                consumers.setdefault(b, set()).add(i)
    calls = []
    for i, (grp, name) in enumerate(zip(groups, names)):
        call = ElfCall(name, list(grp))
        outs = {o for la in grp for o in la.outputs}
        for la in grp:
            for b in la.inputs:
                if b in static:
                    call.static[b] = size[b] * BF16
                elif b not in outs:
                    call.write[b] = size[b] * BF16
        for b in sorted(outs):
            call.intermediate[b] = size[b] * BF16
            if b in host_needs or any(j != i for j in consumers.get(b, ())) or b not in consumers:
                call.read[b] = size[b] * BF16
        calls.append(call)
    return calls


def _lm_head(c) -> ElfCall:
    E, V = c.emb_dim, c.vocab_size
    P = lm_head_partition(V, c.arch.lm_head_partition)
    parts = math.ceil(V / P)
    launches = [Launch("gemv", {"M": min(P, V - p * P), "K": E}, f"LM head partition {p}", ("x_last", f"w_lm{p}"),
                       (f"logits{p}",), LM_HEAD_TILE) for p in range(parts)]
    call = ElfCall("lm_head_gemv", launches, write={"x_last": E * BF16},
                static={f"w_lm{p}": la.shape["M"] * E * BF16 for p, la in enumerate(launches)})
    call.intermediate = {f"logits{p}": la.shape["M"] * BF16 for p, la in enumerate(launches)}
    call.read = dict(call.intermediate)
    return call


def dispatch_plan(config, switches=None, seq: int = 2048, ctx: int = 128, profiled: bool = False) -> DispatchPlan:
    """See the module docstring. `config` is duck-typed (ModelConfig's fields). `profiled`: the lean decode as
    llama32_1b/docs/profile.md profiled it (an eight-launch o_gemv_ffn, replaced by three launches in mlir-air
    #1631, 462bf133b, before e972f29): the form the host constants are calibrated on."""
    if seq <= 0 or ctx <= 0:
        raise ValueError(f"seq and ctx must be positive (seq={seq}, ctx={ctx})")
    sw = normalize_switches(switches)
    c = config
    S, D, H, Hkv = seq, c.head_dim, c.n_heads, c.n_kv_heads
    groups, size, static = _prefill_launches(c, S)
    needs = {"q_roped", "k_roped", "v", "attn_out", "out"}  # the host extracts K/V, transposes, chains layers
    prefill = _calls(groups, prefill_elfs(c), size, static, sw["fusion"], needs)
    host = [HostOp("kv_cache_extract", "strided_copy", 2 * S * Hkv * D * BF16)]
    if D != 64 or not sw["seq_first"]:  # head-first flash attention: q, k, v in and attn_out back, on the host
        host.append(HostOp("seq<->head transpose", "strided_copy", S * (2 * H + 2 * Hkv) * D * BF16))
    once = [HostOp("embed_lookup", "embed", S * c.emb_dim * BF16), HostOp("final_rms_norm", "fixed")]
    dgroups, dsize, dstatic = _decode_launches(c, profiled)
    decode = _calls(dgroups, decode_elfs(c), dsize, dstatic, sw["fusion"],
                    {"q_roped", "k_roped", "v", "out"})
    dhost = [HostOp("decode attention", "decode_attention", 2 * ctx * Hkv * D * BF16)]
    if not is_lean(c):
        dhost.append(HostOp("M=1 glue (adds, FFN RMSNorm, SwiGLU)", "decode_glue"))
    plan = DispatchPlan(prefill, host, once, _lm_head(c), decode, dhost, [], c.n_layers, is_lean(c), sw)
    return _with_conv_layers(plan, c, S, groups, size, static, dgroups, dsize, dstatic)


def _with_conv_layers(plan: DispatchPlan, c, S: int, groups, size, static, dgroups, dsize, dstatic) -> DispatchPlan:
    """A hybrid's CONV layers: their own front calls, then the attention layers' MLP tail (prefill: groups[2:],
    after the attention input and flash attention; decode: dgroups[1:]), the front's output in `attn_out`."""
    n = len(c.arch.conv_layers())
    if not n:
        return plan
    sw = plan.switches
    front, names, fsize, fstatic = conv_prefill_front(c, S, Launch)
    plan.conv_prefill_layer = _calls(front + groups[2:], names + prefill_elfs(c)[2:], {**size, **fsize},
                                     static | fstatic, sw["fusion"], {"out"})
    plan.conv_prefill_host_layer = [HostOp(k, "strided_copy", v) for k, v in conv_prefill_host_bytes(c, S).items()]
    dfront, dnames, dfsize, dfstatic = conv_decode_front(c, Launch, decode_gemv_tile)
    plan.conv_decode_layer = _calls(dfront + dgroups[1:], dnames + decode_elfs(c)[1:], {**dsize, **dfsize},
                                    dstatic | dfstatic, sw["fusion"], {"out"})
    plan.conv_decode_host_layer = [op for op in plan.decode_host_layer if op.kind != "decode_attention"]
    plan.n_conv_layers = n
    return plan
