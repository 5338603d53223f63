"""GEMV (decode): y[M] = A[M, K] @ x[K] in bf16, FP32 lane accumulators, one nearest-even cast.

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29:

  layout     gemv(a (M, K), x (K,)) -> (M,); `static_key` names a resident weight (the executors cache its form).
  reference  FP32 A @ x on bf16 inputs N(0, 1/K) (the catalog's own draw, 1/sqrt(K) scale).
  tolerance  docs/numerics.md's leaf-kernel table (the NUMERICS tolerances npu_kernels.thresholds carried):
             rtol 1.6e-2 (RTOL), atol 1e-3.
  emulated   mv.cc: 64 FP32 lane accumulators in the kernel's order, then aie_api's reduce_add tree
             (npu_kernels.numerics.executors.emulated_gemv.mv_lane_sum), one RNE cast (mv.cc sets conv_even); the
             executor's "blas" order sums in the host's BLAS order instead (docs/emulated_numerics.md, GEMV).
  torch      bf16 matmul (FP32 accumulate inside, one rounding).
  tile rules M % (tile_m*herd_m) == 0, tile_m even, K % 64 == 0, herd_m*tile_m*K*2 + herd_m*tile_m*2 <= 524288
             (L2), M/(tile_m*herd_m) - 1 <= 255 (BD repeat count; the verified 16384x2048 LM-head partition runs 256
             iterations), tile_m % m_input == 0, (m_input + 1)*K*2 <= 65536 (L1), herd_m <= the columns; the herd is
             herd_m columns of one row.
  default    herd_m 8 (shrinking only when M forces it), the largest tile_m of 16/8/4/2 within the L2 budget and the
             BD repeat limit, m_input = tile_m unless the L1 tile would overflow (registry: 8/8/8, 8/2/2).
  harness    programming_examples/matrix_vector_multiplication/bf16/matvec.py:286-291 `np.random.seed(42)`,
             `(randn(M, K)*4).astype(bf16)`, `(randn(K)*4)`; ref `np.dot(A.f32, x.f32).astype(bf16)`.
  table      its Makefile's `run` (M K TILE_M M_INPUT HERD_M); `make run` times nothing (the Makefile has no
             PERF_ITERS): latency comes from `make profile`, whose C++ timer prints `Avg NPU GEMV time: <t>us.`
             (Makefile:59-61, test.cpp:200-214).
  twin       matvec.py:186-264 (flags), :53,79-94 (asserts, the L2 message verbatim); Makefile:17,29,40-49 (vars), :57
             (run: no PERF_ITERS), :59-61 (profile: test.exe timer, test.cpp:200-214).
  cost       the A stream each column's shim DMA carries and the mv.cc calls (m_input rows each) per column: the large
             GEMV rows (GEMV_bf16.md:94-128) and the m_input sweep (GEMV_bf16.md:92, 116, 163).
  registry   kernel_registry/supported_kernels.md (its "GEMV" table, after the GEMM ones) and details/GEMV_bf16.md:
             the columns registry.mlir_air_tables renders and registry.importer_tables reads (no details JSON); its
             throughput in GFLOP/s (2*M*K over the latency).
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import f32, to_bf16, widened
from npu_kernels.numerics.harness_case import HarnessCase, harness_bf16
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn
from npu_kernels.numerics.references import bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure
from npu_kernels.numerics.tile_common import (BD_REPEAT_LIMIT, GEMV_L1_BYTES, GEMV_L2_BYTES, array_columns,
                                              rows_note)
from npu_kernels.thresholds import RTOL

NAME = "gemv"
LISTED_AFTER = "gemm"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
TOLERANCES = {"bf16-out": (RTOL, 1e-3)}
TOLERANCE_SOURCE = ("docs/numerics.md's leaf-kernel table (GEMV: rtol 1.6e-2 / atol 1e-3, the NUMERICS tolerances "
                    "npu_kernels.thresholds carried); NPU2 measures 0 to 2.7e-8 (GEMV_bf16.md)")
THROUGHPUT = "gflops"  # the cost model's figure: GFLOP/s (2*M*K over the latency)
HARNESS_SEED = 42  # matvec.py:286 (np.random.seed)
HARNESS_SCALE = 4.0  # matvec.py:287-288


def make_inputs(s, rng):
    scale = 1.0 / math.sqrt(s["K"])
    return {"a": bf16_randn(rng, (s["M"], s["K"]), scale), "x": bf16_randn(rng, (s["K"],), scale)}


def reference(i, s):
    return i["a"] @ i["x"]


def call(ex, i, s, contract, tile):
    return ex.gemv(i["a"], i["x"])


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("M", "K"),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16",
                                    "bf16 in, FP32 vector accumulate, bf16 out")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 2.0 * s["M"] * s["K"],
    bytes_fn=lambda s: 2.0 * (s["M"] * s["K"] + s["K"] + s["M"]),
    output_elements_fn=lambda s: s["M"],
    npu2={"bf16-out": NpuFigure(1.6e-9, 0.0, 2.7e-8, "2048x2048, 8/8/8 (vs a reference rounded the same way)")},
    registry_shape={"M": 2048, "K": 2048},
    small_shape={"M": 256, "K": 512},
    target_tiles={"npu2": 8, "npu1": 4},
    fidelity_band=0.0,  # judged as an absolute bound: <= 1e-6
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, a, x, *, static_key=None):
    return widened(a) @ np.asarray(x, np.float32)


def emulated(ex, a, x, *, static_key=None):
    """mv.cc's 64 FP32 lanes and reduce tree (or the host's BLAS order, `gemv_order="blas"`), one RNE cast."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_gemv import blas_rows_sum, mv_lane_sum

    with ex.timer.time(NAME):
        # a weight held as bf16 bits (uint16, npu_kernels.model.weights) is resident as the caller's array and widened
        # a block of rows at a time, exactly, inside the sum; nothing is kept beside it (issue 48 item 3)
        held = a if getattr(a, "dtype", None) == np.uint16 else ex._static("gemv.a", a, static_key, f32)
        if ex.gemv_order == "blas":
            return to_bf16(blas_rows_sum(held, f32(x)) if held.dtype == np.uint16 else held @ f32(x))
        return to_bf16(mv_lane_sum(held, f32(x), ex.target))


def torch(ex, a, x, *, static_key=None):
    import torch as _torch

    with ex.timer.time(NAME), _torch.inference_mode():
        return ex._np(ex._static(a, static_key, "gemv.a") @ ex._t(x))


# --- tile rules, default, herd and notes --------------------------------------------------------------------


def l2_bytes(t: dict, K: int) -> int:
    """The A tiles and the C tile the herd holds in L2 (matvec.py:79-94's check)."""
    return t["herd_m"] * t["tile_m"] * K * 2 + t["herd_m"] * t["tile_m"] * 2


def tile_rules(target: str) -> list:
    cols = array_columns(target)
    return [
        ("gemv.M_divisible_by_tile_m_herd_m", lambda s, t: s["M"] % (t["tile_m"] * t["herd_m"]) == 0,
         lambda s, t: f"M={s['M']} is not a multiple of tile_m*herd_m={t['tile_m']}*{t['herd_m']}"),
        ("gemv.tile_m_even", lambda s, t: t["tile_m"] % 2 == 0,
         lambda s, t: f"tile_m={t['tile_m']} is odd (the 4-byte transfer-length check)"),
        ("gemv.K_divisible_by_64", lambda s, t: s["K"] % 64 == 0,
         lambda s, t: f"K={s['K']} is not a multiple of 64 (the kernel's 64-lane accumulate)"),
        ("gemv.l2_budget", lambda s, t: l2_bytes(t, s["K"]) <= GEMV_L2_BYTES,
         lambda s, t: f"herd_m*tile_m*K*2 + herd_m*tile_m*2 = {l2_bytes(t, s['K'])} > {GEMV_L2_BYTES} bytes of L2"),
        ("gemv.bd_repeat_le_255", lambda s, t: s["M"] // (t["tile_m"] * t["herd_m"]) - 1 <= BD_REPEAT_LIMIT,
         lambda s, t: f"{s['M'] // (t['tile_m'] * t['herd_m'])} outer iterations exceed the buffer-descriptor "
         f"repeat limit ({BD_REPEAT_LIMIT} repeats): run it per partition (e.g. 16384 rows)"),
        ("gemv.tile_m_divisible_by_m_input", lambda s, t: t["m_input"] >= 1 and t["tile_m"] % t["m_input"] == 0,
         lambda s, t: f"tile_m={t['tile_m']} is not a multiple of m_input={t['m_input']}"),
        ("gemv.l1_budget", lambda s, t: (t["m_input"] + 1) * s["K"] * 2 <= GEMV_L1_BYTES,
         lambda s, t: f"the [m_input, K] A tile plus the [K] vector, {(t['m_input'] + 1) * s['K'] * 2} bytes, "
         f"overflow the {GEMV_L1_BYTES}-byte L1"),
        ("gemv.herd_fits_array", lambda s, t: 1 <= t["herd_m"] <= cols,
         lambda s, t: f"herd_m={t['herd_m']} exceeds the {cols} columns"),
    ]


def tile_default(s: dict, target: str) -> dict:
    """herd_m 8 (shrinking only when M forces it), the largest tile_m of 16/8/4/2 within the L2 budget and
    the BD repeat limit, m_input = tile_m unless the L1 tile would overflow (registry: 8/8/8, 8/2/2)."""
    M, K = s["M"], s["K"]
    choice = None
    herd = array_columns(target)
    while herd >= 1 and choice is None:  # the columns, halved
        for tile_m in (16, 8, 4, 2):
            t = {"tile_m": tile_m, "herd_m": herd}
            if M % (tile_m * herd) == 0 and l2_bytes(t, K) <= GEMV_L2_BYTES and M // (tile_m * herd) - 1 <= BD_REPEAT_LIMIT:
                choice = (tile_m, herd)
                break
        herd //= 2
    tile_m, herd = choice or (2, array_columns(target))
    m_input = tile_m
    while m_input > 1 and ((m_input + 1) * K * 2 > GEMV_L1_BYTES or tile_m % m_input):
        m_input //= 2
    return {"tile_m": tile_m, "m_input": m_input, "herd_m": herd}


def herd_of(t: dict) -> list[int]:
    """herd_m columns of one row."""
    return [t["herd_m"], 1]


def tile_note(s: dict, t: dict, herd: list[int], target: str, tiles_target: int) -> str | None:
    """M's rows that do not split over the target tiles (None: they do)."""
    return rows_note("M", s["M"], herd[0] * herd[1], tiles_target)


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    m, k = shape["M"], shape["K"]
    rs = np.random.RandomState(HARNESS_SEED)
    a = harness_bf16(rs.randn(m, k) * HARNESS_SCALE)
    x = harness_bf16(rs.randn(k) * HARNESS_SCALE)
    return HarnessCase({"a": a, "x": x}, harness_bf16(np.dot(a, x)), "bf16",
                       "matrix_vector_multiplication/bf16/matvec.py:286-291")


HARNESS = {  # `make run` times nothing (no PERF_ITERS): the timing run is `make profile` (Makefile:59-61, test.cpp:200-214)
    "tile_keys": ["tile_m", "m_input", "herd_m"],
    "command": "make -C {mlir_air}/programming_examples/matrix_vector_multiplication/bf16 run M={M} K={K} "
               "TILE_M={tile_m} M_INPUT={m_input} HERD_M={herd_m}",
    "latency_command": "make -C {mlir_air}/programming_examples/matrix_vector_multiplication/bf16 profile M={M} K={K} "
                       "TILE_M={tile_m} M_INPUT={m_input} HERD_M={herd_m}",
    "latency_format": "profile",
    "defaults": {"tile_m": 4, "m_input": 1, "herd_m": 4},
}


def twin_flags(p) -> None:  # matvec.py:186-264
    p.add_argument("--m", type=int, default=2048)
    p.add_argument("--k", type=int, default=8192)
    p.add_argument("--tile-m", "--tile-m-l2", dest="tile_m", type=int, default=4)
    p.add_argument("--m-input", type=int, default=1)
    p.add_argument("--herd-m", type=int, default=4)
    p.add_argument("--output-format", choices=["xclbin", "elf"], default="xclbin")
    p.add_argument("--compile-mode", choices=["compile-and-run", "compile-and-xclbin"], default="compile-and-run")
    p.add_argument("--debug-ir", action="store_true")
    p.add_argument("--perf-iters", type=int, default=0)
    p.add_argument("--target", default="auto")


def twin_check(a) -> tuple:  # matvec.py:53,79-94
    assert a.m % (a.tile_m * a.herd_m) == 0
    assert a.tile_m % a.m_input == 0
    assert a.k % 64 == 0
    need = a.herd_m * a.tile_m * a.k * 2 + a.herd_m * a.tile_m * 2
    assert need <= 512 * 1024, (
        f"L2 capacity exceeded: A={a.herd_m * a.tile_m * a.k * 2}B + C={a.herd_m * a.tile_m * 2}B = {need}B > "
        f"524288B. Reduce herd_m ({a.herd_m}), tile_m ({a.tile_m}), or k ({a.k}).")
    tile = {"tile_m": a.tile_m, "m_input": a.m_input, "herd_m": a.herd_m}
    return NAME, {"M": a.m, "K": a.k}, None, tile, 2.0 * a.m * a.k, a.compile_mode != "compile-and-run"


def twin_profile(a, figures) -> None:
    """test.cpp:200-214's timer lines for `profile gemv --M M --K K`; `figures` is the cost model's
    modelled_kernel_figures (one modelled figure for every statistic)."""
    us = figures(NAME, {"M": a.M, "K": a.K})["latency_us"]
    g = 2.0 * a.M * a.K / (us * 1e-6) / 1e9
    print(f"GEMV size: M={a.M}, K={a.K}")
    for label, figure in (("Avg", us), ("Min", us), ("Max", us)):
        print(f"{label} NPU GEMV time: {figure}us.")
        print(f"{ {'Avg': 'Avg', 'Min': 'Max', 'Max': 'Min'}[label]} NPU gflops: {g}")


TWIN = TwinStandIn(
    directory="matrix_vector_multiplication/bf16",
    # Makefile:17,29,40-49 (vars), :57 (run: no PERF_ITERS), :59-61 (profile: test.exe timer)
    variables="OUTPUT_FORMAT ?= xclbin\nAIE_TARGET ?= aie2p\nM ?= 2048\nK ?= 8192\nTILE_M ?= 4\nM_INPUT ?= 1\n"
              "HERD_M ?= 4\nifdef TILE_M_L2\nTILE_M := $(TILE_M_L2)\nendif\n",
    flags="--m $(M) --k $(K) --tile-m $(TILE_M) --m-input $(M_INPUT) --herd-m $(HERD_M) "
          "--output-format $(OUTPUT_FORMAT)",
    extra_targets="profile:\n\tmkdir -p $(BUILD_DIR) && cd $(BUILD_DIR) && $(TWIN) gemv --compile-mode compile-and-xclbin "
                  "--m $(M) --k $(K) --tile-m $(TILE_M) --m-input $(M_INPUT) --herd-m $(HERD_M) && "
                  "$(TWIN) profile gemv --M $(M) --K $(K)\n",
    peano_only=False,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="",
    profile=twin_profile,
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    M, K = s["M"], s["K"]
    hm, mi = t["herd_m"], max(1, t.get("m_input", t["tile_m"]))
    return {
        "launch_s": 1.0,
        "gemv_s_per_byte_per_column": M * K * 2.0 / hm,  # the A stream each column's shim DMA carries
        "gemv_s_per_call": float(int(math.ceil(M / (hm * mi)))),  # kernel invocations per column (m_input rows each)
    }


CONSTANTS = {"gemv_s_per_byte_per_column": 2.335e-10, "gemv_s_per_call": 3.503e-07}
EVIDENCE = {
    "gemv_s_per_byte_per_column": "A-matrix stream per AIE column: 1/4.28 GB/s per column, 34 GB/s for 8 columns; "
                                  "the large GEMV rows (GEMV_bf16.md:94-128, 16384x2048 2193 us).",
    "gemv_s_per_call": "per mv.cc call (m_input rows): 0.35 us; fixed by the registry's m_input sweep point "
                       "(2048x2048 at tile_m 8: m_input 1 20.9 vs m_input 8 25.5 GFLOP/s, GEMV_bf16.md:163 "
                       "against line 92) with the m_input < tile_m row 2048x11008 8/2/1 (line 116).",
}


# --- mlir-air's registry page (e972f29): the projection's catalog entry, its columns, the importer -----------


def index_cells(row, fmt) -> list[str]:
    s, b = dict(row.shape), fmt.best_of(row)
    t = b.tile if b else {}
    return [f"{s['M']}×{s['K']}", fmt.tile3(t, ("herd_m", "tile_m", "m_input")), fmt.num(fmt.g(b), b, digits=1),
            fmt.sci2(b.mean_rel_L1 if b else None), fmt.used(row), fmt.status_cell(row)]


def details_cells(method, row, fmt) -> list[str]:
    s, b = dict(row.shape), fmt.best_of(row)
    t = b.tile if b else {}
    return [f"{s['M']}×{s['K']}", fmt.tile3(t, ("herd_m", "tile_m", "m_input")),
            fmt.mark(b, fmt.latency_text(b.latency_us if b else None)), fmt.num(fmt.g(b), b, digits=1),
            fmt.sci2(b.mean_rel_L1 if b else None), fmt.sci2(b.max_rel if b else None),
            fmt.sci2(b.max_abs if b else None), fmt.used(row), fmt.status_cell(row)]


REGISTRY_PAGE = CatalogPage(
    title="GEMV (BF16)", page="GEMV_bf16", columns=("M", "K"), aliases={"m": "M", "k": "K"},
    spellings=("gemv", "matvec"), math="y[M] = A[M,K] @ x[K] (decode)",
    datapath="plain FP32 vector accumulate of bf16 inputs, bf16 out", npu2_mean_rel_L1="0 ... 2.7e-8", target_tiles=8,
    index=("(M×K)", "best tile (herd_m/tile_m/m_input)", "GFLOPS", "mean_rel_L1", "Used by", "Status"),
    details=(("", ("(M, K)", "tile (herd_m/tile_m/m_input)", "latency", "GFLOPS", "mean_rel_L1", "rel_err max",
                   "abs_err max", "Used by", "Status")),),
    index_cells=index_cells, details_cells=details_cells, unit="GFLOP/s", tolerance_label="bf16",
    flops=lambda s: 2 * s["M"] * s["K"] * s.get("N", 1),  # listed after GEMM's pages (`LISTED_AFTER`: the last of them)
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape (one `M×K` cell), the herd_m/tile_m/m_input cell and the GFLOPS cell of one upstream row."""
    c = dict(zip(header, cells))
    M, K = cell.ints(c[header[0]])[:2]
    hm, tm, mi = (cell.ints(c.get(header[1], "")) + [None] * 3)[:3]
    tile = {k: v for k, v in (("herd_m", hm), ("tile_m", tm), ("m_input", mi)) if v is not None}
    return [{"shape": {"M": M, "K": K}, "tile": tile, "gflops_cell": c.get("GFLOPS", "")}]
