"""`ledger registry build --into-mlir-air CHECKOUT`: add the ledger's new hardware-measured rows to an mlir-air
checkout's kernel_registry/, in its own tables' columns (`registry.mlir_air_tables`) and its GEMM JSON
(`registry.render_json`), right after each table's last row; prose, headings and existing rows stay byte for
byte, and a second merge adds nothing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Sequence

from ledger.record import RecordedEvent
from registry.catalog import BEST_CONFIG_KERNEL, KERNEL_OF, PAGES
from registry.fold import RegistryData, fold_registry
from registry.importer_tables import gemm_shape, parse_tables, shape_of_cells
from registry.mlir_air_tables import DETAILS, INDEX, PAGE_OF, details_cells, index_cells
from registry.render_json import GEMM_JSON, GEMM_PAGES, method_entry, shape_entry


def merge_into_mlir_air(events: Sequence[RecordedEvent], directory: str | Path) -> dict[str, int]:
    """Add the ledger's new hardware rows to an mlir-air checkout's kernel_registry/ (tables and GEMM JSON),
    leaving its prose and existing rows as they are."""
    directory = Path(directory)
    registry_dir = directory / "programming_examples" / "kernel_registry"
    if not registry_dir.is_dir():
        registry_dir = directory
    if not (registry_dir / "supported_kernels.md").is_file():
        raise FileNotFoundError(f"{directory} holds no kernel_registry/supported_kernels.md (an mlir-air checkout, "
                                "or its programming_examples/kernel_registry folder)")
    return merge_tables(registry_dir, fold_registry(events))


def merge_tables(directory: str | Path, data: RegistryData) -> dict[str, int]:
    """Add the ledger's hardware-measured rows that `directory`'s (an mlir-air kernel_registry/) tables lack,
    in those tables' own columns, after each table's last row; also add missing shapes/methods to the GEMM
    JSON. Prose, headings and existing rows are left byte for byte. Returns {file: rows added}."""
    directory = Path(directory)
    added: dict[str, int] = {}
    for page in data.pages:
        key = page.spec.key
        if key not in INDEX:
            continue
        rows = [r for r in page.rows if any(m.on_hardware and m.passed for m in r.measurements)
                and not all(m.evidence == "imported" for m in r.measurements if m.on_hardware)]
        if not rows:
            continue
        targets = [(directory / "supported_kernels.md", [("", INDEX[key])], "index"),
                   (directory / "details" / f"{PAGE_OF[key]}.md", list(DETAILS[key]), "details")]
        for path, tables, where in targets:
            n = _merge_file(path, key, tables, where, rows) if path.is_file() else 0
            if n:
                rel = str(path.relative_to(directory))
                added[rel] = added.get(rel, 0) + n
    for dtype, name in GEMM_JSON.items():
        path = directory / "details" / name
        n = _merge_gemm_json(path, data.page(GEMM_PAGES[dtype])) if path.is_file() else 0
        if n:
            added[f"details/{name}"] = n
    return added


def _best_config(key: str) -> bool:
    """A page of the best-configuration kernel (GEMM's): a table per method, rows named by their `M×K×N` cell."""
    return KERNEL_OF.get(key) == BEST_CONFIG_KERNEL


def _merge_file(path: Path, key: str, tables: list[tuple[str, str]], where: str, rows: list) -> int:
    """Append `rows` missing from `path`'s tables of `key` after each table's last row; the rows added."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    inserts: list[tuple[int, list[str]]] = []
    for method, header in tables:
        found = [t for t in parse_tables(text) if t[0] == header]
        if found and _best_config(key) and where == "details" and len(DETAILS[key]) > 1:
            # several method tables may share a header: the n-th table with that header is the n-th method
            same = [m for m, h in DETAILS[key] if h == header]
            found = [found[same.index(method)]] if same.index(method) < len(found) else []
        for hdr, existing, _, end in found[:1]:
            new = _new_lines(key, hdr, existing, rows, method, where)
            if new:
                inserts.append((end, new))
    for end, new in sorted(inserts, reverse=True):
        lines[end:end] = new
    n = sum(len(x) for _, x in inserts)
    if n:
        path.write_text("\n".join(lines), encoding="utf-8")
    return n


def _identity(key: str, shape) -> tuple:
    """A row's shape as the table's own cells identify it (`registry.importer_tables`)."""
    s = dict(shape)
    if _best_config(key):
        return tuple(s[k] for k in ("M", "K", "N"))
    page = PAGES.get(key)
    if page is not None and page.catalog_shape is not None:  # a page whose columns are not the catalog's shape keys
        return tuple(sorted(page.catalog_shape(s).items()))
    return tuple(sorted(s.items()))


def _new_lines(key: str, hdr, existing, rows: list, method: str, where: str) -> list[str]:
    """The table lines of `rows` whose shape the table lacks (emulator rows never)."""
    have = {(gemm_shape(c) if _best_config(key) else shape_of_cells(key, hdr, c)) for c in existing}
    new = []
    for r in rows:
        if _identity(key, r.shape) in have:
            continue
        cells = index_cells(key, r) if where == "index" else details_cells(key, method, r)
        if cells is None or "🧪" in "".join(cells):
            continue
        new.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return new


def _merge_gemm_json(path: Path, page) -> int:
    """Add the page's hardware shapes and methods that mlir-air's GEMM JSON at `path` lacks; the entries added."""
    doc = json.loads(path.read_text())
    index = {(s["M"], s["K"], s["N"]): s for s in doc.get("shapes", [])}
    n = 0
    for row in page.rows:
        ours = [m for m in row.measurements if m.on_hardware and m.passed and m.evidence != "imported"]
        if not ours:
            continue
        mkn = tuple(dict(row.shape)[k] for k in ("M", "K", "N"))
        if mkn not in index:
            entry = shape_entry(dataclasses.replace(row, measurements=tuple(ours)))
            if entry:
                doc["shapes"].append(entry)
                n += 1
            continue
        for m in ours:
            if m.method not in index[mkn]["methods"]:
                index[mkn]["methods"][m.method] = method_entry(m)
                n += 1
    if n:
        # upstream writes \\u escapes (ensure_ascii): dumping the same way leaves its bytes unchanged
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
    return n
