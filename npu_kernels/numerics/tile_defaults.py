"""The planner's heuristic: the recommended tile and herd for a (kernel, shape, target) when no measured row
says otherwise (docs/numerics.md's recommendations and the compile-time limits of npu_kernels.numerics.tile_rules).

`default_tile(kernel, shape, target)` is unchecked (npu_kernels.numerics.tiles.plan_tile checks it);
`gemm_method`, `gemm_tile_n`, `gemm_tile_k_l2` are its GEMM pieces (the cost model and the emulated executor
use them). Imports: npu_kernels.numerics.catalog, npu_kernels.numerics.tile_rules.
"""

from __future__ import annotations

from npu_kernels.numerics.kernels import in_listing_order
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.tile_rules import (
    GEMM_B_STRIDE_LIMIT,
    array_columns,
    array_rows,
)

FUSED_CAST_MIN_MKN = 4e9  # M*K*N at and above which `auto` picks fused-cast (mlir-air's GEMM harness rule)


# --- GEMM ------------------------------------------------------------------------------------------------


def gemm_method(s: dict) -> str:
    return "fused-cast" if s["M"] * s["K"] * s["N"] >= FUSED_CAST_MIN_MKN else "drain"


def gemm_tile_n(N: int, herd_n: int = 4) -> int:
    """tile_n for N: 128, halved (64, 32) while herd_n*tile_n does not divide N; then the largest multiple
    of 16 up to 128 that does (registry: N=896 -> 32, N=960 -> 80, N=256 -> 64, N=8960 -> 64)."""
    for t in (128, 64, 32):
        if N % (t * herd_n) == 0:
            return t
    for t in range(128, 15, -16):
        if N % (t * herd_n) == 0:
            return t
    return 16


def gemm_tile_k_l2(K: int, N: int, tile_k_l1: int = 32) -> int:
    """tile_k_l2 for (K, N): 256, else 512, else the largest multiple of 64 (<= 512) dividing K, else the
    largest multiple of tile_k_l1 - always keeping the B-tile DMA stride tile_k_l2*N within 1,048,576.
    Multiples of 64 first: mlir-air's registry measured silent corruption at tile_k_l2 160, 288 and 480
    (K = 960, 1440, 320) while 64, 192, 320 and 960 were clean."""
    ok = lambda t: t > 0 and K % t == 0 and t * N <= GEMM_B_STRIDE_LIMIT  # noqa: E731
    for t in (256, 512):
        if ok(t):
            return t
    for step in (64, tile_k_l1):
        for t in range(min(512, K) // step * step, 0, -step):
            if ok(t):
                return t
    return tile_k_l1


def _gemm_default(s: dict, target: str) -> dict:
    """The recommended GEMM tile: the fullest herd (8x4 on NPU2) whose tiles divide M and N, tile_m 64
    (fused-cast) / 32 (drain) shrinking to 16, tile_n per `gemm_tile_n`, tile_k_l2 per `gemm_tile_k_l2`."""
    cols, rows = array_columns(target), array_rows(target)
    M, N = s["M"], s["N"]
    method = gemm_method(s)
    best = None
    for herd_n in halvings(rows):
        tile_n = gemm_tile_n(N, herd_n)
        if N % (tile_n * herd_n):
            continue
        for herd_m in halvings(cols):
            for tile_m in halvings(64 if method == "fused-cast" else 32, stop=16):
                if M % (tile_m * herd_m) == 0:
                    key = (herd_m * herd_n, tile_m, tile_n)
                    if best is None or key > best[0]:
                        best = (key, tile_m, tile_n, herd_m, herd_n)
                    break
    if best is None:  # nothing legal (tiny or ragged M/N): the full-array tile, reported as illegal
        best = (None, 64 if method == "fused-cast" else 32, gemm_tile_n(N, rows), cols, rows)
    _, tile_m, tile_n, herd_m, herd_n = best
    return {
        "tile_m": tile_m,
        "tile_k_l2": gemm_tile_k_l2(s["K"], N),
        "tile_k_l1": 32,
        "tile_n": tile_n,
        "herd_m": herd_m,
        "herd_n": herd_n,
        "method": method,
    }


def halvings(start: int, stop: int = 1) -> list[int]:
    out = []
    while start >= stop:
        out.append(start)
        start //= 2
    return out



# --- norms -----------------------------------------------------------------------------------------------------






# --- 4-bit (Q4NX) kernels -------------------------------------------------------------------------------





# --- by kernel -------------------------------------------------------------------------------------------


_PIECEWISE = {
    "gemm": _gemm_default,
}
# and the kernels of the registry (npu_kernels.numerics.kernels): each module's `tile_default`
DEFAULTS = in_listing_order(_PIECEWISE, lambda d: d.tile_default)



def default_tile(kernel: str, shape: dict, target: str = "npu2") -> dict:
    """The planner's recommended tile for (kernel, shape, target), unchecked (see plan_tile)."""
    t = DEFAULTS[kernel](get_spec(kernel).normalize_shape(shape), target)
    return t

