"""FlashAttention: O = softmax(Q K^T / sqrt(dk)) V per head, GQA, causal or not (a sliding window optional), in bf16
with BFP16 MMAs and a bf16 online softmax over the cascade stages.

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29 unless another commit is named:

  layout     q (Hq, Lq, Dk), k (Hkv, Lk, Dk), v (Hkv, Lk, Dv) -> (Hq, Lq, Dv); GQA: q head h uses kv head
             h // (Hq // Hkv); causal masks key j > q_offset + i; scale 1/sqrt(Dk); a window also masks the keys at or
             before q - window (attn_npu2.cc `apply_window_mask`).
  reference  FP32 SDPA per head (npu_kernels.numerics.references.attention_reference, attn_npu2.py's reference):
             masked scores -1e9, softmax in FP32. Inputs q, k, v ~ N(0, 1) in bf16.
  tolerance  docs/numerics.md's FlashAttention row (NUMERICS): rtol 1.6e-2, atol 1e-1 (bf16 online softmax; the
             registry's FlashAttention_bf16.md measures mean_rel_L1 3.8e-2 ... 5.5e-2).
  emulated   npu_kernels.numerics.executors.emulated_flash (attn_npu2.cc): BFP16 MMA operands on NPU2, the bf16
             online softmax per cascade stage, the stages split over the executor's threads.
  torch      F.scaled_dot_product_attention on bf16 (1, H, L, D), GQA by `enable_gqa`, a boolean mask where causal
             is offset or windowed.
  tile rules lkp == head_dim (NUMERICS; head_dim a multiple of 64 may also run at lkp 64 in dk/dv chunks, as
             mlir-air's registry does at head_dim 128 - NUMERICS' two rules together would otherwise forbid causal
             attention at head_dim 128; at head_dim 256 lkp 32, the head-first tiling mlir-air runs for Gemma3,
             llms/shared/infra/fa_headfirst.py:36-55 at e972f29: lkp 64 overflows L1), causal -> tile_q == lkp == 64
             (32 at head_dim 256), a window causal and a multiple of lkp, heads per unroll <= 2, heads_q %
             heads_per_unroll == 0, columns heads_per_unroll*num_q_tiles <= 8, stages <= rows, lqp % num_q_tiles
             == 0, lq % lqp == 0, lk % (lkp*stages) == 0. The herd is (heads per unroll x q tiles) columns by the
             cascade stages.
  default    lkp 64 where dk and dv allow it, 2 heads per unroll where heads_q is even, 4 q tiles of 64 rows per
             head pair, the cascade over every compute row; both halved until they divide lq / lk (head_dim 256:
             fa_headfirst.py:49-55).
  harness    programming_examples/flash_attention/kernel_fusion_based/attn_npu2.py:1439-1445 `default_rng(42)`,
             `standard_normal((H, LQ, DK))` (float64) -> bf16 for Q, then K (Hkv, LK, DK), then V (Hkv, LK, DV);
             :1458-1473 the f32 reference per head (scores * 1/sqrt(dk), causal mask -1e9, and under `--window W`
             also the keys at or before p - W, :1466-1468; max-subtracted exp, normalise, P @ V) -> bf16
             (npu_kernels.numerics.references.attention_reference is that computation). The precision line is the
             compile-and-run pass (`--perf-iters` 0 by default); a latency run is a separate invocation and changes
             no input.
  table      programming_examples/flash_attention/kernel_fusion_based/Makefile LQ LK LQP LKP DK DV NUM_*: precision
             and latency come from separate runs (with --perf-iters the checked output is the 11+P-th run on the
             same buffers, so that run's [precision] line is a buffer-reuse artifact,
             kernel_registry/details/FlashAttention_bf16.md:226). Causal masking, heads per unroll, q tiles and
             cascade stages reach attn_npu2.py only through EXTRA_PY_FLAGS (Makefile:55; argparse
             attn_npu2.py:1257-1388); NUM_Q_TILES is also the Makefile variable that sizes the kernel object's
             -Dlqp (Makefile:22-23), so both get it.
  twin       attn_npu2.py:1257-1388 (flags), :111-158 (asserts, messages verbatim), :1487-1489 (its FLOP count);
             Makefile:9-22 (vars), :55 (run, EXTRA_PY_FLAGS appended), :59-64 (profile: ELF timer, no NUM_KV_HEADS);
             test_elf_npu2.cpp:230-267 (the timer's lines).
  cost       Q.K^T and P.V MACs per tile, the online-softmax scores per tile, the (head group, q chunk) herd
             iterations and the K/V stream per iteration: FlashAttention_bf16.md:149-164 (constants fitted by
             npu_kernels.perf.fit on anchors.toml).
  registry   kernel_registry/supported_kernels.md (its "FlashAttention" table) and details/FlashAttention_bf16.md:
             the columns registry.mlir_air_tables renders and registry.importer_tables reads (no details JSON).
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import f32
from npu_kernels.numerics.harness_case import HarnessCase, harness_bf16
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn
from npu_kernels.numerics.references import attention_reference, bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure, ShapeError
from npu_kernels.numerics.tile_common import Rule, array_columns, array_rows
from npu_kernels.thresholds import RTOL

NAME = "flash_attention"
LISTED_AFTER = "rope"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
TOLERANCES = {"bf16-out": (RTOL, 1e-1)}
TOLERANCE_SOURCE = ("docs/numerics.md (NUMERICS, mlir-air's NPU2 tolerance table) FlashAttention row `1.6e-2 / "
                    "1e-1`: the bf16 online softmax; mlir-air kernel_registry/details/FlashAttention_bf16.md@e972f29 "
                    "measures mean_rel_L1 3.8e-2 ... 5.5e-2")
HARNESS_SEED = 42  # attn_npu2.py:1439 (default_rng)
THROUGHPUT = "gflops"  # the cost model's figure: GFLOP/s over `dense_flops` (the whole square, causal or not)


# --- FP32 reference, inputs, executor call ----------------------------------------------------------------


def check_shape(s):
    if s["heads_q"] % s["heads_kv"]:
        raise ShapeError(f"flash_attention: heads_q={s['heads_q']} is not a multiple of heads_kv={s['heads_kv']}")


def make_inputs(s, rng):
    return {
        "q": bf16_randn(rng, (s["heads_q"], s["lq"], s["dk"])),
        "k": bf16_randn(rng, (s["heads_kv"], s["lk"], s["dk"])),
        "v": bf16_randn(rng, (s["heads_kv"], s["lk"], s["dv"])),
    }


def reference(i, s):
    return attention_reference(i["q"], i["k"], i["v"], s["causal"], window=s.get("window"))


def call(ex, i, s, contract, tile):
    if s.get("window"):  # a sliding window (Gemma3's local layers): the same kernel with the window mask
        return ex.flash_attention(i["q"], i["k"], i["v"], causal=s["causal"], window=s["window"])
    return ex.flash_attention(i["q"], i["k"], i["v"], causal=s["causal"])


def flops(s):
    f = 2.0 * s["heads_q"] * s["lq"] * s["lk"] * (s["dk"] + s["dv"])
    return f * 0.5 if s["causal"] else f


def dense_flops(s) -> float:
    """Every (q, k) block's Q.K^T and P.V, causal or not: what the modelled GFLOP/s and test_elf_npu2.cpp's timer
    divide by (a causal harness line may divide by this or by `flops`, npu_kernels.perf.evidence)."""
    return 2.0 * s["heads_q"] * s["lq"] * s["lk"] * (s["dk"] + s["dv"])


def nbytes(s):
    return 2.0 * (s["heads_q"] * s["lq"] * (s["dk"] + s["dv"]) + s["heads_kv"] * s["lk"] * (s["dk"] + s["dv"]))


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("lq", "lk", "dk", "dv", "heads_q", "heads_kv", "causal"),
    optional_keys=("window",),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16",
                                    "bf16 Q/K/V, BFP16 MMAs, bf16 online softmax")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=flops,
    bytes_fn=nbytes,
    output_elements_fn=lambda s: s["heads_q"] * s["lq"] * s["dv"],
    npu2={"bf16-out": NpuFigure(4.6e-2, 3.8e-2, 5.5e-2, "512x512, dk 64, 12/6 heads, non-causal")},
    registry_shape={"lq": 512, "lk": 512, "dk": 64, "dv": 64, "heads_q": 12, "heads_kv": 6, "causal": False},
    small_shape={"lq": 128, "lk": 128, "dk": 64, "dv": 64, "heads_q": 4, "heads_kv": 2, "causal": True},
    target_tiles={"npu2": 32, "npu1": 16},
    bool_keys=("causal",),
    extra={"check_shape": check_shape},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, q, k, v, *, causal: bool = True, q_offset: int = 0, window: int | None = None):
    q = np.asarray(q, np.float32)
    k = np.asarray(k, np.float32)
    v = np.asarray(v, np.float32)
    hq, lq, dk = q.shape
    hkv, lk, _ = k.shape
    group = hq // hkv
    kk = np.repeat(k, group, axis=0)  # (Hq, Lk, Dk)
    vv = np.repeat(v, group, axis=0)  # (Hq, Lk, Dv)
    s = np.einsum("hqd,hkd->hqk", q, kk) / np.float32(math.sqrt(dk))  # (Hq, Lq, Lk)
    if causal:
        qi = np.arange(lq)[:, None] + q_offset
        kj = np.arange(lk)[None, :]
        s = np.where(kj > qi, np.float32(-np.inf), s)
    if window:  # sliding window: keep q - window < kv (attn_npu2.cc `apply_window_mask`)
        qi = np.arange(lq)[:, None] + q_offset
        s = np.where(np.arange(lk)[None, :] <= qi - window, np.float32(-np.inf), s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("hqk,hkd->hqd", p, vv).astype(np.float32)


def emulated(ex, q, k, v, *, causal: bool = True, q_offset: int = 0, window: int | None = None):
    """attn_npu2.cc on the emulated NPU2: the executor's MMA operands (BFP16 on NPU2), its threads over the stages."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_flash import flash_attention

    with ex.timer.time(NAME):
        return flash_attention(f32(q), f32(k), f32(v), bool(causal), int(q_offset), mma_operand=ex._mma_operand,
                               bfp16=ex.bfp16, threads=ex.threads, window=window)


def torch(ex, q, k, v, *, causal: bool = True, q_offset: int = 0, window: int | None = None):
    import torch as _torch
    import torch.nn.functional as F

    with ex.timer.time(NAME), _torch.inference_mode():
        # (1, H, L, D): the batched layout reaches the fused (flash) CPU/CUDA kernels
        qt, kt, vt = ex._t(q)[None], ex._t(k)[None], ex._t(v)[None]
        lq, lk = qt.shape[2], kt.shape[2]
        gqa = qt.shape[1] != kt.shape[1]
        if window:
            qpos = _torch.arange(lq, device=ex.device) + int(q_offset)
            kpos = _torch.arange(lk, device=ex.device)[None, :]
            allowed = (kpos > qpos[:, None] - int(window)) & (kpos <= qpos[:, None] if causal else True)
            out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed, enable_gqa=gqa)
        elif causal and (q_offset != 0 or lq != lk):
            qpos = _torch.arange(lq, device=ex.device) + int(q_offset)
            allowed = _torch.arange(lk, device=ex.device)[None, :] <= qpos[:, None]
            out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=allowed, enable_gqa=gqa)
        else:
            out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal), enable_gqa=gqa)
        return ex._np(out[0])


# --- tile rules, herd, default and notes ------------------------------------------------------------------


def _chunk_lkp(s: dict) -> int:
    """The dk/dv-chunked lkp: 64, or 32 at head_dim 256 (fa_headfirst.py:49-55 `_FA_TILING`, mlir-air e972f29)."""
    return 32 if s["dk"] == 256 else 64


def tile_rules(target: str) -> list[Rule]:
    cols, rows = array_columns(target), array_rows(target)
    return [
        ("flash_attention.lkp_equals_head_dim",
         lambda s, t: t["lkp"] == s["dk"] or (t["lkp"] == _chunk_lkp(s) and s["dk"] % 64 == 0 and s["dv"] % 64 == 0),
         lambda s, t: f"lkp={t['lkp']} must equal head_dim dk={s['dk']} (or be 64 with dk, dv multiples of 64: "
         "the dk/dv-chunked layout mlir-air runs at head_dim 128)"),
        ("flash_attention.causal_tile_q_eq_lkp_eq_64",
         lambda s, t: not s["causal"] or (t["tile_q"] == t["lkp"] == _chunk_lkp(s)),
         lambda s, t: f"causal masking needs tile_q == lkp == {_chunk_lkp(s)} (tile_q={t['tile_q']}, lkp={t['lkp']})"),
        ("flash_attention.window_multiple_of_lkp",
         lambda s, t: not s.get("window") or (s["causal"] and s["window"] % t["lkp"] == 0),
         lambda s, t: f"window={s.get('window')} must be causal and a multiple of lkp={t['lkp']} (attn_npu2.py:139-143 "
         "asserts both; apply_window_mask counts it in blocks, attn_npu2.cc:730-733)"),
        ("flash_attention.heads_per_unroll_le_2", lambda s, t: 1 <= t["num_heads_per_unroll"] <= 2,
         lambda s, t: f"num_heads_per_unroll={t['num_heads_per_unroll']} > 2 runs out of shim DMA channels"),
        ("flash_attention.heads_divisible_by_unroll", lambda s, t: s["heads_q"] % t["num_heads_per_unroll"] == 0,
         lambda s, t: f"heads_q={s['heads_q']} is not a multiple of num_heads_per_unroll={t['num_heads_per_unroll']}"),
        ("flash_attention.columns_le_array",
         lambda s, t: t["num_heads_per_unroll"] * t["num_q_tiles"] <= cols,
         lambda s, t: f"num_heads_per_unroll*num_q_tiles = {t['num_heads_per_unroll'] * t['num_q_tiles']} > {cols} columns"),
        ("flash_attention.stages_le_rows", lambda s, t: 1 <= t["num_cascade_stages"] <= rows,
         lambda s, t: f"num_cascade_stages={t['num_cascade_stages']} exceeds the {rows} compute rows"),
        ("flash_attention.lqp_divisible_by_q_tiles", lambda s, t: t["lqp"] == t["tile_q"] * t["num_q_tiles"],
         lambda s, t: f"lqp={t['lqp']} must be tile_q*num_q_tiles={t['tile_q']}*{t['num_q_tiles']}"),
        ("flash_attention.lq_divisible_by_lqp", lambda s, t: s["lq"] % t["lqp"] == 0,
         lambda s, t: f"lq={s['lq']} is not a multiple of lqp={t['lqp']}"),
        ("flash_attention.lk_divisible_by_lkp_stages",
         lambda s, t: s["lk"] % (t["lkp"] * t["num_cascade_stages"]) == 0,
         lambda s, t: f"lk={s['lk']} is not a multiple of lkp*num_cascade_stages={t['lkp']}*{t['num_cascade_stages']}"),
    ]


def herd_of(t: dict) -> list[int]:
    """(heads per unroll x q tiles) columns by the cascade stages."""
    return [t["num_heads_per_unroll"] * t["num_q_tiles"], t["num_cascade_stages"]]


def tile_default(s: dict, target: str) -> dict:
    cols, rows = array_columns(target), array_rows(target)
    lkp = 64 if s["dk"] % 64 == 0 and s["dv"] % 64 == 0 else s["dk"]
    hpu = 2 if s["heads_q"] % 2 == 0 else 1
    q_tiles = cols // 2  # 4 q tiles per head pair (NPU2: 2 x 4 = 8 columns)
    if hpu == 1 and cols < 8:
        q_tiles = cols
    tile_q = 64
    if s["dk"] == 256:  # Gemma3's head-first tiling: lkp 32, one head per unroll, 8 q tiles (fa_headfirst.py:49-55)
        lkp = tile_q = 32
        hpu, q_tiles = 1, cols
    while q_tiles > 1 and s["lq"] % (tile_q * q_tiles):
        q_tiles //= 2
    stages = rows
    while stages > 1 and s["lk"] % (lkp * stages):
        stages //= 2
    return {"lqp": tile_q * q_tiles, "lkp": lkp, "tile_q": tile_q, "num_q_tiles": q_tiles,
            "num_cascade_stages": stages, "num_heads_per_unroll": hpu}


def tile_warnings(s: dict, t: dict, target: str) -> list[str]:
    """The plan's note at a head_dim other than 64."""
    if s["dk"] != 64:
        return [f"head_dim {s['dk']}: mlir-air's registry runs head_dim 128 at lkp 64 with dk/dv chunks of 64 "
                "(the emulated executor models that layout)"]
    return []


def tile_note(s: dict, t: dict, herd: list[int], target: str, tiles_target: int) -> str | None:
    """Why the herd is short of the target tiles: an odd head count, lq filling fewer q tiles, lk fewer stages."""
    why = []
    if t["num_heads_per_unroll"] == 1 and s["heads_q"] % 2:
        why.append(f"{s['heads_q']} query heads (odd): one head per unroll, half the columns")
    if t["num_heads_per_unroll"] * t["num_q_tiles"] < array_columns(target) and not why:
        why.append(f"lq={s['lq']} fills {t['num_q_tiles']} q tiles of {t['tile_q']} rows per head")
    if t["num_cascade_stages"] < array_rows(target):
        why.append(f"lk={s['lk']} splits over {t['num_cascade_stages']} cascade stages only")
    return "; ".join(why) or None


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    rng = np.random.default_rng(HARNESS_SEED)
    hq, hkv = shape["heads_q"], shape["heads_kv"]
    q = harness_bf16(rng.standard_normal((hq, shape["lq"], shape["dk"])))  # float64 draws -> float32 -> bf16
    k = harness_bf16(rng.standard_normal((hkv, shape["lk"], shape["dk"])))
    v = harness_bf16(rng.standard_normal((hkv, shape["lk"], shape["dv"])))
    # a sliding window (--window, attn_npu2.py:1358-1363) is masked in the reference too, under causal only:
    # `mask |= np.tril(ones, k=-window)` drops keys at or before p - window (attn_npu2.py:1464-1469)
    window = shape.get("window") if shape["causal"] else None
    ref = attention_reference(q, k, v, bool(shape["causal"]), window=window)
    return HarnessCase({"q": q, "k": k, "v": v}, harness_bf16(ref), "bf16",
                       "flash_attention/kernel_fusion_based/attn_npu2.py:1439-1473")


_MAKE = ("make -C {mlir_air}/programming_examples/flash_attention/kernel_fusion_based run SCRIPT={script} LQ={LQ} "
         "LK={LK} LQP={lqp} LKP={lkp} DK={DK} DV={DV} NUM_HEADS={NUM_HEADS} NUM_KV_HEADS={NUM_KV_HEADS} "
         "NUM_Q_TILES={num_q_tiles} EXTRA_PY_FLAGS=")
HARNESS = {  # precision and latency from separate runs (FlashAttention_bf16.md:226; the module docstring's `table`)
    "tile_keys": ["lqp", "lkp", "num_q_tiles", "num_cascade_stages", "num_heads_per_unroll", "script"],
    "command": _MAKE + "{switches}",
    "latency_command": _MAKE + "{latency_switches}",
    "latency_format": "transcript",
    "defaults": {"script": "attn_npu2.py", "lqp": 256, "lkp": 64, "num_q_tiles": 4, "num_cascade_stages": 4,
                 "num_heads_per_unroll": 2, "causal": False, "perf_iters": 20},
    "switches": {"causal": "--causal"},
    "flags": {  # value flags appended to {switches}: "--flag {}" with the variable's value
        "num_heads_per_unroll": "--num-heads-per-unroll {}",
        "window": "--window {}",  # a sliding-window row (attn_npu2.py:1358-1359; Gemma3's local layers)
        "num_q_tiles": "--num-q-tiles {}",
        "num_cascade_stages": "--num-cascade-stages {}",
    },
    "latency_flags": {"perf_iters": "--perf-iters {}"},  # appended to {latency_switches} only
    "aliases": {  # other spellings a caller's shape may use (the catalog's are heads_q/heads_kv)
        "LQ": ["lq", "seq"],
        "LK": ["lk", "seq"],
        "DK": ["dk", "head_dim", "D"],
        "DV": ["dv", "head_dim", "D"],
        "NUM_HEADS": ["heads_q", "n_heads", "heads", "H"],
        "NUM_KV_HEADS": ["heads_kv", "n_kv_heads", "kv_heads", "Hkv"],
    },
}


def twin_flags(p) -> None:  # attn_npu2.py:1257-1388
    for name, default in (("lk", 512), ("lq", 512), ("lqp", 256), ("lkp", 64), ("dk", 64), ("dv", 64),
                          ("num-cascade-stages", 4), ("num-q-tiles", 4), ("num-heads-per-unroll", 2),
                          ("num-heads", 2)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--num-kv-heads", type=int, default=None)
    p.add_argument("--compile-mode", choices=["compile-only", "compile-and-run"], default="compile-and-run")
    p.add_argument("--output-format", choices=["xclbin", "elf"], default="elf")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--window", type=int, default=None)
    p.add_argument("--causal-skip", action="store_true")
    p.add_argument("--dv-tile", type=int, default=None)
    p.add_argument("--perf-iters", type=int, default=0)


def twin_check(a) -> tuple:  # attn_npu2.py:111-158, messages verbatim
    hkv = a.num_kv_heads if a.num_kv_heads is not None else a.num_heads
    dv_tile = a.dv_tile if a.dv_tile is not None else a.lkp
    assert a.lq % a.lqp == 0, f"lq ({a.lq}) must be divisible by lqp ({a.lqp})"
    assert a.lqp % a.num_q_tiles == 0, f"lqp ({a.lqp}) must be divisible by num_q_tiles ({a.num_q_tiles})"
    assert a.lk % a.lkp == 0, f"lk ({a.lk}) must be divisible by lkp ({a.lkp})"
    assert a.lk % (a.lkp * a.num_cascade_stages) == 0, (
        f"lk ({a.lk}) must be divisible by lkp * num_cascade_stages ({a.lkp * a.num_cascade_stages})")
    assert a.dk % a.lkp == 0, f"dk ({a.dk}) must be divisible by dk_tile/lkp ({a.lkp})"
    assert a.dv % dv_tile == 0, f"dv ({a.dv}) must be divisible by dv_tile ({dv_tile})"
    assert dv_tile % 8 == 0, f"dv_tile ({dv_tile}) must be a multiple of the mmul 8"
    if a.causal:
        assert a.lq == a.lk, f"Causal masking requires lq == lk, got lq={a.lq}, lk={a.lk}"
        assert a.lqp // a.num_q_tiles == a.lkp, (
            f"Causal masking requires tile_size_q == lkp, got tile_size_q={a.lqp // a.num_q_tiles}, lkp={a.lkp}")
    assert not a.causal_skip or a.causal, "causal_skip requires causal=True"
    if a.window is not None:  # attn_npu2.py:139-143
        assert a.causal, "window requires causal=True"
        assert a.window % a.lkp == 0, f"window ({a.window}) must be a multiple of the block size lkp ({a.lkp})"
    assert hkv > 0, f"num_kv_heads must be positive, got {hkv}"
    assert a.num_heads % hkv == 0, f"num_heads ({a.num_heads}) must be divisible by num_kv_heads ({hkv})"
    assert a.num_heads % a.num_heads_per_unroll == 0, (
        f"num_heads ({a.num_heads}) must be divisible by num_heads_per_unroll ({a.num_heads_per_unroll})")
    flops = 2.0 * a.num_heads * a.lq * a.lk * (a.dk + a.dv) * (0.5 if a.causal else 1.0)  # :1487-1489
    shape = {"lq": a.lq, "lk": a.lk, "dk": a.dk, "dv": a.dv, "heads_q": a.num_heads, "heads_kv": hkv,
             "causal": bool(a.causal), **({"window": a.window} if a.window else {})}
    return NAME, shape, None, {"lqp": a.lqp, "lkp": a.lkp}, flops, a.compile_mode != "compile-and-run"


def twin_profile(a, figures) -> None:
    """test_elf_npu2.cpp:230-267's timer lines for `profile flash_attention --lq LQ --lk LK --dk DK --dv DV
    --num-heads H [--num-kv-heads HKV]`, one modelled figure for every statistic (`figures`: the cost model's)."""
    hkv = a.num_kv_heads or a.num_heads
    shape = {"lq": a.lq, "lk": a.lk, "dk": a.dk, "dv": a.dv, "heads_q": a.num_heads, "heads_kv": hkv,
             "causal": False}
    us = figures(NAME, shape)["latency_us"]
    g = a.num_heads * (a.lq * a.lk * a.dk * 2 + a.lk * a.lq * a.dv * 2) / (us * 1e-6) / 1e9
    print("Flash Attention Benchmark (ELF format)")
    print(f"  num_heads={a.num_heads}, lq={a.lq}, lk={a.lk}, dk={a.dk}, dv={a.dv}")
    print(f"Avg NPU attention time: {us}us.\nAvg NPU gflops: {g}\nMin NPU attention time: {us}us.\n"
          f"Max NPU gflops: {g}\nMax NPU attention time: {us}us.\nMin NPU gflops: {g}\n"
          f"Median NPU attention time: {us}us.\nStddev NPU attention time: 0us.\n"
          f"Raw latencies (us): {','.join([str(us)] * 20)}")


TWIN = TwinStandIn(
    directory="flash_attention/kernel_fusion_based",
    # Makefile:9-22 (vars), :55 (run, EXTRA_PY_FLAGS appended), :59-64 (profile: ELF timer, no NUM_KV_HEADS)
    variables="SCRIPT ?= attn_npu2.py\nLK ?= 512\nLKP ?= 64\nLQ ?= 512\nLQP ?= 256\nDK ?= 64\nDV ?= 64\n"
              "NUM_HEADS ?= 2\nNUM_KV_HEADS ?= $(NUM_HEADS)\nNUM_Q_TILES ?= 4\nEXTRA_PY_FLAGS ?=\n",
    flags="--lk $(LK) --lkp $(LKP) --lq $(LQ) --lqp $(LQP) --dk $(DK) --dv $(DV) --num-heads $(NUM_HEADS) "
          "--num-kv-heads $(NUM_KV_HEADS) $(EXTRA_PY_FLAGS)",
    extra_targets="profile:\n\tmkdir -p $(BUILD_DIR) && cd $(BUILD_DIR) && $(TWIN) flash_attention --compile-mode "
                  "compile-only --lk $(LK) --lkp $(LKP) --lq $(LQ) --lqp $(LQP) --dk $(DK) --dv $(DV) --num-heads "
                  "$(NUM_HEADS) && $(TWIN) profile flash_attention --lq $(LQ) --lk $(LK) --dk $(DK) --dv $(DV) "
                  "--num-heads $(NUM_HEADS)\n",
    peano_only=False,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="Compilation complete.",
    profile=twin_profile,
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    lq, lk, dk, dv, H, Hkv = s["lq"], s["lk"], s["dk"], s["dv"], s["heads_q"], s["heads_kv"]
    hpu, lqp = t["num_heads_per_unroll"], t["lqp"]
    tiles = hpu * t["num_q_tiles"] * t["num_cascade_stages"]
    # Q.K^T and P.V over every (q, k) block: the registry shows causal masking saves no time (16384^2, 2 heads:
    # 39.6 ms causal vs 40.1 ms not), so the whole square is counted.
    macs = H * lq * lk * (dk + dv) / tiles
    iters = int(math.ceil(H / hpu)) * int(math.ceil(lq / lqp))  # (head group, q chunk) iterations of the herd
    share = hpu if (H // Hkv) >= hpu else 1  # heads of one unroll share a K/V stream under GQA
    kv_bytes = iters * lk * (dk + dv) * 2.0 * hpu / share
    chunked = dk > t["lkp"] or dv > t["lkp"]  # head_dim 128 at lkp 64: dk/dv processed in 64-wide chunks
    return {"launch_s": 1.0, "fa_s_pipeline_fill": 1.0,
            "fa_s_per_mac_chunked" if chunked else "fa_s_per_mac": macs,
            "fa_s_per_score": H * lq * lk / tiles,  # online-softmax work: one bf16 score per (q, k) pair
            "fa_s_per_iteration": float(iters), "fa_s_per_kv_byte": kv_bytes}


CONSTANTS = {
    "fa_s_pipeline_fill": 0.0005265,
    "fa_s_per_mac": 1.302e-12,
    "fa_s_per_mac_chunked": 2.069e-11,
    "fa_s_per_score": 2e-09,
    "fa_s_per_iteration": 3.996e-05,
    "fa_s_per_kv_byte": 2.99e-12,
}
EVIDENCE = {
    "fa_s_pipeline_fill": "flash attention's per-launch cascade set-up beyond the common floor: 0.53 ms; the "
                          "512x512 2-head row (0.73 ms, FlashAttention_bf16.md:151).",
    "fa_s_per_mac": "Q.K^T and P.V MACs per tile at lkp = head_dim = 64: at the per-tile peak floor (the FA "
                    "kernel is softmax-bound, below).",
    "fa_s_per_mac_chunked": "MACs per tile in the dk/dv-chunked layout (head_dim 128 at lkp 64): 1/4.8e10 MAC/s; "
                            "the head_dim-128 rows FlashAttention_bf16.md:155-156, 159, 161-164.",
    "fa_s_per_score": "online softmax per score per tile (bf16 exp, max, rescale): 2.0 ns; the head_dim-64 rows.",
    "fa_s_per_iteration": "per (head group, q chunk) herd iteration (Q load, O store, state reset): 40 us; "
                          "heads sweep at 512x512 (2/12/64 heads, lines 151-153).",
    "fa_s_per_kv_byte": "K/V stream per iteration: 1/334 GB/s effective (broadcast over the cascade); the GQA "
                        "32/8 vs 32/32 rows (lines 149-150).",
}


# --- mlir-air's registry page (e972f29): the projection's catalog entry, its columns, the importer -----------


def index_cells(row, fmt) -> list[str]:
    s, b = fmt.shape(row), fmt.best_of(row)
    t = b.tile if b else {}
    return [f"{s.get('lq')}×{s.get('lk')}", f"{s.get('dk')}/{s.get('dv')}",
            f"{s.get('heads')}/{s.get('kv_heads')}", "✓" if s.get("causal") else "✗",
            str(max(1, int(s.get("dv") or 64) // int(t.get("lkp", 64) or 64))),
            fmt.mark(b, fmt.latency_text(b.latency_us if b else None)), fmt.num(fmt.g(b), b, bold=True),
            fmt.sci2(b.mean_rel_L1 if b else None), fmt.status_cell(row)]


def details_cells(method, row, fmt) -> list[str]:
    """The index's columns with abs_err max before Status."""
    b, cells = fmt.best_of(row), index_cells(row, fmt)
    return cells[:-1] + [fmt.sci2(b.max_abs if b else None), cells[-1]]


def catalog_shape(s: dict) -> dict:
    """A page row's shape (its columns: heads, kv_heads) as the catalog's (heads_q, heads_kv)."""
    return {"lq": s["lq"], "lk": s["lk"], "dk": s["dk"], "dv": s["dv"], "heads_q": s["heads"],
            "heads_kv": s["kv_heads"], "causal": bool(s["causal"])}


REGISTRY_PAGE = CatalogPage(
    title="FlashAttention (BF16, GQA)", page="FlashAttention_bf16",
    columns=("lq", "lk", "dk", "dv", "heads", "kv_heads", "causal"),
    aliases={
        "seq_q": "lq", "q_len": "lq", "seq_k": "lk", "kv_len": "lk", "seq": "lq", "head_dim": "dk",
        "d": "dk", "n_heads": "heads", "num_heads": "heads", "hq": "heads", "n_kv_heads": "kv_heads",
        "num_kv_heads": "kv_heads", "hkv": "kv_heads", "heads_q": "heads", "heads_kv": "kv_heads",
    },
    spellings=("flashattention", "attention"),
    math="O = softmax(Q K^T / sqrt(dk)) V, GQA, causal or not", datapath="two BFP16 MMAs + bf16 online softmax",
    npu2_mean_rel_L1="3.8e-2 ... 5.5e-2", target_tiles=32,
    index=("lq×lk", "dk/dv", "heads q/kv", "causal", "dv_chunks", "latency", "GFLOP/s", "mean_rel_L1", "Status"),
    details=(("", ("lq×lk", "dk/dv", "heads q/kv", "causal", "dv_chunks", "latency", "GFLOP/s", "mean_rel_L1",
                   "abs_err max", "Status")),),
    index_cells=index_cells, details_cells=details_cells, unit="GFLOP/s", tolerance_label="bf16",
    listed_after="layernorm",  # supported_kernels.md lists FlashAttention after LayerNorm
    catalog_shape=catalog_shape,
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape of one upstream row (`lq×lk`, `dk/dv`, `heads q/kv`, causal `✓`) and its GFLOP/s cell."""
    c = dict(zip(header, cells))
    lq, lk = cell.ints(c["lq×lk"])[:2]
    dk, dv = cell.ints(c["dk/dv"])[:2]
    hq, hkv = cell.ints(c["heads q/kv"])[:2]
    return [{"shape": {"lq": lq, "lk": lk, "dk": dk, "dv": dv, "heads_q": hq, "heads_kv": hkv,
                       "causal": c.get("causal", "").startswith("✓")}, "gflops_cell": c.get("GFLOP/s", "")}]
