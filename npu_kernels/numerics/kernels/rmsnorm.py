"""RMSNorm (weighted): y = x / sqrt(mean(x^2) + eps) * w per row, in bf16 with an FP32 sum of squares.

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29:

  reference  FP32 mean of squares on bf16 x (M, N), w ~ N(0, 1), eps 1e-5.
  tolerance  programming_examples/weighted_rms_norm/weighted_rms_norm.py:471-472: `rtol=1.6e-2, atol=5e-2`.
  emulated   FP32 sum of squares, the bf16 elementwise epilogue (npu_kernels.numerics.executors.emulated_elementwise
             .rmsnorm_rows).
  torch      HF LlamaRMSNorm: FP32 mean of squares and rsqrt, cast to bf16, times the bf16 weight.
  tile rules M % herd_x == 0 (whole rows per tile), N % 16 == 0 (16-lane bf16 vectors), herd_x <= the columns; the
             default herd_x is the largest divisor of M up to the columns.
  harness    weighted_rms_norm.py:388-390 `np.random.seed(0)`, `randn(M, N).astype(bf16)` then `randn(N)` (float64
             draws, legacy generator); :325-329 ref `x/sqrt(mean(x**2) + eps)*w` in f32 -> bf16 with eps 1e-5 (:40).
  table      the script, run directly with its --perf-iters (the Makefile's `run` forwards only --output-format and
             --herd-x, Makefile:37), so precision and latency come from one run.
  twin       weighted_rms_norm.py:336-376 (flags), :381 (its first line), :397-454 (`--profile`: timing only, no
             check); Makefile:8-27 (vars), :37 (run), :47 (profile); the script itself (the table calls it directly).
  cost       bytes per tile (x in, y out, w once per tile) and rows per tile: RMSNorm_bf16.md:102-109 and the herd_x
             sweep :132-134; the per-row term from the N=128 QK-norm row (:104).
  registry   kernel_registry/supported_kernels.md (its "RMSNorm" table) and details/RMSNorm_bf16.md: the columns
             registry.mlir_air_tables renders and registry.importer_tables reads (no details JSON).
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import f32
from npu_kernels.numerics.harness_case import HarnessCase, harness_bf16
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn, norm_flags
from npu_kernels.numerics.references import RMS_EPS, bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure
from npu_kernels.numerics.tile_common import norm_default, norm_rules, norm_tile_note
from npu_kernels.thresholds import RTOL

NAME = "rmsnorm"
LISTED_AFTER = "gemv"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
TOLERANCES = {"bf16-out": (RTOL, 5e-2)}
TOLERANCE_SOURCE = ("mlir-air programming_examples/weighted_rms_norm/weighted_rms_norm.py:471-472@e972f29 "
                    "`rtol=1.6e-2, atol=5e-2`")
HARNESS_SEED = 0  # weighted_rms_norm.py:388 (np.random.seed)
HARNESS_EPS = 1e-5  # weighted_rms_norm.py:40


def make_inputs(s, rng):
    return {"x": bf16_randn(rng, (s["M"], s["N"])), "w": bf16_randn(rng, (s["N"],))}


def reference(i, s):
    x = i["x"]
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32) + np.float32(RMS_EPS))
    return x / rms * i["w"]


def call(ex, i, s, contract, tile):
    return ex.rmsnorm(i["x"], i["w"], RMS_EPS)


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("M", "N"),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16", "bf16 in/out, FP32 sum of squares")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 4.0 * s["M"] * s["N"],
    bytes_fn=lambda s: 2.0 * (2 * s["M"] * s["N"] + s["N"]),
    output_elements_fn=lambda s: s["M"] * s["N"],
    npu2={"bf16-out": NpuFigure(4.2e-3, 4.2e-3, 4.6e-3, "2048x2048, herd 8")},  # RMSNorm_bf16.md
    registry_shape={"M": 2048, "N": 2048},
    small_shape={"M": 64, "N": 256},
    target_tiles={"npu2": 8, "npu1": 4},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, x, w, eps: float = 1e-6):
    x = np.asarray(x, np.float32)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + np.float32(eps)) * np.asarray(w, np.float32)


def emulated(ex, x, w, eps: float = 1e-6):
    """FP32 sum of squares, the bf16 epilogue, row by row."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_elementwise import rmsnorm_rows

    with ex.timer.time(NAME):
        return ex._rows(rmsnorm_rows, [x], f32(w), np.float32(eps))


def torch(ex, x, w, eps: float = 1e-6):
    import torch as _torch

    with ex.timer.time(NAME), _torch.inference_mode():
        h = ex._t(x).float()
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * _torch.rsqrt(var + eps)
        return ex._np(ex._t(w) * h.to(_torch.bfloat16))


# --- tile rules, default and notes -------------------------------------------------------------------------


def tile_rules(target: str) -> list:
    return norm_rules(NAME, target)


tile_default = norm_default  # the largest divisor of M up to the columns
tile_note = norm_tile_note  # M's rows that do not split over the target tiles


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    m, n = shape["M"], shape["N"]
    rs = np.random.RandomState(HARNESS_SEED)
    x = harness_bf16(rs.randn(m, n))
    w = harness_bf16(rs.randn(n))
    rms = np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + np.float32(HARNESS_EPS))
    return HarnessCase({"x": x, "w": w}, harness_bf16((x / rms) * w), "bf16",
                       "weighted_rms_norm/weighted_rms_norm.py:40,325-329,388-390")


HARNESS = {  # the script, directly, with its --perf-iters (Makefile:37 forwards only --output-format --herd-x)
    "tile_keys": ["herd_x"],
    "command": "mkdir -p {mlir_air}/programming_examples/weighted_rms_norm/build_peano && cd "
               "{mlir_air}/programming_examples/weighted_rms_norm/build_peano && python3 ../weighted_rms_norm.py "
               "--M {M} --N {N} --herd-x {herd_x} --perf-iters {perf_iters}",
    "defaults": {"herd_x": 8, "perf_iters": 20},
}


def twin_flags(p) -> None:  # weighted_rms_norm.py:336-376
    norm_flags(p, m=2048, n=2048)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--iterations", type=int, default=5)


def twin_check(a) -> tuple:  # weighted_rms_norm.py:381 (its first line) and its asserts
    print(f"Weighted RMSNorm: M={a.M}, N={a.N}, herd=[{a.herd_x},1]")
    assert a.N % a.vector_size == 0
    assert a.M % a.herd_x == 0
    return NAME, {"M": a.M, "N": a.N}, None, {"herd_x": a.herd_x}, None, a.compile_mode != "compile-and-run"


def twin_timing(a, figures, shape: dict, tile: dict) -> bool:
    """weighted_rms_norm.py:397-454 `--profile`: timing only, no check (one modelled figure for every statistic);
    False when the run is a checked one."""
    if not a.profile:
        return False
    ms = figures(NAME, shape, tile)["latency_us"] / 1e3
    data_mb = (a.M * a.N * 2 * 2 + a.N * 2) / 1e6
    print(f"\n  Kernel: avg={ms:.1f}ms  min={ms:.1f}ms  max={ms:.1f}ms")
    print(f"  Bandwidth: {data_mb / (ms / 1000) / 1000:.2f} GB/s")
    return True


TWIN = TwinStandIn(
    directory="weighted_rms_norm",
    # Makefile:8-27 (vars), :37 (run forwards only --output-format --herd-x), :47 (profile)
    variables="AIE_TARGET ?= aie2p\nHERD_X ?= 8\nOUTPUT_FORMAT ?= xclbin\nITERATIONS ?= 5\n",
    flags="--output-format $(OUTPUT_FORMAT) --herd-x $(HERD_X)",
    extra_targets="profile:\n\tmkdir -p $(BUILD_DIR) && cd $(BUILD_DIR) && $(TWIN) rmsnorm --output-format $(OUTPUT_FORMAT) "
                  "--herd-x $(HERD_X) --profile --iterations $(ITERATIONS)\n",
    peano_only=False,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="",
    script="weighted_rms_norm.py",
    timing=twin_timing,
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    """x in and y out over the herd's tiles, w once per tile; the rows each tile normalises."""
    tiles = t.get("herd_x", 1) * t.get("herd_y", 1)
    M, N = s["M"], s["N"]
    return {"launch_s": 1.0, "rmsnorm_s_per_byte_per_tile": M * N * 4.0 / tiles + N * 2,
            "rmsnorm_s_per_unit": float(int(math.ceil(M / tiles)))}


CONSTANTS = {"rmsnorm_s_per_byte_per_tile": 3.287e-10, "rmsnorm_s_per_unit": 1.168e-07}
EVIDENCE = {
    "rmsnorm_s_per_byte_per_tile": "RMSNorm vector throughput per tile: 1/3.04 GB/s (in + out + weight); "
                                   "RMSNorm_bf16.md:102-109 and the herd_x sweep lines 132-134.",
    "rmsnorm_s_per_unit": "per row per tile (sum of squares reduction, rsqrt, row DMA): 0.12 us; the N=128 "
                          "QK-norm row (155 us, RMSNorm_bf16.md:104) against the wide rows.",
}


# --- mlir-air's registry page (e972f29): the projection's catalog entry, its columns, the importer -----------


def index_cells(row, fmt) -> list[str]:
    return fmt.norm_cells(row, abs_err=False)


def details_cells(method, row, fmt) -> list[str]:
    """The index's columns with rel_err max and abs_err max after mean_rel_L1."""
    b, cells = fmt.best_of(row), fmt.norm_cells(row, abs_err=False)
    return cells[:5] + [fmt.sci2(b.max_rel if b else None), fmt.sci2(b.max_abs if b else None)] + cells[5:]


REGISTRY_PAGE = CatalogPage(
    title="RMSNorm (BF16)", page="RMSNorm_bf16", columns=("M", "N"),
    aliases={"m": "M", "n": "N", "rows": "M", "dim": "N"}, spellings=("rmsnorm", "weightedrmsnorm"),
    math="y = x / sqrt(mean(x^2) + eps) * w, per row", datapath="FP32 sum of squares, bf16 elementwise",
    npu2_mean_rel_L1="4.2e-3", target_tiles=8,
    index=("(M×N)", "herd_x", "latency", "bandwidth", "mean_rel_L1", "Used by", "Status"),
    details=(("", ("(M, N)", "herd_x", "latency", "bandwidth", "mean_rel_L1", "rel_err max", "abs_err max",
                   "Used by", "Status")),),
    index_cells=index_cells, details_cells=details_cells,
    elements=lambda s: 2 * s["M"] * s["N"] + s["N"], tolerance_label="bf16",
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape (one `M×N` cell) and herd_x of one upstream row."""
    return cell.norm_row(header, cells)
