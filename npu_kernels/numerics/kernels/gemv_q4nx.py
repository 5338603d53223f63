"""4-bit GEMV (Q4NX, decode): y[M] = W[M, K] @ x[K], W = q * scale + min never built, bf16 out.

The projections of mlir-air's fused 4-bit decode (programming_examples/llms/llama32_1b_q4nx, fused_decode/kernels/
q4_k.h@54341c8, later than the contract's e972f29). Everything about the kernel, in one place (the pieces of
`npu_kernels.numerics.kernels.base.KernelDef`), and the pieces it genuinely lacks, each `Absent` with its reason:

  layout     gemv_q4nx(codes (M, K), scale (M, K/32), min (M, K/32), x (K,)) -> (M,); codes are the 4-bit values
             0..15 as float32, scale and min bf16, one per 32-column group; `static_key` names a resident weight.
  reference  FP32 W @ x with W = q * scale + min exact (proj_qmm_gate.py's `Y_exact`, @307c494), on its `make_case`
             draw: weights N(0, 0.02^2) quantised per 32-column group by the min/max rule, activations N(0, 1).
  tolerance  ours, derived, not fitted (mlir-air's proj_qmm_gate.py prints rms/bias vs exact FP32 and has no
             element bound): q4_k.h rounds each group's partial sum and each group sum of x to bf16, a random walk
             over K/32 groups; 6 sigma at K = 8192 (the widest decode GEMV, Llama-3.2-1B's Down) is 3.8e-2.
  emulated   q4_k.h:38-183@54341c8 (`_qmm_q4k_bf16`, the default unsigned-int4 path): per 32-column group an FP32
             q.x chain rounded to bf16, times scale, plus min * bf16(sum x) (npu_kernels.numerics.executors.emulated_q4).
  torch      dequantise q * scale + min in bf16 (each op rounded), then the bf16 GEMV.
  tile rules 32-row blocks split over herd_x columns (proj_qmm.cc: one 32x256 q4k block per call); the default
             spreads the blocks over up to every column of one row.
  cost       the codes + bf16 scale/min per 32 columns (0.625 B/weight) and the bf16 x in, y out, at the fused
             decode's calibrated stream rate (npu_kernels.perf.constants.DERIVED q4_s_per_byte); GFLOP/s figures.
  absent     mlir-air's harness (and so its table entry, its inputs and the twin's stand-in), the fitted constants
             and upstream's registry page: see HARNESS, harness_case, TWIN, CONSTANTS, REGISTRY_PAGE below.
"""

from __future__ import annotations

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.kernels.base import Absent, CatalogPage
from npu_kernels.numerics.references import Q4_GROUP, bf16_randn, q4nx_dequantised
from npu_kernels.numerics.spec import Contract, KernelSpec, ShapeError
from npu_kernels.numerics.tile_common import array_columns, array_rows, largest_divisor
from npu_kernels.thresholds import RTOL

NAME = "gemv_q4nx"
LISTED_AFTER = "dequant_q4nx"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
TOLERANCES = {"bf16-out": (RTOL, 4e-2)}
TOLERANCE_SOURCE = (
    "ours, derived, not fitted: mlir-air's proj_qmm_gate.py (@307c494) prints rms/bias vs exact FP32 and has no "
    "element bound. q4_k.h rounds each group's partial sum and each group sum of x to bf16 (relative error uniform "
    "in +-2^-9), a random walk over K/32 groups of terms |bf16(t) * scale| and |min * sum x| (~0.26 and ~0.23 rms at "
    "the harness's inputs): sigma ~ 2^-9/sqrt(3) * sqrt(K/32 * 0.12) = 6.3e-3 at K = 8192 (the widest decode GEMV, "
    "Llama-3.2-1B's Down); 6 sigma = 3.8e-2, atol 4e-2 with RTOL")
THROUGHPUT = "gflops"  # the cost model's figure: GFLOP/s (2*M*K over the latency)
ROW_BLOCK, COL_BLOCK = 32, 256  # proj_qmm.cc Q4NX_ROW_BLOCK_SIZE / Q4NX_COL_BLOCK_SIZE: one q4k block


# --- FP32 reference, inputs, executor call ----------------------------------------------------------------


def check_shape(s):
    """One q4k block is 32 rows x 256 columns (proj_qmm.cc Q4NX_ROW_BLOCK_SIZE / Q4NX_COL_BLOCK_SIZE)."""
    if s["M"] % ROW_BLOCK or s["K"] % COL_BLOCK:
        raise ShapeError(f"M={s['M']} must be a multiple of 32 and K={s['K']} of 256 (the 32x256 q4k block)")


def make_inputs(s, rng):
    """proj_qmm_gate.py `make_case` (@307c494): weights N(0, 0.02^2) quantised per 32-column group by the
    min/max rule (scale = (max - min) / 15, q = round((w - min) / scale) clipped to 0..15), activations N(0, 1)
    in bf16; scale and min as the bf16 the packed block holds."""
    M, K = s["M"], s["K"]
    w = (rng.standard_normal((M, K // Q4_GROUP, Q4_GROUP)) * 0.02).astype(np.float32)  # (rows, groups, cols)
    mn = w.min(axis=2)
    span = w.max(axis=2) - mn
    scale = np.where(span <= 0, np.float32(1.0), span / np.float32(15.0)).astype(np.float32)
    q = np.clip(np.round((w - mn[..., None]) / scale[..., None]), 0, 15).reshape(M, K).astype(np.float32)
    return {"codes": q, "scale": to_bf16(scale), "min": to_bf16(mn), "x": bf16_randn(rng, (K,))}


def reference(i, s):
    return np.matmul(q4nx_dequantised(i), i["x"], dtype=np.float32)  # proj_qmm_gate.py's `Y_exact`


def call(ex, i, s, contract, tile):
    return ex.gemv_q4nx(i["codes"], i["scale"], i["min"], i["x"])


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("M", "K"),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16",
                                    "4-bit GEMV: per-group FP32 q.x rounded to bf16, times scale, + min*bf16(sum x)")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 2.0 * s["M"] * s["K"],
    bytes_fn=lambda s: s["M"] * s["K"] * (0.5 + 4.0 / 32) + 2.0 * (s["K"] + s["M"]),
    output_elements_fn=lambda s: s["M"],
    npu2={},  # mlir-air's registry has no NPU2 figure for it: every report says "not measured"
    registry_shape={"M": 2048, "K": 2048},
    small_shape={"M": 256, "K": 512},
    target_tiles={"npu2": 8, "npu1": 4},
    extra={"check_shape": check_shape},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, codes, scale, mn, x, *, static_key=None):
    return ex.dequant_q4nx(codes, scale, mn) @ np.asarray(x, np.float32)


def emulated(ex, codes, scale, mn, x, *, static_key=None):
    """q4_k.h's per-group chain; the codes regrouped once per `static_key` (the same numbers)."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_q4 import gemv_q4nx, group_columns

    with ex.timer.time(NAME):
        return gemv_q4nx(codes, scale, mn, x, ex._static("gemv_q4nx.codes", codes, static_key, group_columns))


def torch(ex, codes, scale, mn, x, *, static_key=None):
    import torch as _torch

    with ex.timer.time(NAME), _torch.inference_mode():
        return ex._np(ex._dequant(codes, scale, mn) @ ex._t(x))


# --- tile rules and default -------------------------------------------------------------------------------


def tile_rules(target: str) -> list:
    """32-row blocks split over herd_x columns (proj_qmm.cc: one 32x256 q4k block per call)."""
    cols, rows = array_columns(target), array_rows(target)
    return [
        ("gemv_q4nx.M_divisible_by_row_blocks", lambda s, t: s["M"] % (32 * t["herd_x"] * t["herd_y"]) == 0,
         lambda s, t: f"M={s['M']} is not a multiple of 32*herd_x*herd_y=32*{t['herd_x']}*{t['herd_y']}"),
        ("gemv_q4nx.herd_fits_array", lambda s, t: 1 <= t["herd_x"] <= cols and 1 <= t["herd_y"] <= rows,
         lambda s, t: f"herd {t['herd_x']}x{t['herd_y']} does not fit the {cols}x{rows} array"),
    ]


def tile_default(s: dict, target: str) -> dict:
    """32-row q4k blocks over up to every column of the array (one row of cores)."""
    return {"herd_x": largest_divisor(max(s["M"] // 32, 1), array_columns(target)), "herd_y": 1}


# --- mlir-air's harness: none (so no inputs of its, no table entry, no stand-in) ----------------------------

NO_HARNESS = Absent(
    "mlir-air has no standalone [precision] harness for the 4-bit GEMV: fused_decode/proj_qmm_gate.py@307c494 "
    "compares the batched projection with the GEMV as rms and prints GATE PASS/FAIL, and check_proj_qmm_pack.py "
    "is host-only; it is verified in process only")
HARNESS = NO_HARNESS
harness_case = NO_HARNESS
TWIN = NO_HARNESS


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    """The codes + bf16 scale/min per 32 columns (0.625 B/weight) and the bf16 x in, y out, at the 4-bit stream rate."""
    M, K = s["M"], s["K"]
    return {"launch_s": 1.0, "q4_s_per_byte": M * K * (0.5 + 4.0 / 32) + 2.0 * (K + M)}


NO_FIT = Absent("no registry rows to fit: its one constant is npu_kernels.perf.constants.DERIVED's q4_s_per_byte, "
                "the fused 4-bit decode's effective DDR stream rate calibrated on llama32_1b_q4nx/README.md@137ff7c "
                "(npu_kernels.perf.q4nx.calibration), shared with dequant_q4nx")
CONSTANTS = NO_FIT
EVIDENCE = NO_FIT


# --- its registry page: npu-ledger's own (the upstream kernel_registry has none) ----------------------------

NO_PAGE = Absent("mlir-air's kernel_registry has no page for the 4-bit kernels (the fused decode's q4_k.h@54341c8 is "
                 "llama32_1b_q4nx's): the projection writes npu-ledger's own page, and no upstream row is read")
REGISTRY_PAGE = CatalogPage(
    title="GEMV (Q4NX 4-bit weights, BF16)", page="GEMV_Q4NX_bf16", columns=("M", "K"), aliases={"m": "M", "k": "K"},
    spellings=("gemvq4nx", "q4nxgemv"), math="y[M] = W[M,K] @ x[K], W = q * scale + min never built (decode)",
    datapath="per 32-column group FP32 q.x rounded to bf16 times scale, plus min * bf16(sum x); bf16 out",
    npu2_mean_rel_L1="not measured", target_tiles=8, index=NO_PAGE, details=NO_PAGE, unit="GFLOP/s",
    tolerance_label="bf16",
)
registry_rows = NO_PAGE
