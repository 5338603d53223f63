"""Q4NX dequant: w[M, K] = q * scale + min, 4-bit codes with a bf16 scale and min per 32-column group, to bf16.

The on-device dequant of mlir-air's 4-bit deployment (programming_examples/llms/llama32_1b_q4nx, files later than
the contract's e972f29). Everything about the kernel, in one place (the pieces of
`npu_kernels.numerics.kernels.base.KernelDef`):

  layout     dequant_q4nx(codes (M, K), scale (M, K/32), min (M, K/32)) -> (M, K); codes are the 4-bit values 0..15
             as float32, scale and min bf16, one per 32-column group.
  reference  FP32 q * scale + min (npu_kernels.numerics.references.q4nx_dequantised) on dequant_q4nx.py's own draw
             (@0d63308): q uniform in 0..15, scale U(0.005, 0.02), min U(-0.1, 0.1), the latter two as the bf16 the
             packed row holds (`pack_weight` casts them).
  tolerance  dequant_q4nx.py `run_test(..., rtol=0.1, atol=0.05)` (@0d63308): the harness's own bounds, whose
             reference holds FP32 scales/mins the kernel only sees in bf16; ours holds the bf16 ones, so the
             emulation is exact against it.
  emulated   dequant_q4nx.cc:36-57@0d63308: the accumulator loaded with min, q*scale added (the exact product), one
             RNE to bf16 (npu_kernels.numerics.executors.emulated_q4.dequant_q4nx).
  torch      q * scale + min in bf16 tensors, each op rounded (a GPU's dequantise path).
  tile rules rows split over a 1 x herd_y herd, one packed row (K/2 code bytes + K/32 bf16 scales and mins) and its
             K bf16 outputs in L1 (dequant_q4nx.py build_module@0d63308: `N_out % herd_n == 0`); the default is its
             herd [1, herd_n=4], fewer rows when M needs it.
  harness    dequant_q4nx.py `__main__` (@0d63308): `np.random.seed(0)`, codes `randint(0, 16, (N_out, K), uint8)`,
             scales `uniform(0.005, 0.02, (N_out, K/32))` then mins `uniform(-0.1, 0.1, ...)`, both
             `.astype(float32)`; `pack_weight` hands the kernel bf16 scales and mins, while the reference keeps the
             float32 ones: `(q * repeat(sc, 32) + repeat(mn, 32)).astype(bfloat16)`.
  table      no Makefile rule runs it and its `__main__` takes no flags: it checks one fixed shape, N_out x K =
             512 x 2048, against its own bounds and prints XRTRunner's [precision] / PASS! lines, no Latency line.
             Any other shape is refused in one line, never run.
  twin       llms/llama32_1b_q4nx/dequant_q4nx.py, run directly (no Makefile, no argparse): its one 512x2048 check;
             build_module asserts N_out % 4.
  cost       the 4-bit codes + bf16 scale/min per 32 columns (0.625 B/weight) in and the bf16 matrix out, at the fused
             4-bit decode's calibrated stream rate (npu_kernels.perf.constants.DERIVED q4_s_per_byte).
  registry   npu-ledger's own page (Dequant_Q4NX_bf16): mlir-air's kernel_registry has no page for it.
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.harness_case import HarnessCase, harness_bf16
from npu_kernels.numerics.kernels.base import Absent, CatalogPage, TwinStandIn
from npu_kernels.numerics.references import Q4_GROUP, q4nx_dequantised
from npu_kernels.numerics.spec import Contract, KernelSpec, ShapeError
from npu_kernels.numerics.tile_common import array_columns, array_rows, largest_divisor

NAME = "dequant_q4nx"
LISTED_AFTER = "gelu"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
TOLERANCES = {"bf16-out": (1e-1, 5e-2)}
TOLERANCE_SOURCE = ("mlir-air programming_examples/llms/llama32_1b_q4nx/dequant_q4nx.py `run_test(..., rtol=0.1, "
                    "atol=0.05)` (@0d63308, later than e972f29)")
HARNESS_SEED = 0  # dequant_q4nx.py `__main__` (@0d63308): np.random.seed(0)
SCRIPT_SHAPE = {"M": 512, "K": 2048}  # dequant_q4nx.py `__main__`: `N_out, K = 512, 2048` (no flags)


# --- FP32 reference, inputs, executor call ----------------------------------------------------------------


def check_shape(s):
    if s["K"] % Q4_GROUP:
        raise ShapeError(f"K={s['K']} must be a multiple of the {Q4_GROUP}-column Q4NX group")


def make_inputs(s, rng):
    """dequant_q4nx.py's `__main__` draw (@0d63308): q uniform in 0..15, scale U(0.005, 0.02), min U(-0.1, 0.1),
    the latter two as the bf16 the packed row holds (`pack_weight` casts them)."""
    g = s["K"] // Q4_GROUP
    return {
        "codes": rng.integers(0, 16, (s["M"], s["K"])).astype(np.float32),
        "scale": to_bf16(rng.uniform(0.005, 0.02, (s["M"], g))),
        "min": to_bf16(rng.uniform(-0.1, 0.1, (s["M"], g))),
    }


def reference(i, s):
    return q4nx_dequantised(i)


def call(ex, i, s, contract, tile):
    return ex.dequant_q4nx(i["codes"], i["scale"], i["min"])


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("M", "K"),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16",
                                    "4-bit codes, bf16 scale/min per 32 columns: FP32 q*scale+min, one RNE to bf16")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 2.0 * s["M"] * s["K"],
    bytes_fn=lambda s: s["M"] * s["K"] * (0.5 + 4.0 / 32) + 2.0 * s["M"] * s["K"],
    output_elements_fn=lambda s: s["M"] * s["K"],
    npu2={},  # mlir-air's registry has no NPU2 figure for it: every report says "not measured"
    registry_shape=dict(SCRIPT_SHAPE),  # dequant_q4nx.py's own check
    small_shape={"M": 64, "K": 256},
    target_tiles={"npu2": 4, "npu1": 4},
    fidelity_band=0.0,  # exact: judged bit for bit against its reference
    extra={"check_shape": check_shape},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, codes, scale, mn):
    group = np.shape(codes)[1] // np.shape(scale)[1]  # 32 columns per scale/min
    s, m = (np.repeat(np.asarray(v, np.float32), group, axis=1) for v in (scale, mn))
    return np.asarray(codes, np.float32) * s + m


def emulated(ex, codes, scale, mn):
    """FP32 add of the exact product, one RNE to bf16 (dequant_q4nx.cc)."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_q4 import dequant_q4nx

    with ex.timer.time(NAME):
        return dequant_q4nx(codes, scale, mn)


def torch(ex, codes, scale, mn):
    import torch as _torch

    with ex.timer.time(NAME), _torch.inference_mode():
        return ex._np(ex._dequant(codes, scale, mn))


# --- tile rules and default -------------------------------------------------------------------------------


def tile_rules(target: str) -> list:
    cols, rows = array_columns(target), array_rows(target)
    return [
        ("dequant_q4nx.M_divisible_by_herd", lambda s, t: s["M"] % (t["herd_x"] * t["herd_y"]) == 0,
         lambda s, t: f"M={s['M']} is not a multiple of herd_x*herd_y={t['herd_x']}*{t['herd_y']}"),
        ("dequant_q4nx.row_fits_l1", lambda s, t: s["K"] // 2 + s["K"] // 8 + 2 * s["K"] <= 65536,
         lambda s, t: f"K={s['K']}: a packed row and its bf16 output exceed the 64 KiB L1"),
        ("dequant_q4nx.herd_fits_array", lambda s, t: 1 <= t["herd_x"] <= cols and 1 <= t["herd_y"] <= rows,
         lambda s, t: f"herd {t['herd_x']}x{t['herd_y']} does not fit the {cols}x{rows} array"),
    ]


def tile_default(s: dict, target: str) -> dict:
    """dequant_q4nx.py's herd [1, herd_n=4] (build_module@0d63308), fewer rows when M needs it."""
    return {"herd_x": 1, "herd_y": largest_divisor(s["M"], min(4, array_rows(target)))}


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    np.random.seed(HARNESS_SEED)
    M, K = shape["M"], shape["K"]
    q = np.random.randint(0, 16, (M, K), np.uint8)
    sc = np.random.uniform(0.005, 0.02, (M, K // Q4_GROUP)).astype(np.float32)
    mn = np.random.uniform(-0.1, 0.1, (M, K // Q4_GROUP)).astype(np.float32)
    ref = q.astype(np.float32) * np.repeat(sc, Q4_GROUP, 1) + np.repeat(mn, Q4_GROUP, 1)
    inputs = {"codes": q.astype(np.float32), "scale": harness_bf16(sc), "min": harness_bf16(mn)}  # what pack_weight packs
    return HarnessCase(inputs, harness_bf16(ref), "bf16", "llms/llama32_1b_q4nx/dequant_q4nx.py@0d63308 __main__")


HARNESS = {  # the script, directly (no Makefile rule; its `__main__` takes no flags): its one shape, else refused
    "tile_keys": [],
    "command": "cd {mlir_air}/programming_examples/llms/llama32_1b_q4nx && if [ {M} = 512 ] && [ {K} = 2048 ]; then "
               "python3 dequant_q4nx.py; else echo 'dequant_q4nx.py checks only M=512 K=2048 (its __main__ takes no "
               "flags)' >&2; exit 2; fi",
}


def twin_check(a) -> tuple:
    """dequant_q4nx.py `__main__`: N_out, K = 512, 2048; build_module asserts N_out % 4."""
    assert SCRIPT_SHAPE["M"] % 4 == 0
    return NAME, dict(SCRIPT_SHAPE), None, {}, None, False


TWIN = TwinStandIn(
    directory="llms/llama32_1b_q4nx",  # dequant_q4nx.py (@0d63308, later than e972f29): run directly, no Makefile rule
    variables="",
    flags="",
    extra_targets="",
    peano_only=False,
    add_flags=lambda p: None,  # no argparse
    check=twin_check,
    compiled_line="",
    script="dequant_q4nx.py",
    makefile=False,
    parses_flags=False,
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    """The codes + bf16 scale/min per 32 columns (0.625 B/weight) in, the bf16 matrix out, at the 4-bit stream rate."""
    M, K = s["M"], s["K"]
    return {"launch_s": 1.0, "q4_s_per_byte": M * K * (0.5 + 4.0 / 32) + 2.0 * M * K}


NO_FIT = Absent("no registry rows to fit: its one constant is npu_kernels.perf.constants.DERIVED's q4_s_per_byte, "
                "the fused 4-bit decode's effective DDR stream rate calibrated on llama32_1b_q4nx/README.md@137ff7c "
                "(npu_kernels.perf.q4nx.calibration), shared with gemv_q4nx")
CONSTANTS = NO_FIT
EVIDENCE = NO_FIT


# --- its registry page: npu-ledger's own (the upstream kernel_registry has none) ----------------------------

NO_PAGE = Absent("mlir-air's kernel_registry has no page for the 4-bit kernels (dequant_q4nx.cc@0d63308 is "
                 "llama32_1b_q4nx's): the projection writes npu-ledger's own page, and no upstream row is read")
REGISTRY_PAGE = CatalogPage(
    title="Q4NX dequant (4-bit -> BF16)", page="Dequant_Q4NX_bf16", columns=("M", "K"),
    aliases={"m": "M", "k": "K", "n_out": "M"}, spellings=("dequantq4nx", "q4nxdequant"),
    math="w[M,K] = q * scale + min, bf16 scale/min per 32-column group",
    datapath="FP32 add of the exact product q*scale, one round-to-nearest-even to bf16",
    npu2_mean_rel_L1="not measured", target_tiles=4, index=NO_PAGE, details=NO_PAGE, tolerance_label="bf16",
)
registry_rows = NO_PAGE
