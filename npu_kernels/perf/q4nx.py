"""The NPU2 performance model of a 4-bit (Q4NX) deployment: the weight traffic of 4-bit codes and the fused
decode, in the two styles mlir-air runs them.

`WEIGHTS` names what a deployment's projections are stored as:
  bf16         the bf16 pipeline (`npu_kernels.perf.predict`)
  q4nx-host    host dequantisation at load (qwen3_0_6b_q4nx/README.md@81d902e: "only the weight source differs",
               the bf16 qwen3_0_6b pipeline): the bf16 prediction, unchanged, with a note
  q4nx-device  on-device 4-bit (llama32_1b_q4nx/README.md@137ff7c): the prefill is the bf16 pipeline with
               weights dequantised at load into resident bf16 BOs (`dequant_q4nx`) and TEMPORAL_CAUSAL_SKIP=1
               flash attention; the decode is the fused superkernel (fused_decode/README.md@597d7ff): ONE
               dispatch per token for every layer and the LM head, its projections 4-bit GEMVs (`gemv_q4nx`)
               streaming the codes from DDR.

Weight traffic: a q4k block (proj_qmm.cc@5bcb24c: 32 rows x 256 columns) holds 4-bit codes and one bf16 scale
and one bf16 min per 32-column group: 0.5 + 4/32 = 0.625 bytes per weight. The decode re-quantises every
projection and the LM head to that layout (llama32_1b_q4nx/q4nx_requant.py@a75ea2e: tied LM head = the bf16
embed_tokens, padded to whole K-wide row blocks and re-quantised), and its template streams the whole
ATTN_MAXL = 2048 KV window per token whatever the context (llama32_3b_q4nx/README.md@75bad96, "Decode
staircase"). The byte count reproduces every decode weight size the READMEs state (1.87 GiB Llama-3.2-3B,
4.375 GiB Llama-3.1-8B, 4.04 + 0.37 GiB Qwen3-8B, 3.80 + 0.32 GiB Qwen2.5-7B; tests/unit/test_perf_q4nx.py).

One constant is calibrated, on one figure only: the fused decode's effective weight-stream rate, from
llama32_1b_q4nx's ~50 tok/s (20 ms/token) minus the modelled per-dispatch host/XRT part (`calibration()`).
The per-token host work (embedding row, sampling) and anything else not modelled sits inside that one rate.
The prefill's causal skip is derived from the block geometry (`causal_skip_fraction`), not fitted. The other
4-bit READMEs' figures (anchors_q4nx.toml) are held out: reported beside the prediction, never fitted.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import replace
from pathlib import Path

from npu_kernels.model.config import ModelConfig
from npu_kernels.model.description import SANDWICH
from npu_kernels.model.plan_q4nx import padded_shape
from npu_kernels.perf.dispatch import ElfCall, Launch, attention_input_elf, dispatch_plan
from npu_kernels.perf.host import host_constants
from npu_kernels.perf.constants import FITTED
from npu_kernels.perf.kernel_model import kernel_features, latency_from
from npu_kernels.perf.memory import memory_fit
from npu_kernels.perf.predict import Prediction, predict

WEIGHTS = ("bf16", "q4nx-host", "q4nx-device")
Q4_GROUP = 32  # columns per bf16 scale / min
Q4_BYTES_PER_WEIGHT = 0.5 + 2 * 2 / Q4_GROUP  # 4-bit code + (bf16 scale + bf16 min) / 32 = 0.625
ATTN_MAXL = 2048  # the decode template's KV window, streamed whole every token
KV_BYTES = 2  # bf16 K and V
FA_TILE_Q, FA_Q_TILES, FA_LKP = 64, 4, 64  # the prefill flash attention's q chunk (lqp = 256) and k block
CALIBRATION = "Llama-3.2-1B"
HERE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def anchors() -> dict:
    """anchors_q4nx.toml: the 4-bit READMEs' figures (calibration, held-out, out of scope, silent)."""
    with open(HERE / "anchors_q4nx.toml", "rb") as f:
        return tomllib.load(f)


def anchor_config(row: dict) -> ModelConfig:
    return ModelConfig(**row["config"])


def check_weights(weights: str) -> str:
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; expected one of {', '.join(WEIGHTS)}")
    return weights


# --- the fused decode's traffic ---------------------------------------------------------------------------


def projection_shapes(c: ModelConfig, layer: int | None = None) -> dict[str, tuple[int, int]]:
    """(out, in) of each decode projection of one layer (q4nx_requant.py `dims`); a hybrid's short-convolution
    layer has in_proj (3E, E) and out_proj (E, E) in place of Q/K/V/O (lfm2_1_2b_q4nx_weights.py at 0c380f09
    `_Q4_SUFFIXES`: "all seven projections per attention/FFN layer, plus the ShortConv in_proj and out_proj")."""
    HD, KD = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    E, F = c.emb_dim, c.hidden_dim
    if layer is not None and c.arch.is_conv(layer):
        return {"conv_in": (3 * E, E), "conv_out": (E, E), "gate": (F, E), "up": (F, E), "down": (E, F)}
    return {"q": (HD, E), "k": (KD, E), "v": (KD, E), "o": (E, HD), "gate": (F, E), "up": (F, E), "down": (E, F)}


def attention_layers(c: ModelConfig) -> int:
    """The layers with a KV cache (all but a hybrid's short-convolution layers)."""
    return c.n_layers - len(c.arch.conv_layers())


def lm_head_rows(c: ModelConfig) -> int:
    """The vocabulary padded to whole emb_dim-row blocks (VOCAB_SIZE_PADDED_FULL = ceil(V / K) * K,
    phi4_mini_q4nx/README.md@958b89d and qwen25_7b_q4nx/README.md@01f8bbe)."""
    return -(-c.vocab_size // c.emb_dim) * c.emb_dim


def q4_bytes(rows: int, cols: int) -> float:
    """Bytes of a (rows, cols) projection in q4k blocks, zero-padded to whole 32 x 256 blocks as deployed."""
    s = padded_shape("gemv_q4nx", rows, cols)[0]
    return s["M"] * s["K"] * Q4_BYTES_PER_WEIGHT


def decode_weight_bytes(c: ModelConfig) -> dict[str, float]:
    """Bytes the fused decode streams per token: every layer's 4-bit projections and the 4-bit LM head."""
    layers = sum(q4_bytes(m, k) for i in range(c.n_layers) for m, k in projection_shapes(c, i).values())
    return {"layers": layers, "lm_head": q4_bytes(lm_head_rows(c), c.emb_dim)}


def decode_kv_bytes(c: ModelConfig) -> float:
    """K and V of every layer over the template's whole ATTN_MAXL window, read once per token."""
    return attention_layers(c) * 2 * ATTN_MAXL * c.n_kv_heads * c.head_dim * KV_BYTES


def fused_decode_call(c: ModelConfig) -> ElfCall:
    """The one XRT call of a decode token: per layer the 4-bit GEMV of each projection (the fused kernel's
    other work - norms, RoPE, attention over the KV window, SwiGLU - rides on the same stream), then the LM
    head; the weights and KV are static BOs, the token's embedding row goes in, the logits come out."""
    launches = [Launch("gemv_q4nx", padded_shape("gemv_q4nx", m, k)[0], f"L{i} {name} proj", ("x", f"w{i}_{name}"),
                       (f"y{i}_{name}",)) for i in range(c.n_layers) for name, (m, k) in projection_shapes(c, i).items()]
    launches.append(Launch("gemv_q4nx", padded_shape("gemv_q4nx", lm_head_rows(c), c.emb_dim)[0], "LM head",
                           ("x_last", "w_lm"), ("logits",)))
    w = decode_weight_bytes(c)
    return ElfCall("fused_decode", launches, write={"x": c.emb_dim * 2},
                static={"weights_q4": int(w["layers"] + w["lm_head"]), "kv_cache": int(decode_kv_bytes(c))},
                intermediate={"logits": lm_head_rows(c) * 2}, read={"logits": c.vocab_size * 2})


def dispatch_fixed_s(call: ElfCall) -> float:
    """The per-token part that is not the weight/KV stream: one XRT call, the embedding row in, the logits
    out, at the host constants derived from the bf16 Llama-3.2-1B profile (npu_kernels.perf.host)."""
    h = host_constants()
    return h["xrt_call_s"] + sum(call.write.values()) / h["bo_write_bps"] + sum(call.read.values()) / h["bo_read_bps"]


def stream_bytes(call: ElfCall) -> float:
    return float(call.static["weights_q4"] + call.static["kv_cache"])


@functools.lru_cache(maxsize=1)
def calibration() -> dict[str, float]:
    """The fused decode's effective DDR stream rate from the one calibration figure (module docstring)."""
    row = next(r for r in anchors()["model"] if r["role"] == "calibration")
    call = fused_decode_call(anchor_config(row))
    token_s = 1.0 / row["decode_tok_s"]
    rate = stream_bytes(call) / (token_s - dispatch_fixed_s(call))
    return {"stream_bps": rate, "token_s": token_s, "src": row["src"]}


def unfused_decode_calls(c: ModelConfig) -> list[ElfCall]:
    """The decode with `fusion` off: one XRT call per 4-bit GEMV (every projection of every layer, then the LM
    head), its input row in and its output row out, the norms / RoPE / attention / SwiGLU between them on the
    host as in the bf16 5-ELF decode."""
    calls = [ElfCall(f"gemv_q4nx L{i} {name}", [Launch("gemv_q4nx", padded_shape("gemv_q4nx", m, k)[0], name,
                                                    ("x", "w"), ("y",))],
                  write={"x": k * 2}, static={"w": int(q4_bytes(m, k))}, read={"y": m * 2})
             for i in range(c.n_layers) for name, (m, k) in projection_shapes(c, i).items()]
    calls.append(ElfCall("gemv_q4nx LM head", [Launch("gemv_q4nx", padded_shape("gemv_q4nx", lm_head_rows(c), c.emb_dim)[0],
                                                   "LM head", ("x", "w"), ("y",))],
                      write={"x": c.emb_dim * 2}, static={"w": int(q4_bytes(lm_head_rows(c), c.emb_dim))},
                      read={"y": c.vocab_size * 2}))
    return calls


def unfused_decode_s(c: ModelConfig, host_ms: float) -> dict[str, float]:
    """Modelled, never measured (mlir-air runs no unfused 4-bit decode): the same 4-bit weight stream at the
    fused decode's calibrated rate (no KV stream: attention runs on the host), plus each call's fixed part at
    the bf16 profile's host constants, plus the bf16 decode's host work per token (`host_ms`)."""
    calls = unfused_decode_calls(c)
    stream = sum(call.static["w"] for call in calls) / calibration()["stream_bps"]
    fixed = sum(dispatch_fixed_s(call) for call in calls)
    return {"stream_s": stream, "fixed_s": fixed, "host_s": host_ms / 1e3, "calls": len(calls),
            "total_s": stream + fixed + host_ms / 1e3}


def fused_decode_s(c: ModelConfig) -> dict[str, float]:
    call = fused_decode_call(c)
    stream = stream_bytes(call) / calibration()["stream_bps"]
    fixed = dispatch_fixed_s(call)
    return {"stream_s": stream, "fixed_s": fixed, "total_s": stream + fixed, "weight_bytes": float(call.static["weights_q4"]),
            "kv_bytes": float(call.static["kv_cache"])}


# --- the prefill's temporal causal skip --------------------------------------------------------------------


def causal_skip_fraction(seq: int, lqp: int = FA_TILE_Q * FA_Q_TILES, lkp: int = FA_LKP) -> float:
    """The fraction of (q chunk, k block) pairs a causal prefill computes when fully masked blocks are skipped:
    q chunk i (rows i*lqp .. (i+1)*lqp - 1) needs the k blocks starting at or before its last row."""
    chunks, blocks = -(-seq // lqp), -(-seq // lkp)
    kept = sum(min(blocks, -(-((i + 1) * lqp) // lkp)) for i in range(chunks))
    return kept / (chunks * blocks)


def skipped_attention_s(shape: dict) -> float:
    """One causal flash-attention launch with fully masked blocks skipped: its MAC, score and KV-stream
    amounts scaled by `causal_skip_fraction`, the per-launch and per-iteration floors kept."""
    f = dict(kernel_features("flash_attention", shape))
    keep = causal_skip_fraction(shape["lq"])
    for k in ("fa_s_per_mac", "fa_s_per_mac_chunked", "fa_s_per_score", "fa_s_per_kv_byte"):
        if k in f:
            f[k] *= keep
    return latency_from(f, FITTED)


# --- the prefill's seq-first temporal-causal flash attention -------------------------------------------------

TEMPORAL_LQP = 256  # one q-seq tile of 32 rows per core x 8 tiles (shared/infra/fa_temporal.py:24-26, e972f29)
TRANSPOSE_OP = "seq<->head transpose"  # npu_kernels.perf.dispatch's head-first host op


def runs_temporal_fa(c: ModelConfig, seq: int) -> bool:
    """Whether the 4-bit prefill runs the seq-first temporal-causal flash attention, which takes the block's
    seq-first Q/K/V as they are: no host seq<->head transposes (shared/infra/fa_temporal.py:4-11, e972f29).
    The drivers that pick it are Llama-3.2-3B's (llama32_3b/llama32_3b_prefill.py:63-80, 255-258: "being
    seq-first, also drops the host transposes the head-first path needs"), which the Llama-style 4-bit prefills
    import unchanged (phi4_mini_q4nx_prefill.py:78, 91-98, 223; llama32_3b_q4nx, llama31_8b_q4nx) - the
    `rms_gemms_rope` attention input; Qwen's and Gemma3's drivers never call it. `fa_temporal.supports`
    (:41-53) restricts it to head_dim 128, seq a multiple of 256, GQA groups nb = n_heads / n_kv_heads with
    2 * nb <= 8 columns, and past 4 q rounds nb == 3 only: at 2048, Llama-3.2-3B and Phi-4-mini (24 / 8)."""
    if attention_input_elf(c) != "rms_gemms_rope" or c.arch.norms == SANDWICH or c.arch.conv_layers():
        return False
    H, Hkv = c.n_heads, c.n_kv_heads
    if c.head_dim != 128 or seq <= 0 or seq % TEMPORAL_LQP or not Hkv or H % Hkv:
        return False
    nb = H // Hkv
    return 2 * nb <= 8 and (nb == 3 or seq // TEMPORAL_LQP <= 4)


# --- the prediction ----------------------------------------------------------------------------------------


def _ms(s: float) -> float:
    return round(s * 1e3, 4)


def predict_weights(config: ModelConfig, weights: str = "bf16", seq: int = 2048, switches=None, ctx: int = 128,
                    host_bytes: int | None = None) -> Prediction:
    """`npu_kernels.perf.predict.predict` for a deployment whose weights are `weights` (module docstring)."""
    check_weights(weights)
    p = predict(config, seq=seq, switches=switches, ctx=ctx, host_bytes=host_bytes)
    if weights == "bf16":
        return p
    if weights == "q4nx-host":
        return replace(p, notes=p.notes + ["weights q4nx-host: dequantised to bf16 on the host at load; the bf16 "
                                           "pipeline runs unchanged (qwen3_0_6b_q4nx/README.md@81d902e)"])
    return _device(config, p, seq, host_bytes)


def _seq_first_host(c: ModelConfig, seq: int, p: Prediction, totals: dict) -> tuple[dict[str, float], float]:
    """The prefill's host ops (ms) and the seconds taken off: without the seq<->head transposes when the prefill
    runs the seq-first temporal kernel (`runs_temporal_fa`), `totals` adjusted to match."""
    host = dict(p.host["prefill"])
    dropped = host.pop(TRANSPOSE_OP, 0.0) / 1e3 if runs_temporal_fa(c, seq) else 0.0
    totals["prefill"]["host"] = round(totals["prefill"]["host"] - dropped * 1e3, 4)
    return host, dropped


def _device(c: ModelConfig, p: Prediction, seq: int, host_bytes: int | None = None) -> Prediction:
    L = c.n_layers
    per_elf = {k: dict(v) for k, v in p.per_elf.items() if not k.startswith("decode:")}
    totals = {ph: dict(v) for ph, v in p.totals.items()}
    per_kernel = {"prefill": dict(p.per_kernel["prefill"]), "decode": {}}
    # prefill: flash attention with TEMPORAL_CAUSAL_SKIP=1 (llama32_1b_q4nx_prefill.py header@fba78a9)
    fa_key = next((k for k in per_elf if k.startswith("prefill:flash_attn")), None)
    saved = 0.0
    if fa_key is not None:
        shape = {"lq": seq, "lk": seq, "dk": c.head_dim, "dv": c.head_dim, "heads_q": c.n_heads,
                 "heads_kv": c.n_kv_heads, "causal": True}
        full = kernel_features("flash_attention", shape)
        La = attention_layers(c)
        saved = (latency_from(full, FITTED) - skipped_attention_s(shape)) * La
        e = per_elf[fa_key]
        e["npu_ms"] = round(e["npu_ms"] - saved / La * 1e3, 4)
        e["per_call_ms"] = round(e["per_call_ms"] - saved / La * 1e3, 4)
        e["total_ms"] = round(e["total_ms"] - saved * 1e3, 4)
        totals["prefill"]["npu"] = round(totals["prefill"]["npu"] - saved * 1e3, 4)
        per_kernel["prefill"]["flash_attention"] = round(per_kernel["prefill"]["flash_attention"] - saved * 1e3, 4)
    host_prefill, dropped = _seq_first_host(c, seq, p, totals)
    ttft = p.ttft_s - saved - dropped
    d = fused_decode_s(c)
    cal = calibration()
    notes = [n for n in p.notes if not n.startswith("decode is 5 GEMV ELFs")]
    if dropped:
        notes = [n if not n.startswith(f"head_dim {c.head_dim}: head-first") else
                 f"head_dim {c.head_dim}: seq-first temporal-causal flash attention, no host seq<->head transpose "
                 f"({dropped * 1e3:.1f} ms not run; llama32_3b_prefill.py:63-80, fa_temporal.py:4-11, e972f29)"
                 for n in notes]
    host_decode = {}
    if p.switches.get("fusion", True):
        per_elf["decode:fused_decode"] = {"calls": 1, "launches": len(fused_decode_call(c).launches), "per_call_ms": _ms(d["total_s"]),
                                          "bo_write_ms": 0.0, "npu_ms": _ms(d["stream_s"]), "bo_read_ms": 0.0,
                                          "xrt_ms": _ms(d["fixed_s"]), "total_ms": _ms(d["total_s"])}
        totals["decode"] = {"bo_write": 0.0, "npu": _ms(d["stream_s"]), "bo_read": 0.0, "xrt": _ms(d["fixed_s"]), "host": 0.0}
        per_kernel["decode"] = {"gemv_q4nx (fused decode stream)": _ms(d["stream_s"])}
        token_s, calls, how = d["total_s"], 0, f"ONE fused dispatch per token for {L} layers + the LM head"
    else:
        u = unfused_decode_s(c, p.totals["decode"]["host"])
        per_elf["decode:gemv_q4nx"] = {"calls": u["calls"], "launches": u["calls"], "per_call_ms": _ms((u["stream_s"] + u["fixed_s"]) / u["calls"]),
                                       "bo_write_ms": 0.0, "npu_ms": _ms(u["stream_s"]), "bo_read_ms": 0.0,
                                       "xrt_ms": _ms(u["fixed_s"]), "total_ms": _ms(u["stream_s"] + u["fixed_s"])}
        totals["decode"] = {"bo_write": 0.0, "npu": _ms(u["stream_s"]), "bo_read": 0.0, "xrt": _ms(u["fixed_s"]),
                            "host": _ms(u["host_s"])}
        per_kernel["decode"] = {"gemv_q4nx": _ms(u["stream_s"])}
        host_decode = dict(p.host["decode"])
        token_s, calls = u["total_s"], 7
        how = (f"fusion off: {u['calls']} gemv_q4nx dispatches per token with the norms, RoPE and attention on the "
               "host (modelled, never measured: no unfused 4-bit decode exists in mlir-air; per-call cost from the "
               "bf16 profile's host constants)")
    notes += [
        f"weights q4nx-device: prefill = the bf16 pipeline on weights dequantised at load (dequant_q4nx) with "
        f"TEMPORAL_CAUSAL_SKIP=1 flash attention ({causal_skip_fraction(seq):.4f} of the blocks computed, "
        f"{saved * 1e3:.1f} ms saved); decode = {how}",
        f"fused decode streams {d['weight_bytes'] / 2**30:.3f} GiB of 4-bit weights ({Q4_BYTES_PER_WEIGHT} B/weight: "
        f"codes + bf16 scale/min per {Q4_GROUP}) and {d['kv_bytes'] / 2**30:.3f} GiB of KV (the ATTN_MAXL={ATTN_MAXL} "
        f"window, any ctx) per token at {cal['stream_bps'] / 1e9:.1f} GB/s, calibrated on {cal['src']} only",
    ]
    # what stays resident: the prefill's bf16 weight BOs and the decode's 4-bit ones with its KV window, not the
    # bf16 decode's weights `predict` counted (issue 48 item 5)
    fit = memory_fit(dispatch_plan(c, p.switches, seq, p.ctx), c, p.ctx, host_bytes, decode_call=fused_decode_call(c))
    at = next((i for i, n in enumerate(notes) if n.startswith("resident in host DDR")), 0)
    notes = [*notes[:at], *fit.lines(), *(n for n in notes[at:] if not n.startswith(("resident in host DDR",
                                                                                       "does not fit:")))]
    memory = {"fits": fit.fits, "total_bytes": fit.total_bytes, "weights_bytes": fit.weights_bytes,
              "decode_4bit_bytes": fit.decode_4bit_bytes, "kv_cache_bytes": fit.kv_cache_bytes,
              "activation_bytes": fit.activation_bytes, "largest_bo_bytes": fit.largest_bo_bytes,
              "largest_bo": fit.largest_bo, "problems": fit.problems}
    if d["weight_bytes"] > 4 * 2**30:
        notes.append("decode weights exceed the 4 GiB one BO addresses: split over layer groups (DECODE_WGROUP, "
                     "llama31_8b_q4nx/README.md@a8131a5), still one dispatch")
    if not calls:  # the READMEs measured the fused decode: an unfused figure is not set beside them
        notes += measured_lines(c, ttft, token_s)
    return replace(p, ttft_s=round(ttft, 6), prefill_s=round(p.prefill_s - saved - dropped, 6),
                   decode_tokens_per_s=round(1.0 / token_s, 4), ms_per_token=_ms(token_s),
                   decode_calls_per_layer=calls, per_elf=per_elf, per_kernel=per_kernel,
                   host={"prefill": host_prefill, "decode": host_decode}, totals=totals, notes=notes,
                   memory=memory)


def matching_anchor(c: ModelConfig) -> dict | None:
    """The anchors_q4nx.toml row whose architecture is `c`'s (layers, widths, heads, vocab), if any."""
    keys = ("n_layers", "emb_dim", "n_heads", "n_kv_heads", "head_dim", "hidden_dim", "vocab_size")
    for row in anchors()["model"]:
        if all(getattr(c, k) == row["config"][k] for k in keys):
            return row
    return None


def measured_lines(c: ModelConfig, ttft_s: float, token_s: float) -> list[str]:
    row = matching_anchor(c)
    if row is None:
        return []
    what = "the calibration anchor (decode rate fitted to it)" if row["role"] == "calibration" else "held out, not fitted"
    ttft = (f"TTFT {row['ttft_s']:.2f} s, " if row.get("ttft_s") else "no TTFT stated, ")
    vs_ttft = (f" ({ttft_s / row['ttft_s'] - 1:+.0%})" if row.get("ttft_s") else "")
    lines = [f"measured NPU2 ({row['src']}; {what}): {ttft}{row['decode_tok_s']} tok/s "
             f"- modelled TTFT {ttft_s:.3f} s{vs_ttft}, {1 / token_s:.1f} tok/s "
             f"({(1 / token_s) / row['decode_tok_s'] - 1:+.0%}); conditions: {row['conditions']}"]
    if "nightly_decode_tok_s" in row:
        lines.append(f"measured NPU2, nightly decode sweep at 2048 ({row['nightly_src']}; held out, not fitted): "
                     f"{row['nightly_decode_tok_s']:.2f} tok/s - modelled {1 / token_s:.1f} tok/s "
                     f"({(1 / token_s) / row['nightly_decode_tok_s'] - 1:+.0%})")
    return lines


def held_out_table() -> list[dict]:
    """Every anchors_q4nx.toml model beside `predict_weights(..., "q4nx-device")` (the calibration row first); a
    measured figure the source does not state is None."""
    out = []
    for row in anchors()["model"]:
        c = anchor_config(row)
        p = predict_weights(c, "q4nx-device")
        out.append({"model": row["name"], "role": row["role"], "src": row["src"],
                    "ttft_s": (p.ttft_s, row.get("ttft_s")),  # None: the README states no TTFT
                    "decode_tok_s": (p.decode_tokens_per_s, row["decode_tok_s"]),
                    "nightly_decode_tok_s": (p.decode_tokens_per_s, row.get("nightly_decode_tok_s")),
                    "decode_weights_gib": (round(decode_weight_bytes(c)["layers"] / 2**30 + decode_weight_bytes(c)["lm_head"] / 2**30, 3),
                                           row.get("decode_weights_gib"))})
    return out

