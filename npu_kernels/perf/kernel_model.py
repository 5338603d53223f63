"""Leaf-kernel cost model of NPU2: latency from the kernel's mechanics, linear in a few fitted constants.

`kernel_features(kernel, shape, tile) -> {constant name: amount}` counts, for one launch of a leaf kernel
at a shape and tile/herd, the physical quantities its time is made of: one per-launch floor, MACs per
compute tile (split by MMA implementation), inner kernel calls, output blocks and L2 chunks per tile,
shim/DDR bytes, bytes and rows (or chunks) each tile streams, flash-attention chunk iterations. The
latency is `sum(amount * constant)` with the constants of `npu_kernels.perf.constants` (each a time per unit:
seconds per launch, per MAC, per byte, ...). Because the model is linear in its constants they are fitted
by non-negative least squares on relative error (`npu_kernels.perf.fit`) - no constant can go negative, and
each keeps its physical reading.

`kernel_latency_s(kernel, shape, tile=None)` fills a missing or partial tile with the tile planner's
recommendation (`npu_kernels.numerics.tiles.default_tile`), so the figure is the one the deployment would see.
`modelled_kernel_figures(kernel, shape, tile)` gives a registry-style row: latency_us and GFLOP/s (GEMM,
GEMV, flash attention) or GB/s (the memory-bound kernels), flagged `"modelled": True`.

Pure and deterministic: same inputs, same figures.
"""

from __future__ import annotations

from typing import Any, Mapping

from npu_kernels.numerics.kernels import definitions as kernel_definitions
from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.perf.constants import DERIVED, FITTED
from npu_kernels.numerics.tiles import default_tile

# The kernels of the registry (npu_kernels.numerics.kernels) each declare their features (`cost_features`) and constants
# in their module; the constants are fitted with every other on anchors.toml (npu_kernels.perf.fit).
KERNELS = tuple(d.name for d in kernel_definitions())


def full_tile(kernel: str, shape: Mapping[str, Any], tile: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The tile planner's recommended tile for (kernel, shape) on NPU2, overridden by the keys of `tile`."""
    t = dict(default_tile(kernel, dict(shape), "npu2"))
    t.update(tile or {})
    d = kernel_definition(kernel)
    resolve = d.resolve_tile if d is not None else None  # a symbolic value made concrete (GEMM's method auto)
    return resolve(get_spec(kernel).normalize_shape(dict(shape)), t) if resolve is not None else t


def kernel_features(kernel: str, shape: Mapping[str, Any], tile: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The physical amounts one launch of `kernel` at `shape`/`tile` consists of, keyed by constant name."""
    if kernel not in KERNELS:
        raise ValueError(f"no cost model for kernel {kernel!r}; modelled: {', '.join(KERNELS)}")
    s = get_spec(kernel).normalize_shape(dict(shape))
    t = full_tile(kernel, s, tile)
    return kernel_definition(kernel).cost_features(s, t)


def latency_from(features: Mapping[str, float], constants: Mapping[str, float]) -> float:
    """sum(amount * constant); a feature without a constant is an error, never silently free."""
    missing = [k for k in features if k not in constants]
    if missing:
        raise KeyError(f"no fitted constant for {', '.join(missing)}")
    return float(sum(v * constants[k] for k, v in features.items()))


def kernel_latency_s(kernel: str, shape: Mapping[str, Any], tile: Mapping[str, Any] | None = None,
                     constants: Mapping[str, float] | None = None) -> float:
    """Modelled NPU2 latency (seconds) of one launch of `kernel` at `shape` with `tile` (planner default)."""
    if constants is None:
        constants = {**FITTED, **DERIVED}
    return latency_from(kernel_features(kernel, shape, tile), constants)


def modelled_kernel_figures(kernel: str, shape: Mapping[str, Any], tile: Mapping[str, Any] | None = None) -> dict:
    """A registry-style row of modelled figures: latency_us plus gflops (matmul-like kernels) or gbps."""
    s = get_spec(kernel).normalize_shape(dict(shape))
    lat = kernel_latency_s(kernel, s, tile)
    out: dict[str, Any] = {"latency_us": round(lat * 1e6, 3), "modelled": True}
    registered = kernel_definition(kernel)
    if registered.throughput == "gflops":
        # over the spec's FLOPs, or a kernel's `dense_flops` where it counts the masked work too (flash attention)
        count = registered.dense_flops if registered.dense_flops else get_spec(kernel).flops
        out["gflops"] = round(count(s) / lat / 1e9, 3)
    else:
        out["gbps"] = round(get_spec(kernel).bytes(s) / lat / 1e9, 3)
    return out
