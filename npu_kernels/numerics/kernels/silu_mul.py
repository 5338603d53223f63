"""SiLU-and-Mul: out = silu(gate) * up in bf16, the SwiGLU of a gated FFN (vLLM's SiluAndMul).

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29:

  reference  FP32 g * sigmoid(g) * u on bf16 inputs g, u ~ N(0, 1).
  tolerance  programming_examples/silu_and_mul/silu_and_mul.py:331-353: `rtol=1.6e-2, atol=8e-2` (atol sized to
             the bf16 tanh-based sigmoid's chain, :331-337).
  emulated   silu_and_mul.cc's chain: tanh(g/2) through the NLF tanh, 1 + tanh, 0.5*(.), g*sigmoid, *u, each a bf16
             floor rounding (npu_kernels.numerics.executors.emulated_elementwise.silu_mul_rows).
  torch      F.silu(g) * u in bf16.
  tile rules herd_y == 1 (3 DMAs per tile: 2 in, 1 out, silu_and_mul.py:39-40), N % (tile_n*herd_x) == 0, tile_n <=
             4096 and a multiple of 16; the planner's default tile_n is 4096 (the Makefile's TILE_N).
  harness    silu_and_mul.py:318-328 `default_rng(0)`, g then u `standard_normal(...)` -> bf16; ref :249-252
             `g * sigmoid(g) * u` in f32 -> bf16.
  table      programming_examples/silu_and_mul/Makefile:16-24 (N, TILE_N, HERD_X, HERD_Y, ITERATIONS), :49-54 (`make
             profile` = the checked run with --perf-iters $(ITERATIONS)).
  twin       silu_and_mul.py:264-302 (flags), :39-44 (`assert n % (tile_n * total_tiles) == 0`); Makefile:16-24,
             :42-46 (run), :49-54 (profile); its BUILD_DIR is build_peano whatever the toolchain.
  cost       bytes per tile (2 in + 1 out bf16 streams): SiLU_Mul_bf16.md:101-111, 141.
  registry   kernel_registry/supported_kernels.md (its "SiLU-and-Mul" table) and details/SiLU_Mul_bf16.md: the
             columns registry.mlir_air_tables renders and registry.importer_tables reads (no details JSON).
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import f32
from npu_kernels.numerics.harness_case import HarnessCase, elementwise_draws, harness_bf16
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn, streaming_features
from npu_kernels.numerics.references import bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure
from npu_kernels.numerics.tile_common import elementwise_default, elementwise_rules
from npu_kernels.thresholds import RTOL

NAME = "silu_mul"
LISTED_AFTER = "conv1d"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
DMAS_PER_TILE = 3  # 2 in, 1 out: only a one-row herd places (tile_notes)
TOLERANCES = {"bf16-out": (RTOL, 8e-2)}
TOLERANCE_SOURCE = ("mlir-air programming_examples/silu_and_mul/silu_and_mul.py:331-353@e972f29 `rtol=1.6e-2, "
                    "atol=8e-2` (atol sized to the bf16 tanh-based sigmoid)")
ELTWISE = ("tile_n", 4096, 1, 3)  # (tile key, default tile, max herd_y, DMAs per tile): npu_kernels.numerics.tile_common


def make_inputs(s, rng):
    return {"g": bf16_randn(rng, (s["N"],)), "u": bf16_randn(rng, (s["N"],))}


def reference(i, s):
    g = i["g"]
    return g * (np.float32(1.0) / (np.float32(1.0) + np.exp(-g))) * i["u"]


def call(ex, i, s, contract, tile):
    return ex.silu_mul(i["g"], i["u"])


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("N",),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16",
                                    "bf16 SiLU(gate)*up, sigmoid via hardware tanh")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 6.0 * s["N"],
    bytes_fn=lambda s: 6.0 * s["N"],
    output_elements_fn=lambda s: s["N"],
    npu2={"bf16-out": NpuFigure(1.0e-2, 1.0e-2, 1.0e-2, "N=4194304 (2048x2048), herd 8x1")},  # SiLU_Mul_bf16.md
    registry_shape={"N": 4194304},
    small_shape={"N": 65536},
    target_tiles={"npu2": 8, "npu1": 4},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, g, u):
    g = np.asarray(g, np.float32)
    return g / (np.float32(1) + np.exp(-g)) * np.asarray(u, np.float32)


def emulated(ex, g, u):
    """silu_and_mul.cc's bf16 chain (floor rounding), row by row."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_elementwise import silu_mul_rows

    with ex.timer.time(NAME):
        if np.shape(g) != np.shape(u):
            return silu_mul_rows(f32(g), f32(u))
        return ex._rows(silu_mul_rows, [g, u])


def torch(ex, g, u):
    import torch as _torch
    import torch.nn.functional as F

    with ex.timer.time(NAME), _torch.inference_mode():
        return ex._np(F.silu(ex._t(g)) * ex._t(u))


# --- tile rules and default -------------------------------------------------------------------------------


def tile_rules(target: str) -> list:
    return elementwise_rules(NAME, target, ELTWISE)


def tile_default(s: dict, target: str) -> dict:
    return elementwise_default(NAME, ELTWISE)(s, target)


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    g, u = elementwise_draws(shape["N"], 2)
    silu = g * (np.float32(1.0) / (np.float32(1.0) + np.exp(-g)))
    return HarnessCase({"g": g, "u": u}, harness_bf16(silu * u), "bf16", "silu_and_mul/silu_and_mul.py:249-252,318-328")


HARNESS = {  # Makefile:16-24, :49-54: `make profile` = the checked run with --perf-iters $(ITERATIONS)
    "tile_keys": ["tile_n", "herd_x", "herd_y"],
    "command": "make -C {mlir_air}/programming_examples/silu_and_mul profile N={N} TILE_N={tile_n} HERD_X={herd_x} "
               "HERD_Y={herd_y} ITERATIONS={perf_iters}",
    "defaults": {"tile_n": 4096, "herd_x": 8, "herd_y": 1, "perf_iters": 20},
}


def twin_flags(p) -> None:  # silu_and_mul.py:264-302
    p.add_argument("--n", type=int, default=65536)
    p.add_argument("--tile-n", type=int, default=1024)
    p.add_argument("--herd-x", type=int, default=8)
    p.add_argument("--herd-y", type=int, default=None)
    p.add_argument("--perf-iters", type=int, default=0)
    p.add_argument("--compile-mode", choices=["compile-only", "compile-and-run"], default="compile-and-run")
    p.add_argument("--output-format", choices=["xclbin", "elf"], default="xclbin")


def twin_check(a) -> tuple:  # silu_and_mul.py:39-44
    hy = a.herd_y or 1
    assert a.n % (a.tile_n * a.herd_x * hy) == 0
    return (NAME, {"N": a.n}, None, {"tile_n": a.tile_n, "herd_x": a.herd_x, "herd_y": hy}, None,
            a.compile_mode != "compile-and-run")


TWIN = TwinStandIn(
    directory="silu_and_mul",
    # Makefile:16-24 (vars), :42-46 (run), :49-54 (profile = run + --perf-iters)
    variables="OUTPUT_FORMAT ?= xclbin\nN ?= 16777216\nTILE_N ?= 4096\nHERD_X ?= 8\nHERD_Y ?= 1\nITERATIONS ?= 30\n",
    flags="--output-format $(OUTPUT_FORMAT) --n $(N) --tile-n $(TILE_N) --herd-x $(HERD_X) --herd-y $(HERD_Y)",
    extra_targets="profile:\n\tmkdir -p $(BUILD_DIR) && cd $(BUILD_DIR) && $(TWIN) silu_mul --output-format "
                  "$(OUTPUT_FORMAT) --n $(N) --tile-n $(TILE_N) --herd-x $(HERD_X) --herd-y $(HERD_Y) --perf-iters "
                  "$(ITERATIONS)\n",
    peano_only=True,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="",
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    return streaming_features(NAME, s["N"], 6.0, t)  # 2 in + 1 out bf16 streams


CONSTANTS = {"silu_mul_s_per_byte_per_tile": 3.27e-10, "silu_mul_s_per_unit": 0.0}
EVIDENCE = {
    "silu_mul_s_per_byte_per_tile": "SiLU-and-mul per tile: 1/3.06 GB/s (bf16 tanh-based sigmoid); "
                                    "SiLU_Mul_bf16.md:101-111, 141.",
    "silu_mul_s_per_unit": "per-chunk cost: fitted 0 (one tile size measured).",
}


# --- mlir-air's registry page (e972f29): the projection's catalog entry, its columns, the importer -----------


def index_cells(row, fmt) -> list[str]:
    return fmt.streaming_cells(row, ("herd_x", "herd_y", "tile_n"), as_2d=True, abs_err=True, used_by=False)


def details_cells(method, row, fmt) -> list[str]:
    return fmt.streaming_cells(row, ("herd_x", "herd_y", "tile_n"), as_2d=True, abs_err=True, used_by=False)


REGISTRY_PAGE = CatalogPage(
    title="SiLU-and-Mul (BF16)", page="SiLU_Mul_bf16", columns=("N",), aliases={"n": "N", "numel": "N", "size": "N"},
    spellings=("silumul", "siluandmul"), math="out = silu(gate) * up",
    datapath="sigmoid via tanh (0.5(1+tanh(g/2))) in bf16, chain of bf16 roundings", npu2_mean_rel_L1="1.0e-2",
    target_tiles=8,
    index=("N", "(as 2-D)", "best config (hx/hy/tile_n)", "latency", "bandwidth", "mean_rel_L1", "abs_err max",
           "Status"),  # supported_kernels.md
    details=(("", ("N", "(as 2-D)", "best config (herd_x/herd_y/tile_n)", "latency", "bandwidth", "mean_rel_L1",
                   "abs_err max", "Status")),),  # details/SiLU_Mul_bf16.md
    index_cells=index_cells, details_cells=details_cells, elements=lambda s: 3 * s["N"], tolerance_label="bf16",
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape and configuration of one upstream row (either table); the importer reads the figures."""
    return cell.streaming_row(header, cells, ("herd_x", "herd_y", "tile_n"))
