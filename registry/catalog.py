"""The kernel catalog the registry projections are laid out by.

One `CatalogEntry` per registry page, in the order the index lists them. GEMM has two pages (bf16 out and
f32 out, mlir-air's split); every other kernel has one. A spec names the page file, the shape columns in
their natural order (with the spellings other components may use for them), the throughput unit, and the
docs/numerics.md figures (datapath tier, rtol/atol per contract, NPU2-measured mean_rel_L1, target tiles)
that a detail page falls back to when no event has recorded its own tolerances yet.

Kernel names and shape keys arriving in events are normalised here (`canonical_kernel`, `shape_key`) so
that `GEMM` from an imported upstream file and `gemm` from an executor land on the same rows. A kernel
the catalog does not know gets a generic page named after it rather than being dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from npu_kernels.numerics.kernels import CatalogPage, KernelDef, catalog_pages, in_listing_order, kernel_tolerance
from npu_kernels.numerics.kernels import definitions as kernel_definitions

Shape = tuple[tuple[str, Any], ...]  # ((column, value), ...) in the page's column order


@dataclass(frozen=True)
class Tolerance:
    contract: str
    rtol: float
    atol: float


def _tol(kernel: str, contract: str, label: str | None = None) -> "Tolerance":
    """A page's fallback tolerance, from the one table every judge uses (`npu_kernels.thresholds`)."""
    return Tolerance(label or contract, *kernel_tolerance(kernel, contract))


@dataclass(frozen=True, eq=False)  # one object per page: identity equality, cheap hashing
class CatalogEntry:
    key: str  # page key: "gemm_bf16", "rmsnorm", ...
    kernel: str  # executor kernel name (`ledger kernel run <kernel>`)
    title: str
    page: str  # details/<page>.md (and .json for GEMM)
    columns: tuple[str, ...]
    aliases: dict[str, str] = field(default_factory=dict)
    unit: str = "GB/s"  # GFLOP/s (compute-bound) or GB/s (memory-bound, derived from latency)
    math: str = ""
    datapath: str = ""
    tolerances: tuple[Tolerance, ...] = ()
    npu2_mean_rel_L1: str = ""
    target_tiles: int | None = None
    default_contract: str = "bf16"
    output_dtype: str = ""  # a kernel with a page per output dtype (GEMM): the one this page holds


# the kernels of npu_kernels.numerics.kernels with a page at e972f29 (or npu-ledger's own, where upstream has none: the
# 4-bit kernels): each module's `registry_page` (a CatalogPage, or one per page where upstream splits the kernel, GEMM's
# two), by page key
PAGES: dict[str, CatalogPage] = {key: p for d in kernel_definitions() for key, p in catalog_pages(d.name, d.registry_page)}
KERNEL_OF: dict[str, str] = {key: d.name for d in kernel_definitions() for key, _ in catalog_pages(d.name, d.registry_page)}
# the kernel whose pages keep mlir-air's best-configuration JSON beside them (its `best_config`: GEMM's
# details/GEMM_bf16_in_{bf16,fp32}_out.json, which registry.importer and sweep_gemm.py's rows fill and registry.lookup
# answers from, as mlir-air's registry_lookup.gemm_config does)
BEST_CONFIG_KERNEL = next((d.name for d in kernel_definitions() if d.best_config), "")


def page_after(d: KernelDef) -> str | None:
    """The page a registered kernel's pages are listed after: its first page's own `listed_after`, else the kernel's."""
    p = next((p for _, p in catalog_pages(d.name, d.registry_page)), None)
    return (p.listed_after if p is not None else None) or d.listed_after


def after_in(keys) -> Any:
    """`page_after` among `keys` (a listing's page keys): a kernel named there with several pages (GEMM's two) stands
    for the last of its pages in that listing."""
    def after(d: KernelDef) -> str | None:
        prev = page_after(d)
        pages = [k for k in keys if KERNEL_OF.get(k, k) == prev]
        return pages[-1] if pages else prev

    return after


def _entries(d: KernelDef) -> tuple[CatalogEntry, ...]:
    """A registered kernel's pages (none: mlir-air added it after e972f29, the importer's generic page)."""
    return tuple(CatalogEntry(
        key=key, kernel=d.name, title=p.title, page=p.page, columns=p.columns, aliases=p.aliases, unit=p.unit,
        math=p.math, datapath=p.datapath, npu2_mean_rel_L1=p.npu2_mean_rel_L1, target_tiles=p.target_tiles,
        tolerances=tuple(_tol(d.name, c, label=p.tolerance_label) for c in (p.contracts or d.spec.contracts)),
        default_contract=p.default_contract, output_dtype=p.output_dtype,
    ) for key, p in catalog_pages(d.name, d.registry_page))


# every registered kernel's pages, in the index's listing order (a kernel's several pages together, in their order)
CATALOG: tuple[CatalogEntry, ...] = tuple(
    e for entries in in_listing_order({}, _entries, page_after).values() for e in entries)
_BY_KEY = {spec.key: spec for spec in CATALOG}

# normalised spelling -> executor kernel name
_KERNEL_ALIASES = {spelling: KERNEL_OF[key] for key, p in PAGES.items() for spelling in p.spellings}


@lru_cache(maxsize=1024)
def canonical_kernel(name: str) -> str:
    """The executor kernel name for any spelling (`GEMM`, `FlashAttention`, `SiLU_Mul` ...)."""
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    return _KERNEL_ALIASES.get(squashed, re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "kernel")


def gemm_output_dtype(contract: str) -> str:
    """'f32' when a GEMM contract names an FP32 output (`f32-out`, `bf16->f32`, `fp32_out`), else 'bf16'."""
    c = contract.lower().replace("fp32", "f32")
    return "f32" if ("f32-out" in c or "f32_out" in c or "->f32" in c or c == "f32") else "bf16"


# The GEMM methods mlir-air's lookup keys a row by, per (output dtype, tier) -- at e972f29: registry_lookup.py:51
# (f32 page: external / direct; bf16 page: fused-cast / drain / direct), details/GEMM_bf16_in_*_out.json's
# `methods.<name>.tier` (direct is the bf16 page's low tier, both f32 methods are high), and
# llms/shared/builders/gemm_builder.py:61-101, which builds a bf16-out high-precision `best` only as fused-cast or
# drain and raises on any other name. A row filed under another name would be a `best` no caller can build.
GEMM_LOOKUP_METHODS: dict[tuple[str, str], tuple[str, ...]] = {
    ("bf16", "high"): ("fused-cast", "drain"), ("bf16", "low"): ("direct",), ("f32", "high"): ("external", "direct"),
}


def gemm_lookup_methods(contract: str, tier: str = "") -> tuple[str, ...]:
    """The method names mlir-air's GEMM lookup knows for this contract (and tier); () for a pair it has no page for."""
    return GEMM_LOOKUP_METHODS.get((gemm_output_dtype(contract), contract_tier(contract, tier)), ())


def contract_tier(contract: str, tier: str = "") -> str:
    """The precision tier: the event's own `tier` when set, else 'low' if the contract says so, else 'high'."""
    if tier:
        return tier
    return "low" if "low" in contract.lower() else "high"


@lru_cache(maxsize=4096)
def spec_for(kernel: str, contract: str = "") -> CatalogEntry:
    """The page an event of this kernel (and, for GEMM, contract) belongs on; unknown kernels get a generic page."""
    name = canonical_kernel(kernel)
    pages = specs_for_kernel(name)
    if len(pages) > 1:  # a page per output dtype (GEMM's): the one the contract names
        dtype = gemm_output_dtype(contract)
        return next(spec for spec in pages if spec.output_dtype == dtype)
    for spec in CATALOG:
        if spec.kernel == name:
            return spec
    return CatalogEntry(key=name, kernel=name, title=name, page=f"{name}_bf16", columns=())


def spec_by_key(key: str) -> CatalogEntry | None:
    return _BY_KEY.get(key)


def specs_for_kernel(kernel: str) -> tuple[CatalogEntry, ...]:
    name = canonical_kernel(kernel)
    return tuple(spec for spec in CATALOG if spec.kernel == name)


def fallback_tolerance(kernel: str, contract: str) -> Tolerance | None:
    """docs/numerics.md rtol/atol for a kernel + contract (the GEMM tier read from the contract)."""
    spec = spec_for(kernel, contract)
    if not spec.tolerances:
        return None
    if spec.output_dtype and len(spec.tolerances) > 1:  # a page of several tiers (GEMM's bf16 out): the contract's
        wanted = contract_tier(contract)
        return next(t for t in spec.tolerances if contract_tier(t.contract) == wanted)
    return spec.tolerances[0]


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    return value


def shape_key(spec: CatalogEntry, shape: dict[str, Any]) -> Shape:
    """The shape as ((column, value), ...): known columns first in page order, then other keys sorted."""
    try:
        return _shape_key_cached(spec.key, spec, tuple(shape.items()))
    except TypeError:  # an unhashable value (a list): normalise without the cache
        return _shape_key(spec, shape)


@lru_cache(maxsize=65536)
def _shape_key_cached(_key: str, spec: CatalogEntry, items: tuple) -> Shape:
    return _shape_key(spec, dict(items))


def _shape_key(spec: CatalogEntry, shape: dict[str, Any]) -> Shape:
    named: dict[str, Any] = {}
    for raw, value in shape.items():
        col = raw if raw in spec.columns else spec.aliases.get(raw, spec.aliases.get(raw.lower(), raw))
        if col not in spec.columns and raw.lower() in spec.columns:
            col = raw.lower()
        named[col] = _hashable(value)
    known = [(c, named[c]) for c in spec.columns if c in named]
    extra = sorted((c, v) for c, v in named.items() if c not in spec.columns)
    return tuple(known + extra)


_BYTES_PER_ELEMENT = 2  # bf16


def throughput(spec: CatalogEntry, shape: Shape, gflops: float | None, latency_us: float | None) -> float | None:
    """Throughput in the page's unit: recorded GFLOP/s (else 2MKN or 2MK over latency for GEMM/GEMV), or GB/s
    for memory-bound kernels from latency and the bytes moved (inputs + output, bf16)."""
    if spec.unit == "GFLOP/s":
        if gflops is not None:
            return float(gflops)
        if not latency_us or latency_us <= 0:
            return None
        s = dict(shape)
        try:
            page = PAGES.get(spec.key)  # a page's `flops`: what one launch does
            flops = page.flops(s) if page is not None and page.flops is not None else None
        except (KeyError, TypeError):
            flops = None
        return None if flops is None else flops / (latency_us * 1e3)
    if not latency_us or latency_us <= 0:
        return None
    moved = bytes_moved(spec, shape)
    return None if moved is None else moved / (latency_us * 1e3)


def bytes_moved(spec: CatalogEntry, shape: Shape) -> int | None:
    page = PAGES.get(spec.key)  # a page's `elements`: the bf16 elements one launch moves
    if page is None or page.elements is None:
        return None
    try:
        return int(page.elements(dict(shape))) * _BYTES_PER_ELEMENT
    except (KeyError, TypeError):
        return None
