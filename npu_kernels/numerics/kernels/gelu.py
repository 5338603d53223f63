"""GELU (tanh approximation): y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in bf16, the MLP activation of
GELU families.

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29:

  reference  FP32 tanh-GELU on bf16 x ~ N(0, 1) (sqrt(2/pi) in double, beta 0.044715).
  tolerance  programming_examples/gelu/gelu.py:252-257 `rtol, atol = 1.6e-2, 5e-2` (from measurement, :252-256).
  emulated   gelu.py's direct codegen chain: x*x, *x, *beta, +x, *sqrt(2/pi), tanh, +1, x/2, * - each a bf16 floor
             rounding, the constants themselves bf16 (npu_kernels.numerics.executors.emulated_elementwise.gelu_rows).
  torch      F.gelu(approximate="tanh") in bf16.
  tile rules herd_x*herd_y <= 16 (2 DMAs per tile: 8x2 places, 8x4 does not), N % (tile_n*herd_x*herd_y) == 0,
             tile_n <= 4096 and a multiple of 16; the planner's default is tile_n 4096 on an 8x2 herd.
  harness    gelu.py:248-249 `default_rng(0)`, `standard_normal(n, float32)` -> bf16; ref :55-67 in f32 -> bf16, its
             c and beta from python/air/api/ops.py:415-416. Transcript `GELU n=... tile_n=... bf16 on <target>` (:260).
  table      programming_examples/gelu/Makefile:15-35 (N, TILE_N, HERD_SHAPE, PERF_ITERS), :45-49 (`run` + --perf-iters).
  twin       gelu.py:167-213 (flags), :70-94 (`n must be a multiple of tile_n`, a ValueError); Makefile:15-35, :45-49.
  cost       bytes per tile (1 in + 1 out bf16 streams): GELU_bf16.md:160-164, 192, 203-205; the tile_n sweep is flat
             (:215-219).
  registry   kernel_registry/supported_kernels.md (its "GELU" table, with "Used by") and details/GELU_bf16.md: the
             columns registry.mlir_air_tables renders and registry.importer_tables reads (no details JSON).
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.harness_case import HarnessCase, elementwise_draws, harness_bf16
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn, dsl_flags, streaming_features
from npu_kernels.numerics.references import bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure
from npu_kernels.numerics.tile_common import elementwise_default, elementwise_rules
from npu_kernels.thresholds import RTOL

NAME = "gelu"
LISTED_AFTER = "silu_mul"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
TOLERANCES = {"bf16-out": (RTOL, 5e-2)}
TOLERANCE_SOURCE = "mlir-air programming_examples/gelu/gelu.py:252-257@e972f29 `rtol, atol = 1.6e-2, 5e-2`"
ELTWISE = ("tile_n", 4096, 2, 2)  # (tile key, default tile, max herd_y, DMAs per tile): npu_kernels.numerics.tile_common
GELU_C = math.sqrt(2.0 / math.pi)  # the FP32 reference's
GELU_BETA = 0.044715
HARNESS_SQRT_2_OVER_PI = 0.7978845608  # python/air/api/ops.py:415 (the harness's reference)
HARNESS_BETA = 0.044715  # python/air/api/ops.py:416


def make_inputs(s, rng):
    return {"x": bf16_randn(rng, (s["N"],))}


def reference(i, s):
    x = i["x"]
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(np.float32(GELU_C) * (x + np.float32(GELU_BETA) * x * x * x)))


def call(ex, i, s, contract, tile):
    return ex.gelu(i["x"])


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("N",),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16",
                                    "bf16 GELU (tanh approximation), hardware tanh")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 9.0 * s["N"],
    bytes_fn=lambda s: 4.0 * s["N"],
    output_elements_fn=lambda s: s["N"],
    npu2={"bf16-out": NpuFigure(8.4e-3, 8.4e-3, 8.4e-3, "N=3145728, herd 8x2")},  # GELU_bf16.md
    registry_shape={"N": 3145728},
    small_shape={"N": 65536},
    target_tiles={"npu2": 16, "npu1": 8},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, x):
    x = np.asarray(x, np.float32)
    c = np.float32(math.sqrt(2.0 / math.pi))
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(c * (x + np.float32(0.044715) * x**3)))


def emulated(ex, x):
    """gelu.py's bf16 chain (floor rounding, bf16 constants), row by row."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_elementwise import gelu_rows

    with ex.timer.time(NAME):
        return ex._rows(gelu_rows, [x])


def torch(ex, x):
    import torch as _torch
    import torch.nn.functional as F

    with ex.timer.time(NAME), _torch.inference_mode():
        return ex._np(F.gelu(ex._t(x), approximate="tanh"))


# --- tile rules and default -------------------------------------------------------------------------------


def tile_rules(target: str) -> list:
    return elementwise_rules(NAME, target, ELTWISE)


def tile_default(s: dict, target: str) -> dict:
    return elementwise_default(NAME, ELTWISE)(s, target)


def tile_note(s: dict, t: dict, herd: list[int], target: str, tiles_target: int) -> str:
    """Why a default herd is short of the target tiles (npu_kernels.numerics.tile_notes)."""
    return f"N={s['N']} does not split over 8x2 tiles of {t['tile_n']}"


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    (x,) = elementwise_draws(shape["N"], 1)
    c, beta = np.float32(HARNESS_SQRT_2_OVER_PI), np.float32(HARNESS_BETA)
    ref = np.float32(0.5) * x * (np.float32(1.0) + np.tanh(c * (x + beta * x * x * x)))
    return HarnessCase({"x": x}, harness_bf16(ref), "bf16", "gelu/gelu.py:55-67,248-256")


HARNESS = {  # Makefile:15-35, :45-49
    "tile_keys": ["tile_n", "herd_shape"],
    "command": "make -C {mlir_air}/programming_examples/gelu run N={N} TILE_N={tile_n} HERD_SHAPE={herd_shape} "
               "PERF_ITERS={perf_iters}",
    "defaults": {"tile_n": 4096, "herd_shape": "8 2", "perf_iters": 20},
}


def twin_flags(p) -> None:  # gelu.py:167-213
    p.add_argument("--n", type=int, default=65536)
    p.add_argument("--tile-n", type=int, default=1024)
    dsl_flags(p)


def twin_check(a) -> tuple:  # gelu.py:70-94, :260
    if a.n % a.tile_n:
        raise ValueError(f"n ({a.n}) must be a multiple of tile_n ({a.tile_n})")
    print(f"GELU n={a.n} tile_n={a.tile_n} bf16 on {a.target}")
    herd = " ".join(str(x) for x in a.herd_shape) if a.herd_shape else ""
    return NAME, {"N": a.n}, None, {"tile_n": a.tile_n, **({"herd_shape": herd} if herd else {})}, None, a.compile_only


TWIN = TwinStandIn(
    directory="gelu",
    # Makefile:15-35 (vars, PY_FLAGS), :45-49 (run + --perf-iters)
    variables="OUTPUT_FORMAT ?= xclbin\nEXTRA_PY_FLAGS ?=\nN ?= 65536\nTILE_N ?= 1024\nVECTOR_SIZE ?=\nHERD_SHAPE ?=\n"
              "PERF_ITERS ?= 0\nTARGET ?= auto\n",
    flags="--n $(N) --tile-n $(TILE_N) $(if $(VECTOR_SIZE),--vector-size $(VECTOR_SIZE)) $(if $(HERD_SHAPE),--herd-shape "
          "$(HERD_SHAPE)) --target $(TARGET) --output-format $(OUTPUT_FORMAT) $(EXTRA_PY_FLAGS) --perf-iters $(PERF_ITERS)",
    extra_targets="",
    peano_only=False,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="Compiled successfully.",
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    return streaming_features(NAME, s["N"], 4.0, t)  # 1 in + 1 out bf16 streams


CONSTANTS = {"gelu_s_per_byte_per_tile": 5.656e-10, "gelu_s_per_unit": 0.0}
EVIDENCE = {
    "gelu_s_per_byte_per_tile": "GELU per tile: 1/1.77 GB/s (bf16 tanh); GELU_bf16.md:160-164, 192, 203-205.",
    "gelu_s_per_unit": "per-chunk cost: fitted 0 (tile_n sweep is flat, GELU_bf16.md:215-219).",
}


# --- mlir-air's registry page (e972f29): the projection's catalog entry, its columns, the importer -----------


def index_cells(row, fmt) -> list[str]:
    return fmt.streaming_cells(row, ("herd_x", "herd_y", "tile_n"), as_2d=True, abs_err=True, used_by=True)


def details_cells(method, row, fmt) -> list[str]:
    return fmt.streaming_cells(row, ("herd_x", "herd_y", "tile_n"), as_2d=True, abs_err=True, used_by=False)


REGISTRY_PAGE = CatalogPage(
    title="GELU (BF16, tanh approx)", page="GELU_bf16", columns=("N",), aliases={"n": "N", "numel": "N", "size": "N"},
    spellings=("gelu",), math="0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))", datapath="bf16 tanh",
    npu2_mean_rel_L1="8.4e-3", target_tiles=16,
    index=("N", "(as 2-D)", "best config (hx/hy/tile_n)", "latency", "bandwidth", "mean_rel_L1", "abs_err max",
           "Used by", "Status"),  # supported_kernels.md
    details=(("", ("N", "(as 2-D)", "best config (herd_x/herd_y/tile_n)", "latency", "bandwidth", "mean_rel_L1",
                   "abs_err max", "Status")),),  # details/GELU_bf16.md
    index_cells=index_cells, details_cells=details_cells, elements=lambda s: 2 * s["N"], tolerance_label="bf16",
    listed_after="rope",  # supported_kernels.md lists RoPE between SiLU-and-Mul and GELU
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape and configuration of one upstream row (either table); the importer reads the figures."""
    return cell.streaming_row(header, cells, ("herd_x", "herd_y", "tile_n"))
