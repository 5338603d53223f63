"""The kernel registry: one module per leaf kernel (`npu_kernels/numerics/kernels/<name>.py`, the pieces of a `KernelDef`
under their names, see `npu_kernels.numerics.kernels.base`), collected here. The catalog, the thresholds, the executors, the tile
planner, the harness inputs and table, the twin, the cost model and the registry importer ask this module for
the kernels it holds; none of them lists a registered kernel's name.

Adding a kernel (the whole checklist; tests/unit/test_kernel_registry.py names the kernel and any piece it lacks):
  1. write npu_kernels/numerics/kernels/<name>.py, citing mlir-air file:line@commit beside each piece: NAME, SPEC
     (shape keys, contracts, FP32 reference, inputs, executor call, flops/bytes, output size, NPU2 figures, registry
     and small shapes), TOLERANCES + TOLERANCE_SOURCE, fp32 / emulated / torch, tile_rules, tile_default,
     harness_case, HARNESS (the harness-table entry), TWIN (Makefile variables and flags, the script's flags and
     checks; its `script`, `timing` and `profile` where mlir-air's has them), cost_features + CONSTANTS + EVIDENCE
     (fit them: npu_kernels.perf.fit on anchors.toml rows), REGISTRY_PAGE + registry_rows (a page at e972f29: a
     `CatalogPage`, its columns and cells; a later page: the importer's schema as a dict); DMAS_PER_TILE,
     LISTED_AFTER, tile_note, herd_of (a tile whose herd is not herd_x/herd_y), tile_warnings, THROUGHPUT ("gflops")
     and dense_flops where they apply (base.py says what each is);
     a piece the kernel genuinely lacks (no mlir-air harness, no upstream page, no row to fit) as `Absent("why")`
     (base.Absent: every room passes it by; left out, None or without a reason, the test names it missing);
  2. add its name to `MODULES` below (the one registration line);
  3. run tests/unit/test_kernel_registry.py and tests/unit/test_layout.py (a kernel module imports only the
     numerics below the registry: spec, bf16, references, harness_case, tile_common, thresholds; the executors'
     datapath library, npu_kernels.numerics.executors.emulated_elementwise, only inside its `emulated`, at call
     time).
A model that uses it (plan rows, dispatch launches, pipeline stages) calls it by name; nothing else spells it.
"""

from __future__ import annotations

import importlib
from dataclasses import fields
from typing import Any, Callable

from npu_kernels.thresholds import KERNEL_TOLERANCES
from npu_kernels.numerics.kernels.base import (  # noqa: F401 (its API)
    Absent, CatalogPage, KernelDef, TwinStandIn, catalog_pages, from_module, harness_entries, missing_pieces, twin_kinds)

MODULES = ("gemm", "eltwise_add", "eltwise_mul", "conv1d", "silu_mul", "gelu", "rope", "layernorm", "rmsnorm", "gemv",
           "dequant_q4nx", "gemv_q4nx", "flash_attention")

DEFINITIONS: dict[str, KernelDef] = {}
for _module in MODULES:
    _d = from_module(importlib.import_module(f"npu_kernels.numerics.kernels.{_module}"))
    DEFINITIONS[_d.name] = _d


def definitions() -> tuple[KernelDef, ...]:
    """Every registered kernel, in registration order."""
    return tuple(DEFINITIONS.values())


def get(name: str) -> KernelDef | None:
    """The registered kernel `name`, or None (no such kernel)."""
    return DEFINITIONS.get(name)


_DEFAULTS = {f.name: f.default for f in fields(KernelDef)}


def piece(kernel: str, name: str) -> Any:
    """The optional piece `name` of any kernel: the registered kernel's own, else KernelDef's default (no kernel)."""
    d = get(kernel)
    return getattr(d, name) if d is not None else _DEFAULTS[name]


def stand_ins() -> dict[str, tuple[str, TwinStandIn]]:
    """The twin's stand-ins: harness kind -> (kernel, stand-in), each registered kernel's, in registration order."""
    out: dict[str, tuple[str, TwinStandIn]] = {}
    for d in definitions():
        out.update((kind, (d.name, t)) for kind, t in twin_kinds(d.name, d.twin))
    return out


def harnesses() -> dict[str, dict[str, Any]]:
    """The harness-table entries the kernels declare: table key -> entry, each registered kernel's, in registration
    order."""
    out: dict[str, dict[str, Any]] = {}
    for d in definitions():
        out.update(harness_entries(d.name, d.harness))
    return out


def stand_in_kinds_in_listing_order() -> list[str]:
    """Every stand-in's kind, in the catalog's listing order (a kernel's several kinds together, in their order)."""
    listed = in_listing_order({}, lambda d: tuple(kind for kind, _ in twin_kinds(d.name, d.twin)))
    return [kind for kinds in listed.values() for kind in kinds]


def tolerances() -> dict[tuple[str, str], tuple[float, float]]:
    """Every kernel's (kernel, contract) -> (rtol, atol): npu_kernels.thresholds' table of the kernels declared
    outside the registry (none now), then each registered kernel's own (declared in its module, with its source)."""
    return {**KERNEL_TOLERANCES, **{(d.name, c): tol for d in definitions() for c, tol in d.tolerances.items()}}


def kernel_tolerance(kernel: str, contract: str) -> tuple[float, float]:
    """(rtol, atol) of any kernel's contract (npu_kernels.thresholds.kernel_tolerance, which knows no registered
    kernel, plus the registry's); KeyError names the contracts the kernel has."""
    table = tolerances()
    try:
        return table[(kernel, contract)]
    except KeyError:
        known = sorted(c for k, c in table if k == kernel)
        raise KeyError(f"no tolerance for {kernel} {contract!r}; its contracts: {known or 'none'}") from None


def in_listing_order(base: dict, pick: Callable[[KernelDef], Any],
                     after: Callable[[KernelDef], str | None] = lambda d: d.listed_after) -> dict:
    """`base` (name -> value) with `pick(definition)` of each registered kernel inserted after its `listed_after`
    kernel (`after`: another listing's, e.g. the registry pages') - at the end when that is absent; `base`'s own
    entries are kept."""
    out = dict(base)
    pending = [d for d in definitions() if d.name not in out]
    while pending:
        placed = False
        for d in list(pending):
            prev = after(d)
            if prev is None or prev in out or prev not in {p.name for p in pending}:
                items = list(out.items())
                at = next((i + 1 for i, (k, _) in enumerate(items) if k == prev), len(items))
                out = dict(items[:at] + [(d.name, pick(d))] + items[at:])
                pending.remove(d)
                placed = True
        if not placed:  # a cycle of listed_after: append the rest in registration order
            out.update((d.name, pick(d)) for d in pending)
            pending = []
    return out
