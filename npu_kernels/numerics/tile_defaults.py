"""The planner's heuristic: the recommended tile and herd for a (kernel, shape, target) when no measured row
says otherwise (docs/numerics.md's recommendations and the compile-time limits of npu_kernels.numerics.tile_rules).

`default_tile(kernel, shape, target)` is unchecked (npu_kernels.numerics.tiles.plan_tile checks it); each kernel's
heuristic is its module's `tile_default` (npu_kernels.numerics.kernels). Imports: npu_kernels.numerics.catalog.
"""

from __future__ import annotations

from npu_kernels.numerics.kernels import in_listing_order
from npu_kernels.numerics.catalog import get_spec

# the kernels of the registry (npu_kernels.numerics.kernels): each module's `tile_default`
DEFAULTS = in_listing_order({}, lambda d: d.tile_default)


def default_tile(kernel: str, shape: dict, target: str = "npu2") -> dict:
    """The planner's recommended tile for (kernel, shape, target), unchecked (see plan_tile)."""
    t = DEFAULTS[kernel](get_spec(kernel).normalize_shape(shape), target)
    return t
