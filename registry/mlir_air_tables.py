"""mlir-air's own tested-shapes tables: their exact columns per kernel, and the ledger's rows rendered into them.

mlir-air's Phase 1 playbook (.claude/skills/phase-1-kernel-validation/SKILL.md:88-95) appends each new
(kernel, shape) to that kernel's tested-shapes table in `kernel_registry/supported_kernels.md` and in
`details/<Kernel>_bf16.md`, "matching the existing rows' column schema for that kernel exactly". The headers
below are those tables' headers at mlir-air e972f29 (supported_kernels.md:41,59,132,193,214,226,260,280,308,334;
details/*.md:90-177, see each `DETAILS` entry), cell formats as upstream writes them: shapes `2048×2048`,
`9.7e-3`, `911 µs` / `15.4 ms`, `18.4 GB/s`, herd/tile cells `8/8/8`, status `✅` / `⚠️ text` / `❌`.

* `render_index_table(page)` / `render_details_tables(page)`: a kernel page's rows in upstream's columns
  (`index_cells` / `details_cells` give one row); a kernel without a schema here (`LATER`) gets its imported
  rows back verbatim under their own table's header (`render_verbatim`). Emulated / torch rows are marked `🧪` in their figure cells
  and status, and are never bold ("best").

Reading those tables back is `registry.importer_tables` (next to the JSON importer); adding the ledger's rows to
a checkout's tables is `handlers.registry_merge`.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

from npu_kernels.numerics.kernels import definitions as kernel_definitions
from registry.catalog import CATALOG
from registry.catalog import PAGES as CATALOG_PAGES
from registry.fold import NOT_NPU2, KernelPage, RegistryMeasurement, ShapeRow, not_npu2_mark, pick_best

_NOT_NPU2_ORDER = list(NOT_NPU2)
# the registered kernels' pages upstream has (a kernel without one, the 4-bit ones, declares its absence: `index`), by
# page key, in the index's listing order (registry.catalog.CATALOG)
PAGES = {e.key: CATALOG_PAGES[e.key] for e in CATALOG if e.key in CATALOG_PAGES and CATALOG_PAGES[e.key].index}

# --- upstream headers: each page's own (its module's `registry_page`) -------------------------------------

INDEX: dict[str, tuple[str, ...]] = {key: p.index for key, p in PAGES.items()}  # supported_kernels.md
# details/<page>.md: (method or "", header); a page with a table per method (GEMM's) has several
DETAILS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {key: p.details for key, p in PAGES.items()}
PAGE_OF = {key: p.page for key, p in PAGES.items()}
NO_JSON: tuple[str, ...] = tuple(key for key, p in PAGES.items() if p.no_json)
EMULATED = "🧪"
# Kernels mlir-air added after e972f29, read by the importer only (the catalog has no page of their own, so the
# projection gives them a generic page): each kernel module of npu_kernels.numerics.kernels declares its pages
# (`registry_page`: page, commit, tolerances from the page's "Tolerances" section, the index's commit, and its
# tables as (table name, header)), in kernel-name order.
LATER: dict[str, dict] = {d.name: d.registry_page for d in sorted(kernel_definitions(), key=lambda d: d.name)
                          if isinstance(d.registry_page, dict)}

# --- cell formatting --------------------------------------------------------------------------------------


def sci2(x: float | None) -> str:
    """`9.7e-3` (two significant digits, no exponent padding), as upstream writes error figures."""
    if x is None or x != x:
        return "—" if x is None else "nan"
    if x == 0:
        return "0"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant}e{int(exp)}"


def latency_text(us: float | None) -> str:
    if us is None:
        return "—"
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def _shape(row: ShapeRow) -> dict[str, Any]:
    return dict(row.shape)


def _g(m: RegistryMeasurement | None) -> float | None:
    if m is None:
        return None
    if m.gflops is not None:
        return m.gflops
    return m.throughput if m.spec.unit == "GFLOP/s" else None


def _bw(m: RegistryMeasurement | None) -> float | None:
    return m.throughput if m is not None and m.spec.unit == "GB/s" else None


def _mark(m: RegistryMeasurement | None, text: str) -> str:
    """A cell of mlir-air's NPU2 columns: an emulated row's CPU time or throughput is never shown as one."""
    return f"{not_npu2_mark(m)}: {text}" if m is not None and not m.on_hardware and text not in ("—", "") else text


def _num(x: float | None, m: RegistryMeasurement | None, bold: bool = False, digits: int = 0) -> str:
    if x is None:
        return "—"
    text = f"{x:.{digits}f}" if digits else (f"{x:.0f}" if x >= 100 else f"{x:.1f}")
    if bold and m is not None and m.on_hardware:
        text = f"**{text}**"
    return _mark(m, text)


def status_cell(row: ShapeRow, m: RegistryMeasurement | None = None) -> str:
    ms = [m] if m is not None else list(row.measurements)
    hw = [x for x in ms if x.on_hardware]
    if hw and not any(x.passed for x in hw):
        return "❌"
    if not hw:
        passed = [x for x in ms if x.passed]
        return not_npu2_mark(min(passed, key=lambda x: _NOT_NPU2_ORDER.index(x.evidence) if x.evidence in NOT_NPU2 else 9)) if passed else "❌"
    warn = [x for x in hw if x.caveat == "upstream-warning"]
    if warn:
        return warn[0].provenance.get("status_text") or "⚠️"
    if any(x.caveat == "near-zero-atol-artifact" for x in hw) or (m is None and row.status == "caveat"):
        return "⚠️ near-zero atol artifact" if any(x.caveat == "near-zero-atol-artifact" for x in hw) else "⚠️"
    return "✅"


def _tile3(t: dict, keys: tuple[str, ...]) -> str:
    return "/".join(str(t.get(k, "—")) for k in keys) if t else "—"


def _two_d(n: int) -> str:
    return "—"


def _used(row: ShapeRow) -> str:
    return " + ".join(row.used_by) or "—"


def _best(row: ShapeRow, method: str | None = None, tier: str | None = None) -> RegistryMeasurement | None:
    ms = [m for m in row.measurements if (method is None or m.method.split(":")[-1] == method)
          and (tier is None or m.tier == tier)]
    return pick_best(ms) or (ms[-1] if ms else None)


Cells = Callable[[ShapeRow], list[str]]


def _best_of(row: ShapeRow) -> RegistryMeasurement | None:
    """The measurement a row's figures are shown from: its best, else its latest."""
    return row.best or (row.measurements[-1] if row.measurements else None)


def streaming_cells(row: ShapeRow, tile_keys: tuple[str, ...], *, as_2d: bool, abs_err: bool,
                    used_by: bool) -> list[str]:
    """A streaming elementwise kernel's row: N, ("(as 2-D)"), the config, latency, bandwidth, mean_rel_L1,
    (abs_err max), (Used by), Status."""
    s, b = _shape(row), _best_of(row)
    t = b.tile if b else {}
    cells = [str(s["N"])] + (["—"] if as_2d else [])
    cells += [_tile3(t, tile_keys), _mark(b, latency_text(b.latency_us if b else None)),
              _mark(b, f"{_bw(b):.1f} GB/s") if _bw(b) is not None else "—", sci2(b.mean_rel_L1 if b else None)]
    if abs_err:
        cells.append(sci2(b.max_abs if b else None))
    if used_by:
        cells.append(_used(row))
    return cells + [status_cell(row)]


def norm_cells(row: ShapeRow, *, abs_err: bool) -> list[str]:
    """A row-parallel norm's index row: M×N, herd_x, latency, bandwidth, mean_rel_L1, (abs_err max), Used by, Status."""
    s, b = _shape(row), _best_of(row)
    t = b.tile if b else {}
    cells = [f"{s['M']}×{s['N']}", str(t.get("herd_x", "—")), _mark(b, latency_text(b.latency_us if b else None)),
             _mark(b, f"{_bw(b):.1f} GB/s") if _bw(b) is not None else "—", sci2(b.mean_rel_L1 if b else None)]
    if abs_err:
        cells.append(sci2(b.max_abs if b else None))
    return cells + [_used(row), status_cell(row)]


# the formatters a kernel module's page cells are handed (it imports nothing of the registry)
FMT = SimpleNamespace(streaming_cells=streaming_cells, norm_cells=norm_cells, status_cell=status_cell, sci2=sci2, latency_text=latency_text,
                      mark=_mark, tile3=_tile3, used=_used, bw=_bw, best_of=_best_of, shape=_shape, num=_num, g=_g,
                      best=_best, pick_best=pick_best)


def index_cells(key: str, row: ShapeRow) -> list[str]:
    """One row of page `key`'s supported_kernels.md table, in its columns (see INDEX)."""
    if key in PAGES:
        return PAGES[key].index_cells(row, FMT)
    raise KeyError(key)


def details_cells(key: str, method: str, row: ShapeRow) -> list[str] | None:
    """One row of page `key`'s details-page table for `method` (see DETAILS); None when the row has no
    measurement of that method."""
    if key in PAGES:
        return PAGES[key].details_cells(method, row, FMT)
    raise KeyError(key)


def _md(headers: tuple[str, ...], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def render_verbatim(page: KernelPage) -> str:
    """A kernel without an upstream schema here (the `LATER` ones, any other): each imported row rendered back
    in its own table's header, as upstream wrote it (provenance `table` / `row`), tables in first-seen order."""
    tables: dict[str, list[str]] = {}
    for row in page.rows:
        for m in row.measurements:
            header, cells = m.provenance.get("table"), m.provenance.get("row")
            if header and cells and cells not in tables.setdefault(header, []):
                tables[header].append(cells)
    return "\n".join(_md(tuple(h.split(" | ")), [r.split(" | ") for r in rows]) for h, rows in tables.items())


def render_index_table(page: KernelPage) -> str:
    key = page.spec.key
    if key not in INDEX:
        return render_verbatim(page)
    return _md(INDEX[key], [index_cells(key, r) for r in page.rows])


def render_details_tables(page: KernelPage) -> str:
    key = page.spec.key
    if key not in DETAILS:
        return render_verbatim(page)
    parts = []
    for method, headers in DETAILS[key]:
        rows = [c for r in page.rows if (c := details_cells(key, method, r)) is not None]
        if method:
            parts.append(f"**{method}**\n")
        parts.append(_md(headers, rows))
    return "\n".join(parts)
