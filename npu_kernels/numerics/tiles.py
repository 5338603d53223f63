"""The tile planner: a legal tile and herd for a (kernel, shape, target), checked before anything runs.

`plan_tile(kernel, shape, target, tile=None, force=False) -> TilePlan` picks the recommended tile of
docs/numerics.md (or completes a user-supplied partial tile with it), then checks every hard rule. A broken
rule raises `TileRuleViolation` whose message starts with the rule's name, e.g.
`gemm.N_divisible_by_tile_n_herd_n: ...`; `force=True` (fault injection only) returns the plan with the
violations as warnings instead - the emulated executor then models what the hardware does with it. A
shape that admits no legal tile at all (a tiny test model, a ragged size) is not an error: the plan comes
back with `legal=False` and warnings naming the rules and saying the hardware needs the shape padded.

The plan records tiles in flight against the target (NPU2 8x4 = 32; NPU1 4x4 = 16) and, when below, a
sentence saying why (a 3-DMA elementwise kernel cannot place a second herd row, decode RMSNorm at M=1 has
no row parallelism, an odd head count halves flash attention's columns, ...).

The rules live in npu_kernels.numerics.tile_rules (one definition of every limit), the heuristic in
npu_kernels.numerics.tile_defaults, the notes and justifications in npu_kernels.numerics.tile_notes; this module
re-exports the names other modules import from it (`TileRuleViolation`, `check_tile`, `default_tile`, the
limits). A caller with a measured tile (the registry's best row) passes it as `tile`: it
is completed with the heuristic's keys and checked like any other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.tile_defaults import DEFAULTS, default_tile
from npu_kernels.numerics.tile_notes import justify
from npu_kernels.numerics.tile_rules import (
    ARRAYS,
    BD_REPEAT_LIMIT,
    GEMM_B_STRIDE_LIMIT,
    GEMV_L1_BYTES,
    GEMV_L2_BYTES,
    MEASURED_OVERRIDES,
    TileRuleViolation,
    check_tile,
    herd_of,
    kernel_rules,
)


@dataclass
class TilePlan:
    kernel: str
    tile: dict[str, Any]
    herd: list[int]
    tiles_in_flight: int
    tiles_target: int
    justification: str = ""
    warnings: list[str] = field(default_factory=list)
    legal: bool = True  # False: the tile breaks a hard rule (forced, or no legal tile exists for the shape)

    def to_json(self) -> dict:
        return asdict(self)


def _normalize_tile(kernel: str, tile: dict, default: dict) -> dict:
    unknown = set(tile) - set(default)
    if unknown:
        raise TileRuleViolation(
            f"{kernel}.tile_keys", f"unknown tile key(s) {', '.join(sorted(unknown))}; known: {', '.join(default)}"
        )
    out = dict(default)
    for k, v in tile.items():
        if isinstance(default[k], str):
            out[k] = str(v)
            continue
        try:
            out[k] = int(v)
        except (TypeError, ValueError):
            raise TileRuleViolation(f"{kernel}.tile_keys", f"{k}={v!r} is not an integer") from None
        if out[k] <= 0:
            raise TileRuleViolation(f"{kernel}.tile_keys", f"{k}={out[k]} must be positive")
    return out



def plan_tile(kernel: str, shape: dict, target: str = "npu2", tile: dict | None = None, *, force: bool = False,
              measured: bool = False) -> TilePlan:
    """The recommended (or the given, completed) tile for (kernel, shape, target), checked against every
    hard rule; see the module docstring. Raises TileRuleViolation (unless `force`). `measured`: the tile is a
    registry row that passed on NPU2, so the planner's conservative bounds for unmeasured shapes
    (tile_rules.MEASURED_OVERRIDES) give way to it, each said in a warning; every other rule still holds."""
    if target not in ARRAYS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(ARRAYS)}")
    spec = get_spec(kernel)
    s = spec.normalize_shape(shape)
    default = DEFAULTS[kernel](s, target)
    t = _normalize_tile(kernel, tile, default) if tile else default
    registered = kernel_definition(kernel)
    if registered.resolve_tile is not None:  # a symbolic value of the tile made concrete for the shape (auto)
        t = registered.resolve_tile(s, t)
    violations = check_tile(kernel, s, t, target)
    warnings: list[str] = []
    if measured:
        warnings += [f"measured on NPU2 beyond the planner's bound for unmeasured shapes ({rule}: {msg})"
                     for rule, msg in violations if rule in MEASURED_OVERRIDES]
        violations = [(rule, msg) for rule, msg in violations if rule not in MEASURED_OVERRIDES]
    if violations:
        if tile and not force:
            rule, msg = violations[0]
            raise TileRuleViolation(rule, msg, violations)
        if tile:
            warnings += [f"forced tile breaks {rule}: {msg}" for rule, msg in violations]
        else:  # the shape itself admits no legal tile: say so, the hardware needs it padded
            warnings += [f"no legal {target} tile for this shape ({rule}: {msg}); pad it for the hardware"
                         for rule, msg in violations]
    if registered.tile_warnings is not None:  # a registry kernel's own notes
        warnings += registered.tile_warnings(s, t, target)
    herd = herd_of(kernel, t)
    target_tiles = spec.target_tiles[target]
    return TilePlan(
        kernel=kernel,
        tile=t,
        herd=herd,
        tiles_in_flight=herd[0] * herd[1],
        tiles_target=target_tiles,
        justification=justify(kernel, s, t, herd, target, target_tiles),
        warnings=warnings,
        legal=not violations,
    )


__all__ = [
    "ARRAYS", "BD_REPEAT_LIMIT", "GEMM_B_STRIDE_LIMIT", "GEMV_L1_BYTES", "GEMV_L2_BYTES",
    "TilePlan", "TileRuleViolation", "check_tile", "default_tile", "kernel_rules", "plan_tile",
]
