"""The planner's words: the notes a tile plan carries and the sentence saying why fewer tiles than the
target are in flight (a 3-DMA elementwise kernel cannot place a second herd row, decode RMSNorm at M=1 has
no row parallelism, an odd head count halves flash attention's columns, ...).

Imports: npu_kernels.thresholds, npu_kernels.numerics.tile_rules.
"""

from __future__ import annotations

from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.tile_rules import array_columns


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
    return f"{n} of {tiles_target} tiles placed for this shape"

