"""gemm: the bf16 matmul of mlir-air's matrix_multiplication/bf16_in_bf16_out and bf16_in_fp32_out (three contracts:
f32-out, bf16-out-high, bf16-out-low).

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29 unless named:

  layout     gemm(a (M, K), b (K, N)) -> (M, N), weights pre-transposed at load; `static_key` names a resident B.
  reference  FP32 A @ B on bf16 inputs N(0, 1/K) (the catalog's own draw, 1/sqrt(K) scale).
  tolerance  docs/numerics.md's leaf-kernel table (GEMM): rtol 1.6e-2, atol 1.5e-3 (f32-out, bf16-out-high; sized to
             the K=8192 Down projection's datapath error), 4e-3 (bf16-out-low, bf16 partial sums).
  emulated   BFP16 operands (8 along K) into one FP32 BLAS sum (npu2; npu1's native bf16 MMA skips the BFP16 step);
             bf16-out-high: one cast, floor after fused-cast's separate cast launch, RNE in mm.cc's drain;
             bf16-out-low: the partial sum rounded to bf16 after every L1 K tile (direct codegen); an illegal tile
             models what the launch grid and the K loops leave out (npu_kernels.numerics.executors.emulated_gemm).
  torch      bf16 matmul in GEMM_PANEL_N column panels (FP32 accumulate inside, one rounding); f32-out in FP32.
  tile rules N % (tile_n*herd_n) == 0 (silent corruption, checked first), M % (tile_m*herd_m) == 0,
             K % tile_k_l2 == 0, tile_k_l2 % tile_k_l1 == 0, tile_k_l2*N <= 1,048,576 (B-tile DMA stride),
             drain tile_m <= 32 (L1), tile_m and tile_n multiples of 16 and tile_k_l1 of 8 (mm.cc mmul),
             herd within the array, a method mlir-air knows.
  default    the fullest herd (8x4 on NPU2) whose tiles divide M and N, tile_m 64 (fused-cast) / 32 (drain)
             shrinking to 16, tile_n per `gemm_tile_n`, tile_k_l2 per `gemm_tile_k_l2`, method by M*K*N.
  harness    matrix_multiplication/bf16/run.py:59,493-507 (seed 42, float64 draws scaled 1/sqrt(K), cast to bf16).
  table      bf16_in_{bf16,fp32}_out/Makefile's `run`: a command per contract (HIGH_PRECISION / METHOD, CODEGEN).
  twin       bf16_in_bf16_out/run.py:1093-1139, bf16_in_fp32_out/run.py:1039-1063 (flags), run.py:62-65 (asserts).
  cost       MACs per tile (mm.cc or direct codegen), inner calls, output blocks, L2 K-chunks, the DDR stream, the
             fused-cast's extra cast launch: the GEMM rows of anchors.toml (GEMM_bf16_in_{bf16,fp32}_out.json).
  registry   two pages, kernel_registry/details/GEMM_bf16_in_{bf16,fp32}_out.{md,json}; GFLOP/s; a best measured
             configuration per shape and tier (the JSON registry_lookup.gemm_config reads).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from npu_kernels.numerics.bf16 import f32, widened
from npu_kernels.numerics.harness_case import HarnessCase, harness_bf16, sequential_matmul_f32
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn
from npu_kernels.numerics.references import bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure
from npu_kernels.numerics.tile_common import GEMM_B_STRIDE_LIMIT, Rule, array_columns, array_rows, halvings
from npu_kernels.thresholds import GEMM_HIGH_PRECISION_MIN_K, RTOL

NAME = "gemm"
CONTRACTS = ("f32-out", "bf16-out-high", "bf16-out-low")

# (contract) -> (rtol, atol), from npu_kernels.thresholds' table, where they were declared until this move
TOLERANCES = {
    "f32-out": (RTOL, 1.5e-3),  # atol sized to the K=8192 Down projection's datapath error
    "bf16-out-high": (RTOL, 1.5e-3),
    "bf16-out-low": (RTOL, 4e-3),  # bf16 partial sums: the low-precision tier's wider error
}
TOLERANCE_SOURCE = ("docs/numerics.md's leaf-kernel table (GEMM: rtol 1.6e-2; atol 1.5e-3 on f32-out and bf16-out-high, "
                    "sized to the K=8192 Down projection's datapath error; 4e-3 on bf16-out-low, bf16 partial sums), "
                    "the NUMERICS tolerances npu_kernels.thresholds carried; NPU2 measures 9.3e-3 to 1.9e-2 "
                    "(GEMM_bf16_in_{bf16,fp32}_out.md)")

# The executor runs at the planned tile: the emulated datapath below takes its tile (the K loops, the bf16-out-low
# tier's bf16 partial sums per L1 K tile and the method's cast), so the in-process run and the twin hand the plan's
# tile over.
CALLS_WITH_TILE = True

THROUGHPUT = "gflops"  # the cost model's figure: GFLOP/s (2*M*K*N over the latency)

# mlir-air's GEMM registry pages quote GFLOP/s (details/GEMM_bf16_in_{bf16,fp32}_out.md at e972f29): the cost
# model's leave-one-out error of a gemm row is taken on that figure (measured over predicted).
FIT_METRIC = "GFLOP/s"

# mlir-air's GEMM pages keep a best measured configuration per shape and tier (details/GEMM_bf16_in_{bf16,fp32}_out.json
# `best.high` / `best.low` at e972f29, read by registry_lookup.gemm_config): the registry's lookup answers from it.
BEST_CONFIG = True


def method_tier(shape: dict, contract: str, tile: dict) -> tuple[str, str]:
    """(method, tier) a run used, in mlir-air's registry names (details/GEMM_bf16_in_{bf16,fp32}_out.json's
    `methods.<name>.tier` at e972f29): bf16-out high -> fused-cast / drain (auto resolved as run.py:1147-1151 does),
    bf16-out low -> direct (tier low), f32-out -> external / direct (the CODEGEN, tier high)."""
    t = {k.lower(): v for k, v in tile.items()}
    if contract == "bf16-out-low":
        return "direct", "low"
    if contract == "f32-out":
        return str(t.get("codegen") or "external"), "high"
    method = str(t.get("method") or "auto")
    if method == "auto":
        method = "fused-cast" if shape["M"] * shape["K"] * shape["N"] >= FUSED_CAST_MIN_MKN else "drain"
    return method, "high"


# --- the catalog entry -------------------------------------------------------------------------------------


def make_inputs(s, rng):
    scale = 1.0 / math.sqrt(s["K"])
    return {"a": bf16_randn(rng, (s["M"], s["K"]), scale), "b": bf16_randn(rng, (s["K"], s["N"]), scale)}


def reference(i, s):
    return np.matmul(i["a"], i["b"], dtype=np.float32)


def call(ex, i, s, contract, tile):
    return ex.gemm(i["a"], i["b"], contract=contract, tile=tile)


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("M", "K", "N"),
    contracts={
        "f32-out": Contract("f32-out", *TOLERANCES["f32-out"], "f32", "bf16->f32, FP32 accumulate", "high"),
        "bf16-out-high": Contract("bf16-out-high", *TOLERANCES["bf16-out-high"], "bf16",
                                  "bf16->bf16 high precision (FP32 accumulate, one cast)", "high"),
        "bf16-out-low": Contract("bf16-out-low", *TOLERANCES["bf16-out-low"], "bf16",
                                 "bf16->bf16 low precision (bf16 partial sums, direct codegen)", "low"),
    },
    default_contract="bf16-out-high",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 2.0 * s["M"] * s["K"] * s["N"],
    bytes_fn=lambda s: 2.0 * (s["M"] * s["K"] + s["K"] * s["N"] + s["M"] * s["N"]),
    output_elements_fn=lambda s: s["M"] * s["N"],
    npu2={
        "f32-out": NpuFigure(9.3e-3, 9.3e-3, 9.5e-3, "2048x2048x2048, 64/512/32/128"),
        "bf16-out-high": NpuFigure(9.7e-3, 9.3e-3, 9.9e-3, "2048x2048x2048 fused-cast (drain 9.3e-3)"),
        "bf16-out-low": NpuFigure(1.3e-2, 1.3e-2, 1.9e-2, "2048x2048x2048, tile_k_l2 512 (4 L2 tiles)"),
    },
    registry_shape={"M": 2048, "K": 2048, "N": 2048},
    small_shape={"M": 64, "K": 2048, "N": 64},  # K >= 1024: the high-precision atol assumes it
    target_tiles={"npu2": 32, "npu1": 16},
    fidelity_band=0.15,
)

# NPU2 low-precision GEMM by K (mlir-air kernel_registry GEMM_bf16_in_bf16_out.md, low-precision table;
# tile_k_l1 = 32 throughout). NUMERICS quotes 1.3e-2 (4-8 L2 tiles, K 2048) and 1.9e-2 (32, K 8192).
NPU2_GEMM_LOW_BY_K = {512: 1.0e-2, 1024: 1.1e-2, 2048: 1.3e-2, 4096: 1.5e-2, 8192: 1.9e-2}


def npu2_low_precision_figure(K: int) -> float | None:
    """The registry's NPU2 low-precision GEMM mean_rel_L1 at reduction length K (None: not measured)."""
    return NPU2_GEMM_LOW_BY_K.get(int(K))


# --- executors ----------------------------------------------------------------------------------------------


def fp32(self, a, b, *, contract: str = "bf16-out-high", tile=None, static_key=None):
    """The FP32 reference executor's gemm (npu_kernels.numerics.executors.base.Fp32Executor)."""
    # C-contiguous B: a pipeline's weight comes as a transposed view (of bf16 bits, widened exactly), and BLAS
    # would sum a transposed operand in another order
    return np.asarray(a, np.float32) @ np.ascontiguousarray(widened(b))


def _check_contract(contract: str) -> None:
    if contract not in CONTRACTS:
        raise ValueError(f"unknown gemm contract {contract!r}; expected one of {', '.join(CONTRACTS)}")


def emulated(ex, a, b, *, contract: str = "bf16-out-high", tile=None, static_key=None):
    """The emulated NPU2 datapath (see the module docstring): BFP16 operands, one FP32 sum, the contract's cast."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_elementwise import rounded
    from npu_kernels.numerics.executors.emulated_gemm import accumulate_bf16, covered, k_used

    _check_contract(contract)
    with ex.timer.time(NAME):
        a = f32(a)
        M, K = a.shape
        if np.shape(b)[0] != K:
            raise ValueError(f"gemm: a is {a.shape} but b is {np.shape(b)}")
        N = np.shape(b)[1]
        # a partial user tile is filled with the planner's keys for this shape; no tile: the Makefile's defaults
        t = {**tile_default(SPEC.normalize_shape({"M": M, "K": K, "N": N}), ex.target), **(tile or {})} if tile \
            else _TILE_DEFAULTS
        qb = ex._gemm_operand(b, static_key)
        qa = ex._rows(lambda x: ex._mma_operand(x, 1), [a]) if ex.bfp16 else a  # blocks along K
        if tile is not None:
            used = k_used(K, t)
            if used is not None:  # an illegal K tiling: the loops never reach part of K
                qa, qb = qa[:, used], qb[used]
        if contract == "bf16-out-low":
            c = accumulate_bf16(qa, qb, int(t["tile_k_l1"]))
        else:
            c = np.matmul(qa, qb)
            if contract == "bf16-out-high":
                c = rounded(c, "floor" if executed_method(t, M, K, N) == "fused-cast" else "rne")
        if tile is not None:  # the launch grid floors M/(tile_m*herd_m) and N/(tile_n*herd_n)
            rows = covered(M, int(t["tile_m"]) * int(t["herd_m"]))
            cols = covered(N, int(t["tile_n"]) * int(t["herd_n"]))
            c[rows:, :] = 0.0
            c[:, cols:] = 0.0
        return c


def executed_method(t: dict, M: int, K: int, N: int) -> str:
    """The high-precision method a tile runs: its own, `auto` resolved as bf16_in_bf16_out/run.py:1147-1151 does."""
    method = t.get("method") or "auto"
    if method == "auto":
        return "fused-cast" if M * K * N >= FUSED_CAST_MIN_MKN else "drain"
    if method not in ("fused-cast", "drain"):
        raise ValueError(f"unknown gemm method {method!r} (auto | fused-cast | drain)")
    return method


GEMM_PANEL_N = 64  # divides every fused part (heads x head_dim 64 / 128, the MLP width of a tile-legal model)


def torch(ex, a, b, *, contract: str = "bf16-out-high", tile=None, static_key=None):
    """bf16 matmul (FP32 accumulate inside, one rounding); `f32-out` keeps the FP32 result. The low-precision
    contract has no GPU counterpart: it runs the same FP32-accumulate matmul (and is judged by its own, looser
    tolerance). The product runs in fixed panels of GEMM_PANEL_N output columns: a CPU BLAS picks its blocking by
    N (oneDNN's AMX bf16 GEMM gives 48x512x768 columns 0..511 that differ from the 48x512x512 product in the last
    bit), while NPU2 computes every output tile on its own. With panels a column's value never depends on how wide
    the matrix around it is, so fusing Q/K/V or gate/up changes nothing. Each panel is handed to the matmul as a
    contiguous copy: the same product bit for bit (tests/unit/test_torch_exec.py), and on a CPU without bf16
    instructions a strided panel took torch's slow path (2026-12-07, one thread: SmolLM2's LM head in prefill,
    7x576x49152, 2.05 s -> 0.13 s)."""
    import torch as _torch

    _check_contract(contract)
    with ex.timer.time(NAME), _torch.inference_mode():
        bt = ex._static(b, static_key, "gemm.b")
        at = ex._t(a)
        if contract == "f32-out":
            at, bt = at.float(), bt.float()
        return ex._np(_torch.cat([at @ bt[:, j : j + GEMM_PANEL_N].contiguous()
                                  for j in range(0, bt.shape[1], GEMM_PANEL_N)], 1))


# --- tile rules, default, herd and notes --------------------------------------------------------------------

FUSED_CAST_MIN_MKN = 4e9  # M*K*N at and above which `auto` picks fused-cast (mlir-air's GEMM harness rule)
METHODS = ("auto", "fused-cast", "drain", "direct")  # direct: the bf16-out-low tier's codegen


def tile_rules(target: str) -> list[Rule]:
    cols, rows = array_columns(target), array_rows(target)
    return [
        ("gemm.N_divisible_by_tile_n_herd_n", lambda s, t: s["N"] % (t["tile_n"] * t["herd_n"]) == 0,
         lambda s, t: f"N={s['N']} is not a multiple of tile_n*herd_n={t['tile_n']}*{t['herd_n']}; not asserted "
         "by the compiler - the uncovered columns are silently never written"),
        ("gemm.M_divisible_by_tile_m_herd_m", lambda s, t: s["M"] % (t["tile_m"] * t["herd_m"]) == 0,
         lambda s, t: f"M={s['M']} is not a multiple of tile_m*herd_m={t['tile_m']}*{t['herd_m']}"),
        ("gemm.K_divisible_by_tile_k_l2", lambda s, t: s["K"] % t["tile_k_l2"] == 0,
         lambda s, t: f"K={s['K']} is not a multiple of tile_k_l2={t['tile_k_l2']}"),
        ("gemm.tile_k_l2_divisible_by_tile_k_l1", lambda s, t: t["tile_k_l2"] % t["tile_k_l1"] == 0,
         lambda s, t: f"tile_k_l2={t['tile_k_l2']} is not a multiple of tile_k_l1={t['tile_k_l1']}"),
        ("gemm.b_tile_dma_stride", lambda s, t: t["tile_k_l2"] * s["N"] <= GEMM_B_STRIDE_LIMIT,
         lambda s, t: f"tile_k_l2*N = {t['tile_k_l2'] * s['N']} exceeds the DMA stride limit {GEMM_B_STRIDE_LIMIT}"),
        ("gemm.drain_tile_m_le_32", lambda s, t: t.get("method") != "drain" or t["tile_m"] <= 32,
         lambda s, t: f"the drain method holds an f32 accumulator and a bf16 drain buffer: tile_m={t['tile_m']} "
         "> 32 overflows the 64 KiB L1"),
        ("gemm.mmul_tile_m_multiple_of_16", lambda s, t: t["tile_m"] % 16 == 0,
         lambda s, t: f"tile_m={t['tile_m']} is not a multiple of 16 (2x2 unrolled 8x8x8 MMA)"),
        ("gemm.mmul_tile_n_multiple_of_16", lambda s, t: t["tile_n"] % 16 == 0,
         lambda s, t: f"tile_n={t['tile_n']} is not a multiple of 16 (2x2 unrolled 8x8x8 MMA)"),
        ("gemm.mmul_tile_k_l1_multiple_of_8", lambda s, t: t["tile_k_l1"] % 8 == 0,
         lambda s, t: f"tile_k_l1={t['tile_k_l1']} is not a multiple of the MMA depth 8"),
        ("gemm.herd_fits_array", lambda s, t: 1 <= t["herd_m"] <= cols and 1 <= t["herd_n"] <= rows,
         lambda s, t: f"herd {t['herd_m']}x{t['herd_n']} does not fit the {cols}x{rows} array"),
        ("gemm.method_known", lambda s, t: t.get("method", "auto") in METHODS,
         lambda s, t: f"method {t.get('method')!r} is not one of {', '.join(METHODS)}"),
    ]


# a bound this planner keeps for shapes nobody measured, which measured rows have passed beyond: the B-tile stride
# tile_k_l2*N <= 1,048,576 is the aie.dma_bd range the registry hit at N=9728 / 11008 / 18944
# (details/GEMM_bf16_in_bf16_out.json notes), yet 2048x2048x8192 at tile_k_l2 256 and 4096x4096x4096 at 512
# (stride 2,097,152) PASS there, and its 2048x2560x10240 note calls the bound "one step too conservative"
MEASURED_OVERRIDES = ("gemm.b_tile_dma_stride",)


def gemm_method(s: dict) -> str:
    return "fused-cast" if s["M"] * s["K"] * s["N"] >= FUSED_CAST_MIN_MKN else "drain"


def gemm_tile_n(N: int, herd_n: int = 4) -> int:
    """tile_n for N: 128, halved (64, 32) while herd_n*tile_n does not divide N; then the largest multiple
    of 16 up to 128 that does (registry: N=896 -> 32, N=960 -> 80, N=256 -> 64, N=8960 -> 64)."""
    for t in (128, 64, 32):
        if N % (t * herd_n) == 0:
            return t
    for t in range(128, 15, -16):
        if N % (t * herd_n) == 0:
            return t
    return 16


def gemm_tile_k_l2(K: int, N: int, tile_k_l1: int = 32) -> int:
    """tile_k_l2 for (K, N): 256, else 512, else the largest multiple of 64 (<= 512) dividing K, else the
    largest multiple of tile_k_l1 - always keeping the B-tile DMA stride tile_k_l2*N within 1,048,576.
    Multiples of 64 first: mlir-air's registry measured silent corruption at tile_k_l2 160, 288 and 480
    (K = 960, 1440, 320) while 64, 192, 320 and 960 were clean."""
    ok = lambda t: t > 0 and K % t == 0 and t * N <= GEMM_B_STRIDE_LIMIT  # noqa: E731
    for t in (256, 512):
        if ok(t):
            return t
    for step in (64, tile_k_l1):
        for t in range(min(512, K) // step * step, 0, -step):
            if ok(t):
                return t
    return tile_k_l1


def tile_default(s: dict, target: str) -> dict:
    """The recommended GEMM tile: the fullest herd (8x4 on NPU2) whose tiles divide M and N, tile_m 64
    (fused-cast) / 32 (drain) shrinking to 16, tile_n per `gemm_tile_n`, tile_k_l2 per `gemm_tile_k_l2`."""
    cols, rows = array_columns(target), array_rows(target)
    M, N = s["M"], s["N"]
    method = gemm_method(s)
    best = None
    for herd_n in halvings(rows):
        tile_n = gemm_tile_n(N, herd_n)
        if N % (tile_n * herd_n):
            continue
        for herd_m in halvings(cols):
            for tile_m in halvings(64 if method == "fused-cast" else 32, stop=16):
                if M % (tile_m * herd_m) == 0:
                    key = (herd_m * herd_n, tile_m, tile_n)
                    if best is None or key > best[0]:
                        best = (key, tile_m, tile_n, herd_m, herd_n)
                    break
    if best is None:  # nothing legal (tiny or ragged M/N): the full-array tile, reported as illegal
        best = (None, 64 if method == "fused-cast" else 32, gemm_tile_n(N, rows), cols, rows)
    _, tile_m, tile_n, herd_m, herd_n = best
    return {
        "tile_m": tile_m,
        "tile_k_l2": gemm_tile_k_l2(s["K"], N),
        "tile_k_l1": 32,
        "tile_n": tile_n,
        "herd_m": herd_m,
        "herd_n": herd_n,
        "method": method,
    }


def resolve_tile(s: dict, t: dict) -> dict:
    """A tile's `method: auto` as the harness resolves it for the shape (by M*K*N, `gemm_method`)."""
    return {**t, "method": gemm_method(s)} if t.get("method") == "auto" else t


def herd_of(t: dict) -> list[int]:
    """herd_m columns of herd_n rows."""
    return [t["herd_m"], t["herd_n"]]


def tile_note(s: dict, t: dict, herd: list[int], target: str, tiles_target: int) -> str | None:
    """M that does not fill the array's columns."""
    return f"M={s['M']}: herd_m {t['herd_m']} (M < tile_m*{array_columns(target)} or not a multiple of it)"


def tile_warnings(s: dict, t: dict, target: str) -> list[str]:
    """The notes a GEMM plan carries: a narrow tile_n, a tile_k_l2 held under the B-stride bound, a K whose
    high-precision atol trips (the plan's low tier), a tile_k_l2 off the multiples of 64."""
    notes = []
    if t["tile_n"] < 128 and s["N"] % (t["tile_n"] * t["herd_n"]) == 0:
        notes.append(f"N={s['N']} is not {128 * t['herd_n']}-aligned: tile_n {t['tile_n']} keeps "
                     f"herd_n*tile_n | N (tile_n 128 is ~1.3x faster where it fits)")
    if t["tile_k_l2"] < 256 and 256 * s["N"] > GEMM_B_STRIDE_LIMIT and s["K"] % 256 == 0:
        notes.append(f"tile_k_l2 {t['tile_k_l2']}, not 256: 256*N = {256 * s['N']:,} is past the B-tile DMA stride "
                     f"bound {GEMM_B_STRIDE_LIMIT:,} this planner keeps for unmeasured shapes (tile_k_l2*N = "
                     f"{t['tile_k_l2'] * s['N']:,} is within it); a measured registry row overrides the bound")
    if s["K"] < GEMM_HIGH_PRECISION_MIN_K:
        notes.append(f"K={s['K']} < {GEMM_HIGH_PRECISION_MIN_K}: outputs ~1/sqrt(K) are large enough that the high-precision atol "
                     "(1.5e-3, sized at K=8192) trips on a few near-zero-reference elements - NPU2 does the same "
                     "(registry: 1024x768x3072, 2048x896x4864); the plan runs such rows on bf16-out-low, as the registry does")
    if t["tile_k_l2"] % 64:
        notes.append(f"tile_k_l2 {t['tile_k_l2']} is not a multiple of 64: mlir-air's registry measured silent "
                     "corruption at such tilings (160, 288, 480) - check mean_rel_L1")
    return notes


# --- NPU2 cost model --------------------------------------------------------------------------------------

MMCC_METHODS = ("drain", "fused-cast", "external")  # the hand-written mm.cc inner kernel; "direct" = codegen
FUSED_CAST_METHODS = ("fused-cast",)


def _ceil(a: float, b: float) -> int:
    return int(math.ceil(a / b))


def cost_features(s, t) -> dict[str, float]:
    """MACs per compute tile (split by MMA implementation), inner kernel calls, output blocks and L2 K-chunks per
    tile, the shim/DDR bytes, and the fused-cast method's separate cast launch."""
    M, K, N = s["M"], s["K"], s["N"]
    tm, tn, tk1, tk2 = t["tile_m"], t["tile_n"], t["tile_k_l1"], t["tile_k_l2"]
    hm, hn = t["herd_m"], t["herd_n"]
    method = t.get("method", "drain")
    f32_out = t.get("out") == "fp32" or method in FUSED_CAST_METHODS
    iters = _ceil(M, tm * hm) * _ceil(N, tn * hn)  # herd-wide (hm*tm) x (hn*tn) output blocks, one per tile each
    macs = iters * tm * tn * K  # MACs each compute tile performs
    a_bytes = M * K * 2 * _ceil(N, tn * hn)  # A re-streamed once per herd column block
    b_bytes = K * N * 2 * _ceil(M, tm * hm)  # B re-streamed once per herd row block
    c_bytes = M * N * (4 if f32_out else 2)
    f = {
        "launch_s": 1.0,
        "gemm_s_per_mac_mmcc" if method in MMCC_METHODS else "gemm_s_per_mac_direct": float(macs),
        "gemm_s_per_call": float(iters * (K // tk1)),
        "gemm_s_per_block": float(iters),
        "gemm_s_per_l2_chunk": float(iters * _ceil(K, tk2)),
        "gemm_s_per_ddr_byte": float(a_bytes + b_bytes + c_bytes),
    }
    if method in FUSED_CAST_METHODS:  # the separate f32 -> bf16 cast launch: read 4 B, write 2 B per element
        f["gemm_s_cast_launch"] = 1.0
        f["gemm_s_per_ddr_byte"] += M * N * 6.0
    return f


# fitted with every other constant on anchors.toml (npu_kernels.perf.fit; npu_kernels.perf.constants says how)
CONSTANTS = {
    "gemm_s_per_mac_mmcc": 1.665e-12,
    "gemm_s_per_mac_direct": 5.936e-12,
    "gemm_s_per_call": 4.926e-08,
    "gemm_s_per_block": 4.959e-06,
    "gemm_s_per_l2_chunk": 8.136e-07,
    "gemm_s_per_ddr_byte": 1.658e-11,
    "gemm_s_cast_launch": 0.00033,
}
EVIDENCE = {
    "gemm_s_per_mac_mmcc": "time per MAC on one tile with the hand-written mm.cc kernel (drain / fused-cast / "
                           "external): 1/5.97e11 MAC/s = 78% of the 7.68e11 per-tile BFP16 peak. Fixed by the "
                           "large-K 2048-row rows (GEMM_bf16_in_*_out.json, e.g. 2048x8192x2048 8898 GF/s).",
    "gemm_s_per_mac_direct": "time per MAC with the direct-codegen inner loop: 1/1.68e11 MAC/s (3.5x slower than "
                             "mm.cc; the 'direct' rows of both GEMM JSONs, e.g. 2048x8192x2048 direct 6010 vs "
                             "external 9797 GF/s, GEMM_bf16_in_fp32_out.json).",
    "gemm_s_per_call": "per inner-kernel call (one tile_m x tile_k_l1 x tile_n MMA block: loop and pointer setup): "
                       "49 ns; the tile_n / tile_k_l1 sensitivity of the small-tile rows (N=896 tile_n 32).",
    "gemm_s_per_block": "per output block per tile (accumulator zero, drain/store of the C tile): 5.1 us; "
                        "separates short-K rows (K=512-1024) from long-K rows at equal MNK.",
    "gemm_s_per_l2_chunk": "per L2 (MemTile) K-chunk per block (a DMA round of the A/B panels): 0.81 us; the "
                           "tile_k_l2 64/128 rows (2048x2560x9728 5528 GF/s, 2048x2560x10240 4849 GF/s).",
    "gemm_s_per_ddr_byte": "shim/DDR stream: 1/60.4 GB/s for A re-streamed per herd column block, B per herd "
                           "row block, C (f32 where the cast is separate); close to EltwiseAdd's 63 GB/s "
                           "(EltwiseAdd_bf16.md:103), the array's measured DDR ceiling.",
    "gemm_s_cast_launch": "the fused-cast method's extra f32->bf16 cast launch: 330 us on top of its bytes; "
                          "fused-cast vs drain at 512^3 (482 vs 1703 GF/s), 1024^3 (2502 vs 4637), 2048x2048x512 "
                          "(4083 vs 5626) in GEMM_bf16_in_bf16_out.json.",
}


# --- mlir-air's registry pages (e972f29): one per output dtype, each with its best-configuration JSON -------------
# kernel_registry/supported_kernels.md's two GEMM tables and details/GEMM_bf16_in_{bf16,fp32}_out.{md,json}: the
# projection's catalog entries, upstream's columns (a details table per method) and the cells of one row.

_MKN = ("tile_m", "tile_k_l2", "tile_k_l1", "tile_n")
_DATAPATH = ("bf16 operands cast to BFP16 (blocks of 8 along K, shared exponent, 8-bit signed mantissa, "
             "round-half-even), FP32 accumulate")


def _mkn(s: dict) -> str:
    return f"{s['M']}×{s['K']}×{s['N']}"


def index_cells_f32(row, fmt) -> list[str]:
    s, b = fmt.shape(row), fmt.best_of(row)
    t = b.tile if b else {}
    ext, dire = fmt.best(row, "external"), fmt.best(row, "direct")
    return [_mkn(s), fmt.tile3(t, _MKN), fmt.num(fmt.g(ext), ext), fmt.num(fmt.g(dire), dire),
            fmt.sci2(b.mean_rel_L1 if b else None), fmt.used(row), fmt.status_cell(row)]


def index_cells_bf16(row, fmt) -> list[str]:
    s = fmt.shape(row)
    fc, dr, lo = fmt.best(row, "fused-cast", "high"), fmt.best(row, "drain", "high"), fmt.best(row, None, "low")
    high = fmt.pick_best([m for m in (fc, dr) if m is not None and m.on_hardware])
    l1_high = high or fc or dr
    return [_mkn(s), fmt.num(fmt.g(fc), fc, bold=fc is high and fc is not None),
            fmt.num(fmt.g(dr), dr, bold=dr is high and dr is not None), fmt.num(fmt.g(lo), lo),
            f"{fmt.sci2(l1_high.mean_rel_L1 if l1_high else None)} / {fmt.sci2(lo.mean_rel_L1 if lo else None)}",
            fmt.used(row), fmt.status_cell(row)]


def _details_cells(method, row, fmt, abs_err: bool, used: bool) -> list[str] | None:
    m = fmt.best(row, method)
    if m is None:
        return None
    cells = [_mkn(fmt.shape(row)), fmt.tile3(m.tile, _MKN), fmt.num(fmt.g(m), m), fmt.sci2(m.mean_rel_L1)]
    if abs_err:
        cells.append(fmt.sci2(m.max_abs))
    if used:
        cells.append(fmt.used(row))
    return cells + [fmt.status_cell(row, m)]


def details_cells_f32(method, row, fmt) -> list[str] | None:
    return _details_cells(method, row, fmt, abs_err=False, used=True)


def details_cells_bf16(method, row, fmt) -> list[str] | None:
    return _details_cells(method, row, fmt, abs_err=method == "direct", used=False)


REGISTRY_PAGE = (
    CatalogPage(
        key="gemm_f32", title="GEMM (BF16 in, FP32 out)", page="GEMM_bf16_in_fp32_out", columns=("M", "K", "N"),
        aliases={"m": "M", "k": "K", "n": "N"}, spellings=("gemm", "matmul"), math="C[M,N] = A[M,K] @ B[K,N]",
        datapath=_DATAPATH + "; FP32 output (always the high-precision tier)", npu2_mean_rel_L1="9.3e-3",
        target_tiles=32,
        index=("(M×K×N)", "best tile (m/kl2/kl1/n)", "external GFLOPS", "direct GFLOPS", "mean_rel_L1", "Used by",
               "Status"),
        details=(("external", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS", "mean_rel_L1", "Used by", "Status")),
                 ("direct", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS", "mean_rel_L1", "Used by", "Status"))),
        index_cells=index_cells_f32, details_cells=details_cells_f32, unit="GFLOP/s", no_json=False,
        default_contract="f32-out", flops=lambda s: 2 * s["M"] * s["K"] * s.get("N", 1),
        contracts=("f32-out",), output_dtype="f32", json="GEMM_bf16_in_fp32_out.json",
    ),
    CatalogPage(
        key="gemm_bf16", title="GEMM (BF16 in, BF16 out)", page="GEMM_bf16_in_bf16_out", columns=("M", "K", "N"),
        aliases={"m": "M", "k": "K", "n": "N"}, spellings=("gemm", "matmul"), math="C[M,N] = A[M,K] @ B[K,N]",
        datapath=_DATAPATH + "; high tier: one FP32->bf16 cast at the end; low tier: the partial sum "
        "is truncated to bf16 once per L2 tile (K / tile_k_l2 times)",
        npu2_mean_rel_L1="9.3-9.9e-3 (high) / 1.3e-2-1.9e-2 (low)", target_tiles=32,
        index=("(M×K×N)", "high-prec fused-cast", "high-prec drain", "low-prec direct", "mean_rel_L1 (high / low)",
               "Used by", "Status"),
        details=(("fused-cast", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS (incl. cast)", "mean_rel_L1", "Status")),
                 ("drain", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS", "mean_rel_L1", "Status")),
                 ("direct", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS", "mean_rel_L1", "abs_err max", "Status"))),
        index_cells=index_cells_bf16, details_cells=details_cells_bf16, unit="GFLOP/s", no_json=False,
        default_contract="bf16-out-high", flops=lambda s: 2 * s["M"] * s["K"] * s.get("N", 1),
        contracts=("bf16-out-high", "bf16-out-low"), output_dtype="bf16", json="GEMM_bf16_in_bf16_out.json",
    ),
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape of one upstream GEMM table row: the three integers of its first (`M×K×N`) cell. The figures are
    the JSON's (registry.importer reads details/GEMM_*.json; a table row is checked against it)."""
    nums = cell.ints(cells[0]) if cells else []
    if len(nums) < 3:
        raise ValueError("not a GEMM shape row: its first cell holds no three integers")
    return [{"shape": {"M": nums[0], "K": nums[1], "N": nums[2]}, "tile": {}}]


# --- the twin's stand-ins: mlir-air has two GEMM harness directories, one script each ---------------------------


def _twin_flags(p: argparse.ArgumentParser) -> None:
    """The flags both scripts share (bf16_in_bf16_out/run.py:1093-1139, bf16_in_fp32_out/run.py:1039-1063)."""
    for name in ("m", "k", "n"):
        p.add_argument(f"--{name}", type=int, default=512)
    p.add_argument("--tile-m", type=int, default=64)
    p.add_argument("--tile-k-l2", type=int, default=256)
    p.add_argument("--tile-k-l1", type=int, default=32)
    p.add_argument("--tile-n", type=int, default=128)
    p.add_argument("--herd-m", type=int, default=8)
    p.add_argument("--herd-n", type=int, default=4)
    p.add_argument("--arch", choices=["aie2", "aie2p"], default="aie2p")
    p.add_argument("--compile-mode", choices=["compile-only", "compile-and-xclbin", "compile-and-run"],
                   default="compile-and-run")
    p.add_argument("--perf-iters", type=int, default=0)


def twin_flags_bf16(p: argparse.ArgumentParser) -> None:
    _twin_flags(p)
    p.add_argument("--high-precision", choices=["true", "false"], default="true")
    p.add_argument("--method", choices=["auto", "fused-cast", "drain"], default="auto")
    p.add_argument("--drain-chunks", type=int, default=1)
    p.add_argument("--cast-tile-n", type=int, default=2048)


def twin_flags_f32(p: argparse.ArgumentParser) -> None:
    _twin_flags(p)
    p.add_argument("--codegen", choices=["external", "direct"], default="external")


def _twin_check(a, contract: str, method: str) -> tuple:  # run.py:62-65 (both scripts)
    assert a.m % (a.tile_m * a.herd_m) == 0
    assert a.k % a.tile_k_l2 == 0
    assert a.tile_k_l2 % a.tile_k_l1 == 0
    assert a.n % (a.tile_n * a.herd_n) == 0
    tile = {"tile_m": a.tile_m, "tile_k_l2": a.tile_k_l2, "tile_k_l1": a.tile_k_l1, "tile_n": a.tile_n,
            "herd_m": a.herd_m, "herd_n": a.herd_n, **({"method": method} if method else {})}
    return ("gemm", {"M": a.m, "K": a.k, "N": a.n}, contract, tile, 2.0 * a.m * a.k * a.n,
            a.compile_mode != "compile-and-run")


def twin_check_bf16(a) -> tuple:
    contract = "bf16-out-high" if str(a.high_precision).lower() in ("1", "true", "yes", "on") else "bf16-out-low"
    method = a.method if a.method != "auto" else ("fused-cast" if a.m * a.k * a.n >= FUSED_CAST_MIN_MKN else "drain")
    return _twin_check(a, contract, method)


def twin_check_f32(a) -> tuple:
    return _twin_check(a, "f32-out", "")


TWIN = (
    TwinStandIn(
        kind="gemm",
        directory="matrix_multiplication/bf16_in_bf16_out",
        # Makefile:15-29 (vars), :60-65 (run)
        variables="TILE_M ?= 64\nTILE_K_L2 ?= 256\nTILE_K_L1 ?= 32\nTILE_N ?= 128\nHERD_M ?= 8\nHERD_N ?= 4\n"
                  "M ?= 2048\nK ?= 8192\nN ?= 2048\nHIGH_PRECISION ?= true\nMETHOD ?= auto\nAIE_TARGET ?= aie2p\n"
                  "COMPILE_MODE ?= compile-and-run\nPERF_ITERS ?= 20\n",
        flags="--m $(M) --k $(K) --n $(N) --tile-m $(TILE_M) --tile-k-l2 $(TILE_K_L2) --tile-k-l1 $(TILE_K_L1) "
              "--tile-n $(TILE_N) --herd-m $(HERD_M) --herd-n $(HERD_N) --high-precision $(HIGH_PRECISION) "
              "--method $(METHOD) --arch $(AIE_TARGET) --compile-mode $(COMPILE_MODE) --perf-iters $(PERF_ITERS)",
        extra_targets="",
        peano_only=False,
        add_flags=twin_flags_bf16,
        check=twin_check_bf16,
        compiled_line="Compile-only done.",
    ),
    TwinStandIn(
        kind="gemm_f32",
        directory="matrix_multiplication/bf16_in_fp32_out",
        # Makefile:13-27 (vars), :57-61 (run)
        variables="TILE_M ?= 64\nTILE_K_L2 ?= 256\nTILE_K_L1 ?= 32\nTILE_N ?= 128\nHERD_M ?= 8\nHERD_N ?= 4\n"
                  "M ?= 2048\nK ?= 8192\nN ?= 2048\nCODEGEN ?= external\nAIE_TARGET ?= aie2p\n"
                  "COMPILE_MODE ?= compile-and-run\nPERF_ITERS ?= 20\n",
        flags="--codegen $(CODEGEN) --m $(M) --k $(K) --n $(N) --tile-m $(TILE_M) --tile-k-l2 $(TILE_K_L2) "
              "--tile-k-l1 $(TILE_K_L1) --tile-n $(TILE_N) --herd-m $(HERD_M) --herd-n $(HERD_N) --arch $(AIE_TARGET) "
              "--compile-mode $(COMPILE_MODE) --perf-iters $(PERF_ITERS)",
        extra_targets="",
        peano_only=False,
        add_flags=twin_flags_f32,
        check=twin_check_f32,
        compiled_line="Compile-only done.",
    ),
)


# --- mlir-air's harness-table entries: a command per contract -------------------------------------------------
# matrix_multiplication/bf16_in_{bf16,fp32}_out/Makefile at e972f29 (variables M K N TILE_* HERD_*; bf16_in_bf16_out's
# HIGH_PRECISION and METHOD, bf16_in_fp32_out's CODEGEN; defaults as the twin's stand-ins above cite them)
_TILE_KEYS = ["tile_m", "tile_k_l2", "tile_k_l1", "tile_n", "herd_m", "herd_n"]
_MAKE = ("make -C {mlir_air}/programming_examples/matrix_multiplication/%s run M={M} K={K} N={N} TILE_M={tile_m} "
         "TILE_K_L2={tile_k_l2} TILE_K_L1={tile_k_l1} TILE_N={tile_n} HERD_M={herd_m} HERD_N={herd_n} %sPERF_ITERS={perf_iters}")
_TILE_DEFAULTS = {"tile_m": 64, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 128, "herd_m": 8, "herd_n": 4}
HARNESS = {
    "gemm": {"contracts": ["bf16-out-high"], "tile_keys": [*_TILE_KEYS, "method"],
             "command": _MAKE % ("bf16_in_bf16_out", "HIGH_PRECISION=true METHOD={method} "),
             "defaults": {**_TILE_DEFAULTS, "method": "auto", "perf_iters": 20}},
    "gemm@bf16-out-low": {"tile_keys": list(_TILE_KEYS),
                          "command": _MAKE % ("bf16_in_bf16_out", "HIGH_PRECISION=false "),
                          "defaults": {**_TILE_DEFAULTS, "perf_iters": 20}},
    "gemm@f32-out": {"tile_keys": [*_TILE_KEYS, "codegen"],
                     "command": _MAKE % ("bf16_in_fp32_out", "CODEGEN={codegen} "),
                     "defaults": {**_TILE_DEFAULTS, "codegen": "external", "perf_iters": 20}},
}


# --- mlir-air's harness inputs and reference ---------------------------------------------------------------
HARNESS_SEED = 42  # bf16/run.py:59 (and bf16_in_*_out/run.py:25)


def harness_case(shape: dict, contract: str, tile: dict | None = None) -> HarnessCase:
    m, k, n = shape["M"], shape["K"], shape["N"]
    rs = np.random.RandomState(HARNESS_SEED)  # the legacy global generator that np.random.seed(42) seeds
    scale = 1.0 / math.sqrt(k)
    a = harness_bf16(rs.randn(m, k) * scale)  # float64 draws -> float32 -> bf16
    b = harness_bf16(rs.randn(k, n) * scale)
    ref = sequential_matmul_f32(a, b)
    out_dtype = "f32" if contract == "f32-out" else "bf16"
    if out_dtype == "bf16":
        ref = harness_bf16(ref)
    return HarnessCase({"a": a, "b": b}, ref, out_dtype, "matrix_multiplication/bf16/run.py:59,493-507")
