"""The tile rules: every hard constraint a (kernel, shape, tile, target) must meet, and the array limits.

`check_tile(kernel, shape, tile, target) -> [(rule, message)]` lists every rule a tile breaks, in rule order;
`kernel_rules(kernel, target)` the rules themselves (name, predicate, message); `TileRuleViolation` is what
the planner raises with the first broken rule's name. The array limits are npu_kernels.numerics.tile_common's,
re-exported here (the planner, the triage predicates and the cost model import them).

Rules (NUMERICS "Hard constraints", plus the compile-time limits mlir-air's registry documents): each kernel of the
registry (npu_kernels.numerics.kernels: GEMM, GEMV, rmsnorm, layernorm, rope, eltwise_add, silu_mul, gelu, eltwise_mul,
conv1d, flash_attention, ...) declares its own in its module's `tile_rules` (and, where the tile does not name its herd
herd_x / herd_y, its `herd_of`).

Imports: npu_kernels.numerics.catalog (shape normalisation) and the kernel registry.
"""

from __future__ import annotations

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.kernels import definitions as kernel_definitions
from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.tile_common import (  # noqa: F401 (re-exported: the planner's names)
    ARRAYS,
    BD_REPEAT_LIMIT,
    GEMM_B_STRIDE_LIMIT,
    GEMV_L1_BYTES,
    GEMV_L2_BYTES,
    Rule,
    array_columns,
    array_rows,
)

# Bounds this planner keeps for shapes nobody measured, which measured rows have passed beyond: each kernel's module
# names its own (`measured_overrides`, with the rows that passed them)
MEASURED_OVERRIDES = tuple(rule for d in kernel_definitions() for rule in d.measured_overrides)


class TileRuleViolation(ValueError):
    """Raised when a tile breaks a hard rule of its kernel; the message starts with the rule's name."""

    def __init__(self, rule: str, message: str, violations: list[tuple[str, str]] | None = None) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.violations = violations or [(rule, message)]



# --- norms -----------------------------------------------------------------------------------------------------



# --- by kernel -------------------------------------------------------------------------------------------


def kernel_rules(kernel: str, target: str) -> list[Rule]:
    registered = kernel_definition(kernel)
    if registered is not None:
        return registered.tile_rules(target)
    raise KeyError(kernel)


def herd_of(kernel: str, t: dict) -> list[int]:
    registered = kernel_definition(kernel)
    if registered is not None and registered.herd_of is not None:  # a registered kernel whose tile names its herd
        return registered.herd_of(t)
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

