"""The planner's words: the notes a tile plan carries and the sentence saying why fewer tiles than the
target are in flight (a 3-DMA elementwise kernel cannot place a second herd row, decode RMSNorm at M=1 has
no row parallelism, an odd head count halves flash attention's columns, ...).

Imports: npu_kernels.thresholds, npu_kernels.numerics.tile_rules.
"""

from __future__ import annotations

from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.tile_rules import GEMM_B_STRIDE_LIMIT, array_columns
from npu_kernels.thresholds import GEMM_HIGH_PRECISION_MIN_K


def gemm_notes(s: dict, t: dict, target: str) -> list[str]:
    notes = []
    if t["tile_n"] < 128 and s["N"] % (t["tile_n"] * t["herd_n"]) == 0:
        notes.append(f"N={s['N']} is not {128 * t['herd_n']}-aligned: tile_n {t['tile_n']} keeps "
                     f"herd_n*tile_n | N (tile_n 128 is ~1.3x faster where it fits)")
    if t["tile_k_l2"] < 256 and 256 * s["N"] > GEMM_B_STRIDE_LIMIT and s["K"] % 256 == 0:
        notes.append(f"tile_k_l2 {t['tile_k_l2']}, not 256: 256*N = {256 * s['N']:,} is past the B-tile DMA stride "
                     f"bound {GEMM_B_STRIDE_LIMIT:,} this planner keeps for unmeasured shapes (tile_k_l2*N = "
                     f"{t['tile_k_l2'] * s['N']:,} is within it); a measured registry row overrides the bound")
    if s["K"] < GEMM_HIGH_PRECISION_MIN_K:
        notes.append(f"K={s['K']} < {GEMM_HIGH_PRECISION_MIN_K}: outputs ~1/sqrt(K) are large enough that the high-precision atol "
                     "(1.5e-3, sized at K=8192) trips on a few near-zero-reference elements - NPU2 does the same "
                     "(registry: 1024x768x3072, 2048x896x4864); the plan runs such rows on bf16-out-low, as the registry does")
    if t["tile_k_l2"] % 64:
        notes.append(f"tile_k_l2 {t['tile_k_l2']} is not a multiple of 64: mlir-air's registry measured silent "
                     "corruption at such tilings (160, 288, 480) - check mean_rel_L1")
    return notes



def justify(kernel: str, s: dict, t: dict, herd: list[int], target: str, tiles_target: int) -> str:
    n = herd[0] * herd[1]
    if n >= tiles_target:
        return ""
    cols = array_columns(target)
    registered = kernel_definition(kernel)
    three_dmas = registered is not None and registered.dmas_per_tile == 3
    if three_dmas and herd[1] == 1 and herd[0] == cols:
        return f"3 DMAs per tile (2 in, 1 out): the shim channels place one row of {cols} tiles, not more"
    note = registered.tile_note(s, t, herd, target, tiles_target) if registered and registered.tile_note else None
    if note:
        return note
    if kernel == "gemm":
        return f"M={s['M']}: herd_m {t['herd_m']} (M < tile_m*{cols} or not a multiple of it)"
    return f"{n} of {tiles_target} tiles placed for this shape"

