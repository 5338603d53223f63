"""Element-wise Add: c = a + b in bf16, the residual add of every decoder block (and a bias add).

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29 unless another commit is named:

  reference  FP32 a + b on bf16 inputs a, b ~ N(0, 1).
  tolerance  programming_examples/eltwise_add/eltwise_add.py:232 `rtol, atol = (1.6e-2, 5e-2) if args.dtype ==
             "bf16"` (the bf16 round sizes atol, :229-231).
  emulated   the FP32 sum of two bf16 values, one bf16 rounding on store, floor like every direct-codegen kernel (the
             AIE default; docs/emulated_numerics.md).
  torch      bf16 add.
  tile rules herd_y == 1 (3 DMAs per tile: 2 in, 1 out), N % (tile*herd_x) == 0, tile <= 4096 and a multiple of 16
             (ping-ponged L1 buffers); the planner's default tile is 2048 (EltwiseAdd_bf16.md's best configuration).
  harness    eltwise_add.py:223-231 `__main__`: `rng = default_rng(0)`, a then b `standard_normal(...).astype(bf16)`,
             ref `(a.f32 + b.f32).astype(bf16)`. Transcript: `Eltwise add shape=(...) dtype=bf16 on <target>`
             (:242-244), then XRTRunner's `[precision]` line; `Compiled successfully.` after --compile-only (:219).
  table      programming_examples/eltwise_add/Makefile:15-42 (SHAPE, TILE, PERF_ITERS), :55-59 (`run` forwards
             --perf-iters).
  twin       eltwise_add.py:117-186 (flags), :40-67 (the tile check, a ValueError), Makefile:15-42, :55-59, :64-69
             (`profile`: the test.exe timer, test.cpp:142-226, its lines at :210-212).
  cost       per L1 chunk per tile (the add is bound by its DMA rounds, not bytes): EltwiseAdd_bf16.md:100-108 and the
             column sweep :140-142 (constants fitted by npu_kernels.perf.fit on anchors.toml).
  registry   kernel_registry/supported_kernels.md (its "Element-wise Add" table) and details/EltwiseAdd_bf16.md: the
             columns registry.mlir_air_tables renders and registry.importer_tables reads (no details JSON).
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import add_rounded, f32
from npu_kernels.numerics.harness_case import HarnessCase, elementwise_draws, harness_bf16
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn, dsl_flags, streaming_features
from npu_kernels.numerics.references import bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure
from npu_kernels.numerics.tile_common import elementwise_default, elementwise_rules
from npu_kernels.thresholds import RTOL

NAME = "eltwise_add"
LISTED_AFTER = "flash_attention"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
DMAS_PER_TILE = 3  # 2 in, 1 out: only a one-row herd places (tile_notes)
TOLERANCES = {"bf16-out": (RTOL, 5e-2)}
TOLERANCE_SOURCE = ("mlir-air programming_examples/eltwise_add/eltwise_add.py:232@e972f29 `rtol, atol = (1.6e-2, "
                    "5e-2) if args.dtype == \"bf16\"`")
ELTWISE = ("tile", 2048, 1, 3)  # (tile key, default tile, max herd_y, DMAs per tile): npu_kernels.numerics.tile_common


def make_inputs(s, rng):
    return {"a": bf16_randn(rng, (s["N"],)), "b": bf16_randn(rng, (s["N"],))}


def reference(i, s):
    return i["a"] + i["b"]


def call(ex, i, s, contract, tile):
    return ex.eltwise_add(i["a"], i["b"])


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("N",),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16", "bf16 add, one rounding")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: float(s["N"]),
    bytes_fn=lambda s: 6.0 * s["N"],
    output_elements_fn=lambda s: s["N"],
    npu2={"bf16-out": NpuFigure(1.9e-3, 1.9e-3, 1.9e-3, "N=4194304, herd 8x1")},  # EltwiseAdd_bf16.md
    registry_shape={"N": 4194304},
    small_shape={"N": 65536},
    target_tiles={"npu2": 8, "npu1": 4},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, a, b):
    return np.asarray(a, np.float32) + np.asarray(b, np.float32)


def emulated(ex, a, b):
    """The exact FP32 sum, one bf16 rounding on store: floor."""
    with ex.timer.time(NAME):
        if np.shape(a) != np.shape(b):
            return add_rounded(f32(a), f32(b), "floor")
        return ex._rows(lambda x, y: add_rounded(x, y, "floor"), [a, b])


def torch(ex, a, b):
    import torch as _torch

    with ex.timer.time(NAME), _torch.inference_mode():
        return ex._np(ex._t(a) + ex._t(b))


# --- tile rules and default -------------------------------------------------------------------------------


def tile_rules(target: str) -> list:
    return elementwise_rules(NAME, target, ELTWISE)


def tile_default(s: dict, target: str) -> dict:
    return elementwise_default(NAME, ELTWISE)(s, target)


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    a, b = elementwise_draws(shape["N"], 2)
    return HarnessCase({"a": a, "b": b}, harness_bf16(a + b), "bf16", "eltwise_add/eltwise_add.py:223-231")


HARNESS = {  # Makefile:15-42, :55-59 (its checked run forwards --perf-iters)
    "tile_keys": ["tile"],
    "command": "make -C {mlir_air}/programming_examples/eltwise_add run SHAPE={N} TILE={tile} PERF_ITERS={perf_iters}",
    "defaults": {"tile": 2048, "perf_iters": 20},
}


def twin_flags(p) -> None:  # eltwise_add.py:117-186
    p.add_argument("--shape", type=int, nargs="+", default=[1024, 1024])
    p.add_argument("--tile", type=int, default=None)
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    dsl_flags(p)


def twin_check(a) -> tuple:  # eltwise_add.py:40-67, :242-244
    n = int(np.prod(a.shape))
    tile = a.tile or 1024
    for extent in a.shape:
        if extent % tile:
            raise ValueError(f"shape extent {extent} is not a multiple of tile {tile}")
    print(f"Eltwise add shape={tuple(a.shape)} dtype={a.dtype} on {a.target}")
    return NAME, {"N": n}, None, {"tile": tile}, None, a.compile_only


def twin_profile(a, figures) -> None:
    """test.cpp:142-226's timer lines (:210-212) for `profile eltwise_add --S N`; `figures` is the cost model's
    modelled_kernel_figures (one modelled figure for every statistic)."""
    us = figures(NAME, {"N": a.S})["latency_us"]
    bw = 3 * a.S * 2 / (us * 1e-6) / 1e9
    print(f"PASS: All {a.S} elements correct.")
    print(f"Problem size: {a.S} elements ({a.S * 2 // 1024} KB per buffer)")
    print(f"Avg NPU eltwise_add time: {us}us.\nAvg bandwidth: {bw} GB/s\nMin NPU eltwise_add time: {us}us.\n"
          f"Max bandwidth: {bw} GB/s\nMax NPU eltwise_add time: {us}us.\nMin bandwidth: {bw} GB/s")


TWIN = TwinStandIn(
    directory="eltwise_add",
    # Makefile:15-42 (vars, PY_FLAGS), :55-59 (run + --perf-iters), :64-69 (profile)
    variables="OUTPUT_FORMAT ?= xclbin\nEXTRA_PY_FLAGS ?=\nSHAPE ?= 1024 1024\nDTYPE ?= bf16\nTILE ?=\nVECTOR_SIZE ?=\n"
              "PERF_ITERS ?= 0\nTARGET ?= auto\n",
    flags="--shape $(SHAPE) --dtype $(DTYPE) $(if $(TILE),--tile $(TILE)) $(if $(VECTOR_SIZE),--vector-size "
          "$(VECTOR_SIZE)) --target $(TARGET) --output-format $(OUTPUT_FORMAT) $(EXTRA_PY_FLAGS) --perf-iters $(PERF_ITERS)",
    extra_targets="profile:\n\tmkdir -p $(BUILD_DIR) && cd $(BUILD_DIR) && $(TWIN) eltwise_add --shape $(SHAPE) "
                  "--compile-only $(if $(TILE),--tile $(TILE)) && $(TWIN) profile eltwise_add --S $$(echo $(SHAPE) | "
                  "awk '{n=1; for(i=1;i<=NF;i++) n*=$$i; print n}')\n",
    peano_only=False,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="Compiled successfully.",
    profile=twin_profile,
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    return streaming_features(NAME, s["N"], 6.0, t)  # 2 in + 1 out bf16 streams


CONSTANTS = {"eltwise_add_s_per_byte_per_tile": 0.0, "eltwise_add_s_per_unit": 1.354e-06}
EVIDENCE = {
    "eltwise_add_s_per_byte_per_tile": "fitted 0: the add is bound by its L1 chunk rounds, not bytes (below).",
    "eltwise_add_s_per_unit": "per L1 chunk per tile (2048 elements: 2 in + 1 out DMA round): 1.36 us = "
                              "9 GB/s per tile; EltwiseAdd_bf16.md:100-108 and the column sweep 140-142.",
}


# --- mlir-air's registry page (e972f29): the projection's catalog entry, its columns, the importer -----------


def index_cells(row, fmt) -> list[str]:
    """supported_kernels.md's Element-wise Add row (no "(as 2-D)", no abs_err column)."""
    return fmt.streaming_cells(row, ("herd_x", "herd_y", "tile"), as_2d=False, abs_err=False, used_by=False)


def details_cells(method, row, fmt) -> list[str]:
    return fmt.streaming_cells(row, ("herd_x", "herd_y", "tile"), as_2d=True, abs_err=True, used_by=False)


REGISTRY_PAGE = CatalogPage(
    title="Element-wise Add (BF16)", page="EltwiseAdd_bf16", columns=("N",),
    aliases={"n": "N", "numel": "N", "size": "N"}, spellings=("eltwiseadd", "elementwiseadd", "add"),
    math="c = a + b", datapath="FP32 add, one bf16 rounding", npu2_mean_rel_L1="1.9e-3", target_tiles=8,
    index=("N", "best config (hx/hy/tile_n)", "latency", "bandwidth", "mean_rel_L1", "Status"),  # supported_kernels.md
    details=(("", ("N", "(as 2-D)", "best config (cols/rows/tile)", "latency", "bandwidth", "mean_rel_L1",
                   "abs_err max", "Status")),),  # details/EltwiseAdd_bf16.md
    index_cells=index_cells, details_cells=details_cells, elements=lambda s: 3 * s["N"], tolerance_label="bf16",
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape and configuration of one upstream row (either table); the importer reads the figures."""
    return cell.streaming_row(header, cells, ("herd_x", "herd_y", "tile"))
