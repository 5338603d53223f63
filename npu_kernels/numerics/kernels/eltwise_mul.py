"""Element-wise Multiply: c = a * b in bf16, the gate of LFM2's short-convolution block (h = B * x, y = C * conv).

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`):

  reference  FP32 a * b on bf16 inputs a, b ~ N(0, 1).
  tolerance  kernel_registry/details/EltwiseMul_bf16.md (e0eee76d) "Tolerances": "rtol = 1.6e-2 ..., atol = 5e-2".
  emulated   eltwise_mul.py's `c[:] = a[:] * b[:]` (arith.mulf on bf16 vectors): the FP32 product of two bf16
             values is exact, one bf16 rounding on store, floor like every direct-codegen kernel (the AIE default;
             docs/emulated_numerics.md "Conv1D and Element-wise Multiply").
  torch      bf16 multiply.
  tile rules as eltwise_add (EltwiseMul_bf16.md: the same DSL body, tile and herd defaults): herd_y == 1 (3 DMAs per
             tile), N % (tile*herd_x) == 0, tile <= 4096 (L1); the default tile is eltwise_mul.py@0b499c9
             `default_tile`'s: the largest power of two, capped at 1024, whose three ping-ponged bf16 buffers fit L1.
  harness    programming_examples/eltwise_mul/eltwise_mul.py (@0b499c9, later than e972f29) `__main__`: `rng =
             default_rng(0)`, `standard_normal(shape, dtype=float32).astype(bfloat16)` for a then b (a 2-D `--shape
             2048 2048` draws the same stream as N = 4194304); ref `(a.f32 * b.f32).astype(bfloat16)`. Its
             transcript: `Eltwise mul shape=(...) dtype=bf16 on <target>`, then XRTRunner's `[precision]` line over N.
  table      programming_examples/eltwise_mul/Makefile at e0eee76d (SHAPE, TILE, PERF_ITERS; `run` forwards
             --perf-iters), the tile default of eltwise_mul.py `default_tile` (1024 for bf16 1-D). Later than e972f29.
  twin       eltwise_mul.py (read at 0b499c9): --shape (1-D N or 2-D M N), --tile, --vector-size, --dtype,
             --herd-shape, --target, --output-format, --perf-iters, --print-ir, --compile-only, -v; "shape extent ... is
             not a multiple of tile" as a ValueError. Makefile at e0eee76d (vars, PY_FLAGS, run + --perf-iters; its
             test.exe profile target is not stood in).
  cost       two bf16 streams in, one out, split over the herd's tiles: the bytes each tile moves. No per-chunk term:
             the measured rows (supported_kernels.md@0b499c9) are the 2-D default tile at two sizes only, which a
             chunk count cannot be told apart from the bytes with, and the deployment runs the 1-D tile.
  registry   details/EltwiseMul_bf16.md at e0eee76dd218 ("Per-shape data") and supported_kernels.md at 0b499c9ad5c7
             "## Element-wise Multiply — tested shapes" (idle-NPU2 rows).
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import f32, mul_rounded
from npu_kernels.numerics.harness_case import HarnessCase, elementwise_draws, harness_bf16
from npu_kernels.numerics.kernels.base import TwinStandIn, dsl_flags
from npu_kernels.numerics.references import bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure
from npu_kernels.numerics.tile_common import elementwise_default, elementwise_rules
from npu_kernels.thresholds import RTOL

LISTED_AFTER = "eltwise_add"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
DMAS_PER_TILE = 3  # 2 in, 1 out: only a one-row herd places (tile_notes)
NAME = "eltwise_mul"
TOLERANCES = {"bf16-out": (RTOL, 5e-2)}
TOLERANCE_SOURCE = ("mlir-air kernel_registry/details/EltwiseMul_bf16.md (e0eee76d) \"Tolerances\": \"rtol = "
                   "1.6e-2 ..., atol = 5e-2\"")
ELTWISE = ("tile", 1024, 1, 3)  # (tile key, default tile, max herd_y, DMAs per tile): npu_kernels.numerics.tile_rules
SCRIPT_TILE_CAP = 1024  # eltwise_mul.py `default_tile(..., cap=1024)`


def make_inputs(s, rng):
    return {"a": bf16_randn(rng, (s["N"],)), "b": bf16_randn(rng, (s["N"],))}


def reference(i, s):
    return i["a"] * i["b"]


def call(ex, i, s, contract, tile):
    return ex.eltwise_mul(i["a"], i["b"])


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("N",),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16", "bf16 multiply, one rounding")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: float(s["N"]),
    bytes_fn=lambda s: 6.0 * s["N"],
    output_elements_fn=lambda s: s["N"],
    # EltwiseMul_bf16.md (e0eee76d) "Per-shape data"
    npu2={"bf16-out": NpuFigure(2.736e-3, 2.728e-3, 2.736e-3, "N=4194304 (2048x2048) (1024x1024: 2.728e-3)")},
    registry_shape={"N": 4194304},
    small_shape={"N": 65536},
    target_tiles={"npu2": 8, "npu1": 4},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, a, b):
    return np.asarray(a, np.float32) * np.asarray(b, np.float32)


def emulated(ex, a, b):
    """The exact FP32 product, one bf16 rounding on store: floor."""
    with ex.timer.time(NAME):
        if np.shape(a) != np.shape(b):
            return mul_rounded(f32(a), f32(b), "floor")
        return ex._rows(lambda x, y: mul_rounded(x, y, "floor"), [a, b])


def torch(ex, a, b):
    import torch as _torch

    with ex.timer.time(NAME), _torch.inference_mode():
        return ex._np(ex._t(a) * ex._t(b))


# --- tile rules and default -------------------------------------------------------------------------------


def tile_rules(target: str) -> list:
    return elementwise_rules(NAME, target, ELTWISE)


def tile_default(s: dict, target: str) -> dict:
    return elementwise_default(NAME, ELTWISE)(s, target)


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    a, b = elementwise_draws(shape["N"], 2)
    return HarnessCase({"a": a, "b": b}, harness_bf16(a * b), "bf16", "eltwise_mul/eltwise_mul.py@0b499c9 __main__")


HARNESS = {
    "since": "e0eee76dd218c1cf135d75d4494f8ae78040f63e",
    "tile_keys": ["tile"],
    "command": "make -C {mlir_air}/programming_examples/eltwise_mul run SHAPE={N} TILE={tile} PERF_ITERS={perf_iters}",
    "defaults": {"tile": 1024, "perf_iters": 20},
}


def twin_flags(p) -> None:
    p.add_argument("--shape", type=int, nargs="+", default=[1024, 1024])
    p.add_argument("--tile", type=int, default=None)
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    dsl_flags(p)


def _script_tile(rank: int) -> int:
    """The largest power of two (at most 1024) whose three ping-ponged bf16 buffers fit the 64 KiB L1."""
    budget, tile = 65536 // (3 * 2 * 2), 1
    while (2 * tile) ** rank <= budget and 2 * tile <= SCRIPT_TILE_CAP:
        tile *= 2
    return tile


def twin_check(a) -> tuple:
    n = int(np.prod(a.shape))
    if len(a.shape) not in (1, 2):
        raise ValueError(f"shape must be 1-D or 2-D, got {len(a.shape)}-D: {a.shape}")
    tile = a.tile or _script_tile(len(a.shape))
    for extent in a.shape:
        if extent % tile:
            raise ValueError(f"shape extent {extent} is not a multiple of tile {tile}")
    print(f"Eltwise mul shape={tuple(a.shape)} dtype={a.dtype} on {'npu2' if a.target == 'auto' else a.target}")
    return NAME, {"N": n}, None, {}, None, a.compile_only


TWIN = TwinStandIn(
    directory="eltwise_mul",
    variables="OUTPUT_FORMAT ?= xclbin\nEXTRA_PY_FLAGS ?=\nSHAPE ?= 1024 1024\nDTYPE ?= bf16\nTILE ?=\nVECTOR_SIZE ?=\n"
              "PERF_ITERS ?= 0\nTARGET ?= auto\n",
    flags="--shape $(SHAPE) --dtype $(DTYPE) $(if $(TILE),--tile $(TILE)) $(if $(VECTOR_SIZE),--vector-size "
          "$(VECTOR_SIZE)) --target $(TARGET) --output-format $(OUTPUT_FORMAT) $(EXTRA_PY_FLAGS) --perf-iters $(PERF_ITERS)",
    extra_targets="",
    peano_only=False,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="Compiled successfully.",
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    return {"launch_s": 1.0, "eltwise_mul_s_per_byte_per_tile": s["N"] * 6.0 / (t["herd_x"] * t["herd_y"])}


CONSTANTS = {"eltwise_mul_s_per_byte_per_tile": 1.208e-10}
EVIDENCE = {
    "eltwise_mul_s_per_byte_per_tile": "Element-wise Multiply per tile (2 in + 1 out bf16): 1/8.28 GB/s; its two "
                                       "rows 1024x1024 180.5 us and 2048x2048 451.6 us (supported_kernels.md"
                                       "@0b499c9, Element-wise Multiply — tested shapes), within 2 % of Add's 437 us.",
}


# --- mlir-air's registry pages (the importer) -------------------------------------------------------------

REGISTRY_PAGE = {
    "page": "EltwiseMul_bf16", "commit": "e0eee76dd218c1cf135d75d4494f8ae78040f63e", "rtol": 1.6e-2, "atol": 5e-2,
    "index_commit": "0b499c9ad5c76ff076280a182df302e6928d2698",
    "tables": (("", ("N", "(as 2-D)", "latency", "bandwidth", "mean_rel_L1", "Status")),
               ("index", ("N", "(as 2-D)", "config (hx/hy/tile_n)", "latency", "bandwidth", "mean_rel_L1", "Used by",
                          "Status"))),
}


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """One Element-wise Multiply row (either table); `cell` is the importer's cell readers."""
    c = dict(zip(header, cells))
    verdict, _ = cell.status_of(c["Status"])
    return [{"shape": {"N": cell.ints(c["N"])[0]}, "tile": {}, "verdict": verdict, "status": c["Status"],
             "mean_rel_L1": cell.first_number(c["mean_rel_L1"]),
             "latency_us": cell.latency_us(c["latency"]) if "⏳" not in c["latency"] else None}]
