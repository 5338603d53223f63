"""The tile rules: every hard constraint a (kernel, shape, tile, target) must meet, and the array limits.

`check_tile(kernel, shape, tile, target) -> [(rule, message)]` lists every rule a tile breaks, in rule order;
`kernel_rules(kernel, target)` the rules themselves (name, predicate, message); `TileRuleViolation` is what
the planner raises with the first broken rule's name. The limits are defined here once (the planner, the
triage predicates and the cost model import them):

Rules (NUMERICS "Hard constraints", plus the compile-time limits mlir-air's registry documents):
  gemm   N % (tile_n*herd_n) == 0 (silent corruption, checked first), M % (tile_m*herd_m) == 0,
         K % tile_k_l2 == 0, tile_k_l2 % tile_k_l1 == 0, tile_k_l2*N <= 1,048,576 (B-tile DMA stride),
         drain tile_m <= 32 (L1), tile_m and tile_n multiples of 16 and tile_k_l1 of 8 (mm.cc mmul),
         herd within the array.
  the kernels of the registry (npu_kernels.numerics.kernels: gemv, rmsnorm, layernorm, rope, eltwise_add, silu_mul, gelu, eltwise_mul, conv1d,
  flash_attention, ...): their modules' `tile_rules` (and, where the tile does not name its herd herd_x / herd_y,
  its `herd_of`).

Imports: npu_kernels.numerics.catalog (shape normalisation) and the kernel registry.
"""

from __future__ import annotations

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.tile_common import (  # noqa: F401 (re-exported: the planner's names)
    ARRAYS,
    BD_REPEAT_LIMIT,
    GEMV_L1_BYTES,
    GEMV_L2_BYTES,
    Rule,
    array_columns,
    array_rows,
)

GEMM_B_STRIDE_LIMIT = 1_048_576
GEMM_METHODS = ("auto", "fused-cast", "drain", "direct")  # direct: the bf16-out-low tier's codegen
# Bounds this planner keeps for shapes nobody measured, which measured rows have passed beyond: the B-tile
# stride tile_k_l2*N <= 1,048,576 is the aie.dma_bd range the registry hit at N=9728 / 11008 / 18944
# (details/GEMM_bf16_in_bf16_out.json notes), yet 2048x2048x8192 at tile_k_l2 256 and 4096x4096x4096 at 512
# (stride 2,097,152) PASS there, and its 2048x2560x10240 note calls the bound "one step too conservative".
MEASURED_OVERRIDES = ("gemm.b_tile_dma_stride",)


class TileRuleViolation(ValueError):
    """Raised when a tile breaks a hard rule of its kernel; the message starts with the rule's name."""

    def __init__(self, rule: str, message: str, violations: list[tuple[str, str]] | None = None) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.violations = violations or [(rule, message)]



# --- GEMM ------------------------------------------------------------------------------------------------


def _gemm_rules(target: str) -> list[Rule]:
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
        ("gemm.method_known", lambda s, t: t.get("method", "auto") in GEMM_METHODS,
         lambda s, t: f"method {t.get('method')!r} is not one of {', '.join(GEMM_METHODS)}"),
    ]


def gemm_herd(t: dict) -> list[int]:
    return [t["herd_m"], t["herd_n"]]



# --- norms -----------------------------------------------------------------------------------------------------



# --- by kernel -------------------------------------------------------------------------------------------


def kernel_rules(kernel: str, target: str) -> list[Rule]:
    registered = kernel_definition(kernel)
    if registered is not None:
        return registered.tile_rules(target)
    if kernel == "gemm":
        return _gemm_rules(target)
    raise KeyError(kernel)


def herd_of(kernel: str, t: dict) -> list[int]:
    registered = kernel_definition(kernel)
    if registered is not None and registered.herd_of is not None:  # a registered kernel whose tile names its herd
        return registered.herd_of(t)
    if kernel == "gemm":
        return gemm_herd(t)
    return [t["herd_x"], t.get("herd_y", 1)]  # a one-row herd (a norm) has no herd_y



def check_tile(kernel: str, shape: dict, tile: dict, target: str = "npu2") -> list[tuple[str, str]]:
    """Every (rule, message) that `tile` breaks for (kernel, shape, target), in rule order."""
    s = get_spec(kernel).normalize_shape(shape)
    out = []
    for name, ok, msg in kernel_rules(kernel, target):
        try:
            good = ok(s, tile)
        except (KeyError, ZeroDivisionError, TypeError) as e:
            out.append((name, f"tile cannot be evaluated ({type(e).__name__}: {e})"))
            continue
        if not good:
            out.append((name, msg(s, tile)))
    return out

