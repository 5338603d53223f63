"""`KernelDef`: everything the project knows about one leaf kernel, declared in that kernel's own module.

A kernel module (`npu_kernels/numerics/kernels/<name>.py`) builds one `KernelDef` named `DEFINITION`; the registry
(`npu_kernels.numerics.kernels`) collects them, and every other room asks the registry, never a list of names:

  spec              the catalog entry (npu_kernels.numerics.spec.KernelSpec): shape keys, contracts, the FP32
                    reference, mlir-air's inputs, how an executor is called, flops/bytes, output size, figures
  tolerances        {contract: (rtol, atol)}, and `tolerance_source`: where mlir-air states them
  fp32 / emulated / torch
                    the executors' methods (`self` is the executor): the FP32 reference executor's, the emulated
                    NPU2 datapath's, the torch bf16 one's
  tile_rules        target -> [(rule name, predicate(shape, tile), message(shape, tile))], in check order
  tile_default      (normalised shape, target) -> the planner's recommended tile
  dmas_per_tile     shim DMAs each compute tile needs (3: a one-row herd is all that places; tile_notes says so)
  harness_case      (shape, contract, tile) -> HarnessCase: the mlir-air script's own inputs and reference
  harness           the harness-table entry (harnesses.toml's [harness.<name>] keys, as a dict); a kernel with a
                    command per contract, {table key: entry} (keys `<name>` and `<name>@<contract>`)
  twin              the twin's stand-in (TwinStandIn): mlir-air's Makefile variables and flags, the script's argparse
                    flags and checks, what it prints when it only compiles; a tuple of them, each naming its `kind`,
                    where mlir-air has several harness directories of the kernel
  cost_features     (normalised shape, full tile) -> {constant name: amount} of the NPU2 cost model
  constants         {constant name: fitted seconds per unit}, and `evidence`: {constant name: what fixes it}
  registry_page     the kernel's page in mlir-air's kernel_registry: a kernel mlir-air added after e972f29, the
                    importer's schema of it (a dict: page name, commit, tolerances, tables); a kernel with a page
                    at e972f29, its `CatalogPage` (the projection's catalog entry and upstream's table columns), or a
                    tuple of them, each naming its `key`, where upstream splits the kernel over several pages
                    (GEMM's per output dtype); a kernel upstream has no page of, its `CatalogPage` with
                    `index`/`details` Absent (npu-ledger's own)
  registry_rows     (table name, header, cells, heading, cell readers) -> [configuration rows] | None: one row
  listed_after      the kernel the catalog lists it after (keeps `ledger kernel list` and `make bench` in order)
  tile_note         (shape, tile, herd, target, target tiles) -> why the default herd is short of the target tiles
                    (tile_notes), or None
  herd_of           tile -> [columns, rows] of the herd it places, where the tile does not name them herd_x / herd_y
                    (gemv's herd_m columns; flash attention's head unroll x q tiles by its cascade stages)
  tile_warnings     (shape, tile, target) -> the notes a tile plan carries (npu_kernels.numerics.tiles), where any
  resolve_tile      (shape, tile) -> the tile with its symbolic values made concrete for the shape, as the harness
                    does before it runs (GEMM's `method: auto`); the planner and the cost model apply it
  measured_overrides
                    the names of its tile rules that are bounds the planner keeps for unmeasured shapes, which a
                    registry row measured on NPU2 beyond them overrides (npu_kernels.numerics.tiles, `measured`)
  throughput        the cost model's figure of a launch: "gbps" (spec.bytes over the latency, the memory-bound
                    kernels) or "gflops" (the FLOPs over it: spec.flops, or `dense_flops` where the kernel has one)
  dense_flops       shape -> the FLOPs of the whole computation, masked work included, where not the spec's `flops`
                    (a "gflops" kernel only): what the modelled GFLOP/s divides by and a harness line may have
                    divided by (npu_kernels.perf.evidence)
  calls_with_tile   True: the executor runs at the planned tile (the in-process run and the twin hand the plan's
                    tile to its call; a kernel whose executor tiles itself gets none)
  fit_metric        what the cost model's leave-one-out error is taken on: "latency" (predicted over measured) or
                    "GFLOP/s" (measured over predicted, the figure a compute-bound kernel's registry quotes)
  best_config       True: the kernel's registry page keeps a best measured configuration per shape and tier (the JSON
                    mlir-air's registry_lookup reads; registry.lookup answers from it, `ledger registry lookup`
                    prints it), where the others' lookups answer with the ledger's rows
  method_tier       (shape, contract, tile) -> (method, tier) a run used, in the names mlir-air's registry files
                    its rows under (a kernel with several methods per contract; the others have none, no method)

`REQUIRED` names the pieces every kernel must declare; `missing_pieces` says which one a definition lacks. A piece a
kernel genuinely lacks (mlir-air has no harness for it, no registry row to fit a constant on) is declared as such:
`Absent("why")`, falsy, so every room that gathers the piece passes it by; a piece the module leaves out, or an
`Absent` without its reason, is missing.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any, Callable

from npu_kernels.numerics.spec import KernelSpec


@dataclass(frozen=True)
class Absent:
    """A piece a kernel genuinely lacks, named in its module with the reason (`HARNESS = Absent("mlir-air has no
    standalone harness for it: ...")`). Falsy: a room that gathers the piece (the harness table, the twin, the fit's
    constants, upstream's tables) passes the kernel by."""

    reason: str

    def __bool__(self) -> bool:
        return False


def absences(d: "KernelDef") -> dict[str, str]:
    """{piece: reason} of the pieces `d` declares absent."""
    return {f.name: getattr(d, f.name).reason for f in fields(d) if isinstance(getattr(d, f.name), Absent)}


@dataclass(frozen=True)
class TwinStandIn:
    """The twin's stand-in for a kernel's mlir-air harness directory (npu_kernels.mlir_air.twin)."""

    directory: str  # programming_examples/<directory>/
    variables: str  # the Makefile's variables with mlir-air's defaults
    flags: str  # the `run` recipe's flags
    extra_targets: str  # further Makefile targets (profile), or ""
    peano_only: bool  # BUILD_DIR is build_peano unconditionally (the Makefile has no chess branch)
    add_flags: Callable[[argparse.ArgumentParser], None]  # the script's argparse flags
    check: Callable[[argparse.Namespace], tuple]  # -> (kernel, shape, contract, tile, perf_flops, compile_only)
    compiled_line: str  # what the script prints after a compile-only run ("" when nothing)
    asserts_tile_rules: bool = False  # the script asserts the kernel's tile rules (an AssertionError naming the rule)
    profile: Callable | None = None  # (args of `profile KIND --S ...`, modelled figures) -> prints `make profile`'s timer
    script: str = ""  # the script the twin writes beside the Makefile, where the harness table runs it directly
    timing: Callable | None = None  # (args, modelled figures, shape, tile) -> True when the script only times (no check)
    makefile: bool = True  # False: no Makefile rule runs the script (the table runs `script` directly; no variables)
    parses_flags: bool = True  # False: the script has no argparse at all (not even the harness's -v / -p)
    kind: str = ""  # the harness kind (the twin script's first argument) where not the kernel's name: a kernel with
    # several stand-ins (one per mlir-air directory) names each


def catalog_pages(name: str, page: "CatalogPage | tuple[CatalogPage, ...] | dict | Absent | None"
                  ) -> tuple[tuple[str, "CatalogPage"], ...]:
    """(page key, page) of each e972f29 page a kernel's `registry_page` declares, in order: one `CatalogPage` (its
    key the kernel's name unless it names one) or a tuple of them; () for a later page (a dict) or none."""
    pages = page if isinstance(page, tuple) else (page,)
    return tuple((p.key or name, p) for p in pages if isinstance(p, CatalogPage))


def harness_entries(name: str, harness: "dict[str, Any] | Absent | None") -> dict[str, dict[str, Any]]:
    """{harness-table key: entry} of a kernel's `harness` piece: one entry (the keys of harnesses.toml's
    [harness.<name>], its `command` among them) under the kernel's name, or a dict of entries under their table keys
    (`<name>` and `<name>@<contract>`, a contract with its own command); {} when absent."""
    if not harness:
        return {}
    return {name: harness} if "command" in harness else dict(harness)


def twin_kinds(name: str, twin: "TwinStandIn | tuple[TwinStandIn, ...] | Absent | None") -> tuple[tuple[str, TwinStandIn], ...]:
    """(harness kind, stand-in) of each stand-in a kernel's `twin` piece declares, in order: one stand-in (its kind
    the kernel's name unless it names one) or a tuple of them (one per mlir-air directory); () when absent."""
    if not twin:
        return ()
    return tuple((t.kind or name, t) for t in (twin if isinstance(twin, tuple) else (twin,)))


def dsl_flags(p: argparse.ArgumentParser) -> None:
    """The flags the elementwise scripts written in mlir-air's DSL share (eltwise_add.py:117-186, gelu.py:167-213 at
    e972f29; eltwise_mul.py at 0b499c9), after each script's own shape and tile flags."""
    p.add_argument("--vector-size", dest="vector", type=int, default=None)
    p.add_argument("--herd-shape", type=int, nargs="+", default=None)
    p.add_argument("--target", choices=["auto", "npu1", "npu2"], default="auto")
    p.add_argument("--output-format", choices=["xclbin", "elf"], default="xclbin")
    p.add_argument("--perf-iters", type=int, default=0)
    p.add_argument("--print-ir", action="store_true")
    p.add_argument("--compile-only", action="store_true")


def norm_flags(p: argparse.ArgumentParser, m: int, n: int) -> None:
    """The flags the row-parallel norm scripts share (weighted_rms_norm.py:336-376, layer_norm.py:288-324 at
    e972f29), with each script's default M and N."""
    p.add_argument("--M", type=int, default=m)
    p.add_argument("--N", type=int, default=n)
    p.add_argument("--vector-size", type=int, default=16)
    p.add_argument("--herd-x", type=int, default=1)
    p.add_argument("--perf-iters", type=int, default=0)
    p.add_argument("--compile-mode", choices=["compile-only", "compile-and-run"], default="compile-and-run")
    p.add_argument("--output-format", choices=["xclbin", "elf"], default="xclbin")


def streaming_features(name: str, n: int, bytes_per_element: float, t: dict) -> dict[str, float]:
    """A streaming elementwise kernel's cost features: the bytes each of the herd's tiles moves, and the L1 chunks
    (DMA rounds) each tile runs; constants `<name>_s_per_byte_per_tile`, `<name>_s_per_unit`."""
    tiles = t.get("herd_x", 1) * t.get("herd_y", 1)
    chunk = t.get("tile", t.get("tile_n", 2048))
    return {"launch_s": 1.0, f"{name}_s_per_byte_per_tile": n * bytes_per_element / tiles,
            f"{name}_s_per_unit": float(int(math.ceil(n / (chunk * tiles))))}


@dataclass(frozen=True)
class CatalogPage:
    """A kernel's page of mlir-air's kernel_registry at e972f29 (supported_kernels.md's table and details/<page>.md):
    the projection's catalog entry (registry.catalog.CatalogEntry's fields) and upstream's columns
    (registry.mlir_air_tables: INDEX, DETAILS, PAGE_OF, NO_JSON and the cells of one row)."""

    title: str
    page: str  # details/<page>.md
    columns: tuple[str, ...]  # the shape columns, in page order
    aliases: dict[str, str]  # other spellings of a shape column
    spellings: tuple[str, ...]  # the kernel's other names, squashed (registry.catalog.canonical_kernel)
    math: str
    datapath: str
    npu2_mean_rel_L1: str
    target_tiles: int
    # supported_kernels.md's header and details/<page>.md's tables ((method or "", header) per table), or `Absent`:
    # upstream's kernel_registry has no page of the kernel (the projection's own page only; no cells then)
    index: tuple[str, ...] | Absent
    details: tuple[tuple[str, tuple[str, ...]], ...] | Absent
    index_cells: Callable | None = None  # (row, fmt) -> one index row's cells (fmt: registry.mlir_air_tables' formatters)
    details_cells: Callable | None = None  # (method, row, fmt) -> the cells of one details row, or None
    elements: Callable[[dict], int] | None = None  # bf16 elements one launch moves (GB/s pages), from the shape
    unit: str = "GB/s"
    tolerance_label: str | None = None  # the page's name of the contract ("bf16"), when not the contract's own
    no_json: bool = True  # upstream has no details/<page>.json
    default_contract: str = "bf16"
    listed_after: str | None = None  # the page the index lists it after, where not the kernel's `listed_after`
    flops: Callable[[dict], float] | None = None  # FLOP one launch does (GFLOP/s pages, from the shape)
    catalog_shape: Callable[[dict], dict] | None = None  # a row's page shape -> the catalog's, where they differ
    # a kernel with several pages (GEMM's one per output dtype): the page's key (registry.catalog.CatalogEntry.key,
    # the kernel's name otherwise), the contracts it files (all of the kernel's otherwise), the output dtype that
    # picks it, and the best-configuration JSON mlir-air's lookup reads beside it (details/<json>, a `best_config`
    # kernel's)
    key: str = ""
    contracts: tuple[str, ...] = ()
    output_dtype: str = ""
    json: str = ""


@dataclass(frozen=True)
class KernelDef:
    name: str
    spec: KernelSpec
    tolerances: dict[str, tuple[float, float]]
    tolerance_source: str
    fp32: Callable
    emulated: Callable
    torch: Callable
    tile_rules: Callable[[str], list]
    tile_default: Callable[[dict, str], dict]
    harness_case: Callable
    harness: dict[str, Any]
    twin: TwinStandIn | tuple[TwinStandIn, ...]
    cost_features: Callable[[Any, Any], dict[str, float]]
    constants: dict[str, float]
    evidence: dict[str, str]
    registry_page: dict[str, Any]
    registry_rows: Callable
    dmas_per_tile: int = 0
    listed_after: str | None = None
    tile_note: Callable[..., str | None] | None = None
    herd_of: Callable[[dict], list[int]] | None = None
    tile_warnings: Callable[[dict, dict, str], list[str]] | None = None
    resolve_tile: Callable[[dict, dict], dict] | None = None
    measured_overrides: tuple[str, ...] = ()
    throughput: str = "gbps"
    dense_flops: Callable[[dict], float] | None = None
    calls_with_tile: bool = False
    fit_metric: str = "latency"
    method_tier: Callable[[dict, str, dict], tuple[str, str]] | None = None
    best_config: bool = False


OPTIONAL = ("dmas_per_tile", "listed_after", "tile_note", "herd_of", "tile_warnings", "resolve_tile", "measured_overrides",
            "throughput", "dense_flops", "calls_with_tile", "fit_metric", "method_tier", "best_config")
# the optional pieces that are functions (a module constant of the piece's name in capitals, a regex say, is none)
OPTIONAL_FUNCTIONS = ("tile_note", "herd_of", "tile_warnings", "resolve_tile", "dense_flops", "method_tier")
REQUIRED = tuple(f.name for f in fields(KernelDef) if f.name not in OPTIONAL)


def from_module(module: ModuleType) -> KernelDef:
    """The KernelDef a kernel module declares: each piece under its field's name, a value in capitals (NAME, SPEC,
    TOLERANCES, TOLERANCE_SOURCE, HARNESS, TWIN, CONSTANTS, EVIDENCE, REGISTRY_PAGE, DMAS_PER_TILE, LISTED_AFTER,
    MEASURED_OVERRIDES, THROUGHPUT, CALLS_WITH_TILE, FIT_METRIC, BEST_CONFIG) and a function in lower case (fp32, emulated, torch, tile_rules, tile_default, harness_case,
    cost_features, registry_rows, tile_note, herd_of, tile_warnings, resolve_tile, dense_flops, method_tier). A piece the module lacks is None,
    which `missing_pieces` names."""
    values = {}
    for f in fields(KernelDef):
        value = getattr(module, f.name.upper(), getattr(module, f.name, None))
        if value is not None or f.name in REQUIRED:
            values[f.name] = value
    return KernelDef(**values)


def missing_pieces(d: KernelDef) -> list[str]:
    """The required pieces `d` leaves empty, plus the ones that disagree with each other (by name)."""
    def declared(value) -> bool:
        if isinstance(value, Absent):
            return bool(value.reason.strip())  # a named absence, with its reason
        return value is not None and (callable(value) or bool(value))

    out = [p for p in REQUIRED if not declared(getattr(d, p))]
    if d.spec is not None and d.spec.name != d.name:
        out.append(f"spec (named {d.spec.name!r})")
    if d.spec is not None and d.tolerances is not None and set(d.tolerances) != set(d.spec.contracts):
        out.append("tolerances (one per contract of the spec)")
    entries = harness_entries(d.name, d.harness).values()
    if d.harness and not all(isinstance(e, dict) and e.get("command") for e in entries):
        out.append("harness (no command)")
    if d.evidence and set(d.evidence) != set(d.constants):
        out.append("evidence (one per constant)")
    if any(p.index and not (p.index_cells and p.details_cells) for _, p in catalog_pages(d.name, d.registry_page)):
        out.append("registry_page (the cells of its upstream tables)")
    if isinstance(d.registry_page, tuple) and len({p.key for _, p in catalog_pages(d.name, d.registry_page)}) != len(
            d.registry_page):
        out.append("registry_page (a key per page)")
    if isinstance(d.registry_page, dict) and d.registry_page and not {"page", "commit", "tables"} <= set(d.registry_page):
        out.append("registry_page (page, commit, tables)")
    # an optional function picked up from a module constant of the same name
    out += [f"{p} (not a function)" for p in OPTIONAL_FUNCTIONS
            if getattr(d, p) is not None and not callable(getattr(d, p))]
    if d.measured_overrides and callable(d.tile_rules) and not set(d.measured_overrides) <= {
            r[0] for r in d.tile_rules("npu2")}:
        out.append("measured_overrides (not one of its tile rules)")
    if d.dense_flops is not None and d.throughput != "gflops":
        out.append("dense_flops (a GFLOP/s count: throughput is not gflops)")
    return out
