"""LayerNorm (affine): y = (x - mean) / sqrt(var + eps) * w + b per row, in bf16 with FP32 statistics.

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29:

  reference  FP32 mean and variance on bf16 x (M, N), w, b ~ N(0, 1), eps 1e-5.
  tolerance  programming_examples/layer_norm/layer_norm.py:360-366: `rtol=1.6e-2`, `atol=6e-2` (vs RMSNorm's 5e-2:
             LayerNorm's epilogue has one more bf16 step, :361-365).
  emulated   FP32 reductions, the bf16 epilogue (npu_kernels.numerics.executors.emulated_elementwise.layernorm_rows).
  torch      F.layer_norm on bf16 (FP32 statistics inside).
  tile rules M % herd_x == 0 (whole rows per tile), N % 16 == 0 (16-lane bf16 vectors), herd_x <= the columns; the
             default herd_x is the largest divisor of M up to the columns.
  harness    layer_norm.py:336-339 `np.random.seed(0)`, x (M, N), weight (N), bias (N), float64 randn -> bf16;
             :273-280 the f32 reference (mean, mean of squared deviations, `1/sqrt(var + 1e-5)`, `* w + b`) -> bf16.
  table      the Makefile's `run` takes no perf flag (layer_norm/Makefile:42-44): the script runs directly, like
             RMSNorm's, with its own --perf-iters (layer_norm.py:288-324), so precision and latency come from one run.
  twin       layer_norm.py:288-324 (flags), :329 (its first line); Makefile:11-34 (vars), :44 (run); the script itself
             (the table calls it directly).
  cost       bytes per tile (x in, y out, w and b once per tile) and rows per tile: LayerNorm_bf16.md:122 and the herd
             sweep :137-139.
  registry   kernel_registry/supported_kernels.md (its "LayerNorm" table) and details/LayerNorm_bf16.md: the columns
             registry.mlir_air_tables renders and registry.importer_tables reads (no details JSON).
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import f32
from npu_kernels.numerics.harness_case import HarnessCase, harness_bf16
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn, norm_flags
from npu_kernels.numerics.references import LN_EPS, bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure
from npu_kernels.numerics.tile_common import norm_default, norm_rules, norm_tile_note
from npu_kernels.thresholds import RTOL

NAME = "layernorm"
LISTED_AFTER = "rmsnorm"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
TOLERANCES = {"bf16-out": (RTOL, 6e-2)}
TOLERANCE_SOURCE = ("mlir-air programming_examples/layer_norm/layer_norm.py:360-366@e972f29 `rtol=1.6e-2`, "
                    "`atol=6e-2` (one more bf16 step in the epilogue than RMSNorm)")
HARNESS_SEED = 0  # layer_norm.py:336 (np.random.seed)
HARNESS_EPS = 1e-5  # layer_norm.py:52


def make_inputs(s, rng):
    return {"x": bf16_randn(rng, (s["M"], s["N"])), "w": bf16_randn(rng, (s["N"],)), "b": bf16_randn(rng, (s["N"],))}


def reference(i, s):
    x = i["x"]
    mu = x.mean(axis=-1, keepdims=True, dtype=np.float32)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)
    return (x - mu) / np.sqrt(var + np.float32(LN_EPS)) * i["w"] + i["b"]


def call(ex, i, s, contract, tile):
    return ex.layernorm(i["x"], i["w"], i["b"], LN_EPS)


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("M", "N"),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16", "bf16 in/out, FP32 mean and variance")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 7.0 * s["M"] * s["N"],
    bytes_fn=lambda s: 2.0 * (2 * s["M"] * s["N"] + 2 * s["N"]),
    output_elements_fn=lambda s: s["M"] * s["N"],
    npu2={"bf16-out": NpuFigure(4.4e-3, 4.4e-3, 4.4e-3, "1024x768, herd 8")},  # LayerNorm_bf16.md
    registry_shape={"M": 1024, "N": 768},
    small_shape={"M": 64, "N": 256},
    target_tiles={"npu2": 8, "npu1": 4},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, x, w, b, eps: float = 1e-5):
    x = np.asarray(x, np.float32)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + np.float32(eps)) * w + b


def emulated(ex, x, w, b, eps: float = 1e-5):
    """FP32 reductions, the bf16 epilogue, row by row."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_elementwise import layernorm_rows

    with ex.timer.time(NAME):
        return ex._rows(layernorm_rows, [x], f32(w), f32(b), np.float32(eps))


def torch(ex, x, w, b, eps: float = 1e-5):
    import torch as _torch
    import torch.nn.functional as F

    with ex.timer.time(NAME), _torch.inference_mode():
        xt = ex._t(x)
        return ex._np(F.layer_norm(xt, (xt.shape[-1],), ex._t(w), ex._t(b), eps))


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
    b = harness_bf16(rs.randn(n))
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    rstd = np.float32(1.0) / np.sqrt(var + np.float32(HARNESS_EPS))
    ref = (x - mean) * rstd * w + b
    return HarnessCase({"x": x, "w": w, "b": b}, harness_bf16(ref), "bf16", "layer_norm/layer_norm.py:52,273-280,336-339")


HARNESS = {  # layer_norm/Makefile:42-44 (`run` takes no perf flag): the script, directly, with its --perf-iters
    "tile_keys": ["herd_x"],
    "command": "mkdir -p {mlir_air}/programming_examples/layer_norm/build_peano && cd "
               "{mlir_air}/programming_examples/layer_norm/build_peano && python3 ../layer_norm.py --M {M} --N {N} "
               "--herd-x {herd_x} --perf-iters {perf_iters}",
    "defaults": {"herd_x": 8, "perf_iters": 20},
}


def twin_flags(p) -> None:  # layer_norm.py:288-324
    norm_flags(p, m=1024, n=768)


def twin_check(a) -> tuple:  # layer_norm.py:329 (its first line) and its asserts
    print(f"LayerNorm (affine): M={a.M}, N={a.N}, herd=[{a.herd_x},1]")
    assert a.N % a.vector_size == 0
    assert a.M % a.herd_x == 0
    return NAME, {"M": a.M, "N": a.N}, None, {"herd_x": a.herd_x}, None, a.compile_mode != "compile-and-run"


TWIN = TwinStandIn(
    directory="layer_norm",
    # Makefile:11-34 (vars), :44 (run)
    variables="AIE_TARGET ?= aie2p\nHERD_X ?= 8\nM ?= 1024\nN ?= 768\nOUTPUT_FORMAT ?= xclbin\n",
    flags="--output-format $(OUTPUT_FORMAT) --M $(M) --N $(N) --herd-x $(HERD_X)",
    extra_targets="",
    peano_only=False,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="",
    script="layer_norm.py",
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    """x in and y out over the herd's tiles, w and b once per tile; the rows each tile normalises."""
    tiles = t.get("herd_x", 1) * t.get("herd_y", 1)
    M, N = s["M"], s["N"]
    return {"launch_s": 1.0, "layernorm_s_per_byte_per_tile": M * N * 4.0 / tiles + N * 4,
            "layernorm_s_per_unit": float(int(math.ceil(M / tiles)))}


CONSTANTS = {"layernorm_s_per_byte_per_tile": 6.001e-10, "layernorm_s_per_unit": 0.0}
EVIDENCE = {
    "layernorm_s_per_byte_per_tile": "LayerNorm throughput per tile: 1/1.67 GB/s (two reductions); "
                                     "LayerNorm_bf16.md:122 and the herd sweep 137-139.",
    "layernorm_s_per_unit": "per-row cost: fitted 0 (one shape only; not separable from the byte term).",
}


# --- mlir-air's registry page (e972f29): the projection's catalog entry, its columns, the importer -----------


def index_cells(row, fmt) -> list[str]:
    return fmt.norm_cells(row, abs_err=True)


def details_cells(method, row, fmt) -> list[str]:
    return fmt.norm_cells(row, abs_err=True)  # the details table has the index's columns


REGISTRY_PAGE = CatalogPage(
    title="LayerNorm (BF16, affine)", page="LayerNorm_bf16", columns=("M", "N"),
    aliases={"m": "M", "n": "N", "rows": "M", "dim": "N"}, spellings=("layernorm",),
    math="y = (x - mean) / sqrt(var + eps) * w + b, per row", datapath="FP32 reductions", npu2_mean_rel_L1="4.4e-3",
    target_tiles=8,
    index=("(M×N)", "herd_x", "latency", "bandwidth", "mean_rel_L1", "abs_err max", "Used by", "Status"),
    details=(("", ("(M, N)", "herd_x", "latency", "bandwidth", "mean_rel_L1", "abs_err max", "Used by", "Status")),),
    index_cells=index_cells, details_cells=details_cells,
    elements=lambda s: 2 * s["M"] * s["N"] + 2 * s["N"], tolerance_label="bf16",
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape (one `M×N` cell) and herd_x of one upstream row."""
    return cell.norm_row(header, cells)
