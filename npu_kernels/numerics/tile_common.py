"""The tile planner's common ground: the array sizes (`ARRAYS`, `array_columns`, `array_rows`), the rule type
(`Rule`), and the streaming elementwise kernels' rules and default tiles (`elementwise_rules`, `elementwise_default`), which `npu_kernels.numerics.tile_rules` / `tile_defaults` and the kernel modules of
`npu_kernels.numerics.kernels` share. Imports nothing of the planner.
"""

from __future__ import annotations

from typing import Callable

ARRAYS = {"npu2": (8, 4), "npu1": (4, 4)}  # (columns, compute rows)
GEMV_L2_BYTES = 524_288  # a MemTile's L2 (the GEMV builder's capacity check)
GEMV_L1_BYTES = 65_536  # a compute tile's L1
BD_REPEAT_LIMIT = 255  # a buffer descriptor's repeat count
GEMM_B_STRIDE_LIMIT = 1_048_576  # the aie.dma_bd stride range GEMM's B tile (tile_k_l2*N) stays within

Rule = tuple[str, Callable[[dict, dict], bool], Callable[[dict, dict], str]]


def array_columns(target: str) -> int:
    return ARRAYS[target][0]


def array_rows(target: str) -> int:
    return ARRAYS[target][1]


def halvings(start: int, stop: int = 1) -> list[int]:
    """start, start/2, ... down to stop (a herd's or a tile's candidate sizes, largest first)."""
    out = []
    while start >= stop:
        out.append(start)
        start //= 2
    return out


def largest_divisor(n: int, cap: int) -> int:
    for d in range(min(cap, n), 0, -1):
        if n % d == 0:
            return d
    return 1


def rows_note(rows_key: str, rows: int, n: int, tiles_target: int) -> str | None:
    """Why a row-parallel kernel's herd is short: its rows do not split over the target tiles (None: they do)."""
    if rows < tiles_target or rows % tiles_target:
        return (f"{rows_key}={rows}: only {n} of {tiles_target} tiles get whole rows"
                + (" (no row parallelism at M=1, decode)" if rows == 1 else ""))
    return None


def norm_rules(kernel: str, target: str) -> list[Rule]:
    cols = array_columns(target)
    return [
        (f"{kernel}.M_divisible_by_herd_x", lambda s, t: s["M"] % t["herd_x"] == 0,
         lambda s, t: f"M={s['M']} rows do not split over herd_x={t['herd_x']}"),
        (f"{kernel}.N_divisible_by_vector_size", lambda s, t: s["N"] % 16 == 0,
         lambda s, t: f"N={s['N']} is not a multiple of the 16-lane bf16 vector"),
        (f"{kernel}.herd_fits_array", lambda s, t: 1 <= t["herd_x"] <= cols,
         lambda s, t: f"herd_x={t['herd_x']} exceeds the {cols} columns"),
    ]


def norm_default(s: dict, target: str) -> dict:
    """A row-parallel norm's herd: the largest divisor of M up to the array's columns."""
    return {"herd_x": largest_divisor(s["M"], array_columns(target))}


def norm_tile_note(s: dict, t: dict, herd: list[int], target: str, tiles_target: int) -> str | None:
    """Why a row-parallel norm's herd is short of the target tiles (tile_notes; None: no reason of its own)."""
    return rows_note("M", s["M"], herd[0] * herd[1], tiles_target)


def elementwise_rules(kernel: str, target: str, params: tuple) -> list[Rule]:
    """The rules of a streaming elementwise kernel; `params` (tile key, default tile, max herd_y, DMAs per tile) are
    the kernel module's own (`ELTWISE` in npu_kernels.numerics.kernels.<name>)."""
    key, _, max_y, dmas = params
    cols = array_columns(target)
    if dmas == 3:
        herd_rule = (f"{kernel}.herd_y_eq_1", lambda s, t: t["herd_y"] == 1,
                     lambda s, t: f"herd_y={t['herd_y']}: 3 DMAs per tile (2 in, 1 out) exhaust the shim channels "
                     "beyond one row")
    else:
        herd_rule = (f"{kernel}.tiles_le_16", lambda s, t: t["herd_x"] * t["herd_y"] <= 2 * cols,
                     lambda s, t: f"herd {t['herd_x']}x{t['herd_y']}: 2 DMAs per tile place at most "
                     f"{2 * cols} tiles (8x2), the full 8x4 does not")
    return [
        herd_rule,
        (f"{kernel}.N_divisible_by_tile_herd", lambda s, t: s["N"] % (t[key] * t["herd_x"] * t["herd_y"]) == 0,
         lambda s, t: f"N={s['N']} is not a multiple of {key}*herd_x*herd_y={t[key]}*{t['herd_x']}*{t['herd_y']}"),
        (f"{kernel}.tile_fits_l1", lambda s, t: t[key] <= 4096 and t[key] % 16 == 0,
         lambda s, t: f"{key}={t[key]} must be a multiple of 16 and <= 4096 (ping-ponged buffers in 64 KiB L1)"),
        (f"{kernel}.herd_fits_array", lambda s, t: 1 <= t["herd_x"] <= cols and 1 <= t["herd_y"] <= array_rows(target),
         lambda s, t: f"herd {t['herd_x']}x{t['herd_y']} does not fit the {cols}x{array_rows(target)} array"),
    ]


def elementwise_default(kernel: str, params: tuple):
    """The default-tile function of a streaming elementwise kernel; `params` as elementwise_rules'."""
    key, tile, hy, _ = params

    def default(s: dict, target: str) -> dict:
        cols = array_columns(target)
        herd_y = min(hy, array_rows(target))
        for t in (tile, tile // 2, tile // 4, tile // 8, 256, 128, 64, 32, 16):
            for hx in range(cols, 0, -1):
                for y in range(herd_y, 0, -1):
                    if s["N"] % (t * hx * y) == 0:
                        return {key: t, "herd_x": hx, "herd_y": y}
        return {key: 16, "herd_x": 1, "herd_y": 1}

    return default
