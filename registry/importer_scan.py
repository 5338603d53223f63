"""Every tested-shapes table of an mlir-air `kernel_registry/` folder, read into events with each row accounted for.

`read_markdown(folder, gemm_shapes)` returns (events, accounts):

* the tables read are every table of `supported_kernels.md` and `details/*.md` that is a tested-shapes table: its
  `##` section says "tested shapes" (every kernel at mlir-air e972f29), "per-shape" or "placement sweep" (the
  later Conv1D / Element-wise Multiply pages), or its header is one this importer has a schema for
  (`registry.mlir_air_tables`: INDEX, DETAILS, LATER);
* a table with a schema is imported row by row as today (`registry.importer_tables.row_fields`; the later
  kernels through `later_fields`, several rows per shape kept apart by their config); GEMM tables are accounted
  against the GEMM JSON (`gemm_shapes`, the (output dtype, M, K, N) the JSON import holds): a row whose shape
  the JSON has is imported there, any other is skipped and says so;
* a table without a schema is refused: every row is counted as skipped, with the header verbatim in the reason;
* `accounts` has one `TableAccount` per table (kernel, file, header, rows read, imported, duplicate = a shape
  another table already gave, skipped with why), so nothing read is dropped in silence.

`measured_at` is the row's own date column when it has one, else the date of the file's last commit when the
folder is a git checkout, else `unknown`; never a constant.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.perf.evidence import EvidenceError, check_measurement
from npu_kernels.numerics.kernels import kernel_tolerance
from npu_kernels.provenance import IMPORTED_REGISTRY
from ledger.events import KernelVerified
from registry.catalog import PAGES
from registry.importer_tables import StatusCellError, gemm_shape, later_fields, parse_tables, row_fields, status_of
from registry.mlir_air_tables import DETAILS, INDEX, LATER, PAGE_OF

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/Xilinx/mlir-air/kernel_registry/markdown")
_SECTION = re.compile(r"tested shapes|per-shape|placement sweep", re.I)
_DATE_COLUMN = re.compile(r"^(measured|date)\b", re.I)
# the pages checked against the best-configuration JSON (GEMM's, a page per output dtype): page key -> output dtype
_GEMM_DTYPE = {key: p.output_dtype for key, p in PAGES.items() if p.json}


@dataclass
class TableAccount:
    kernel: str  # the schema's key, else the page / section the table sits in
    file: str  # path below the registry folder
    header: str  # verbatim, cells joined by " | "
    read: int = 0
    imported: int = 0
    duplicate: int = 0
    skipped: list[str] = field(default_factory=list)  # "row: why"

    @property
    def why(self) -> str:
        reasons = sorted({s.split(": ", 1)[-1] for s in self.skipped})
        return "; ".join(reasons)

    def as_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "file": self.file, "header": self.header, "read": self.read,
                "imported": self.imported, "duplicate": self.duplicate, "skipped": len(self.skipped),
                "why": self.why, "skipped_rows": list(self.skipped)}


def _schemas() -> dict[tuple[str, ...], list[tuple[str, str]]]:
    """header -> [(kernel key, table name)] for every header this importer reads."""
    out: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for key, header in INDEX.items():
        out.setdefault(header, []).append((key, "index"))
    for key, tables in DETAILS.items():
        for name, header in tables:
            out.setdefault(header, []).append((key, name or "details"))
    for key, spec in LATER.items():
        for name, header in spec["tables"]:
            out.setdefault(header, []).append((key, name or "details"))
    return out


def file_date(path: Path) -> str:
    """The date (YYYY-MM-DD) of the last commit that touched `path`, or `unknown` outside a git checkout."""
    try:
        done = subprocess.run(["git", "log", "-1", "--format=%cs", "--", path.name], cwd=path.parent,
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def _page_key(path: Path) -> str:
    by_page = {v: k for k, v in PAGE_OF.items()} | {spec["page"]: k for k, spec in LATER.items()}
    return by_page.get(path.stem, path.stem)


def _tables(folder: Path):
    """(file, path, header, rows, heading) of every tested-shapes table, in file order."""
    known = _schemas()
    paths = [folder / "supported_kernels.md"] + sorted((folder / "details").glob("*.md"))
    for path in paths:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        for header, rows, start, _ in parse_tables(text):
            section = next((ln for ln in reversed(lines[:start]) if ln.startswith("## ")), "")
            heading = next((ln for ln in reversed(lines[:start]) if ln.startswith("#")), "")
            if header in known or _SECTION.search(section):
                yield path, header, rows, heading, section


def _kernel_of(path: Path, header: tuple[str, ...], section: str) -> tuple[str, str] | None:
    """(kernel key, table name) the schema gives this table, None when there is none."""
    candidates = _schemas().get(header, [])
    if path.name == "supported_kernels.md":
        hit = [(k, n) for k, n in candidates if n == "index"]
    else:
        page = _page_key(path)
        hit = [(k, n) for k, n in candidates if k == page and n != "index"]
    return hit[0] if hit else None


def read_markdown(folder: str | Path, gemm_shapes: set[tuple] | None = None):
    """(events, accounts) for every tested-shapes table below `folder` (see the module docstring)."""
    folder = Path(folder)
    gemm_shapes = gemm_shapes or set()
    events: list[tuple[str, Any]] = []
    accounts: list[TableAccount] = []
    seen: set[tuple] = set()
    dates: dict[Path, str] = {}
    ordered = sorted(_tables(folder), key=lambda t: t[0].name == "supported_kernels.md")  # details pages first
    for path, header, rows, heading, section in ordered:
        rel = path.relative_to(folder).as_posix()
        schema = _kernel_of(path, header, section)
        label = schema[0] if schema else (_page_key(path) if rel != "supported_kernels.md"
                                          else section.lstrip("# ").split(" — ")[0] or "?")
        acc = TableAccount(kernel=label, file=rel, header=" | ".join(header), read=len(rows))
        accounts.append(acc)
        if schema is None:
            acc.skipped = [f"{' | '.join(c)}: no schema for this header (refused)" for c in rows]
            continue
        key, name = schema
        if path not in dates:
            dates[path] = file_date(path)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        for cells in rows:
            row = " | ".join(cells)
            if key in _GEMM_DTYPE:
                dims = gemm_shape(cells)
                if dims is None:
                    acc.skipped.append(f"{row}: not a GEMM shape row")
                elif (_GEMM_DTYPE[key], *dims) in gemm_shapes:
                    acc.imported += 1
                else:
                    acc.skipped.append(f"{row}: shape not in the GEMM JSON (GEMM rows are imported from details/*.json)")
                continue
            c = dict(zip(header, cells))
            date = next((c[h] for h in header if _DATE_COLUMN.match(h) and c[h]), "") or dates[path]
            made = (_later(key, name, header, cells, heading, sha, date, rel) if key in LATER
                    else _known(key, header, cells, sha, date, rel))
            if isinstance(made, str):
                acc.skipped.append(f"{row}: {made}")
                continue
            fresh = [(ident, eid, ev) for ident, eid, ev in made if ident not in seen]
            if not fresh:
                acc.duplicate += 1
                continue
            for ident, eid, ev in fresh:
                seen.add(ident)
                events.append((eid, ev))
            acc.imported += 1
    return events, accounts


def _known(key, header, cells, sha, date, rel):
    f = row_fields(key, header, cells)
    if f is None:
        return "not a shape row of this kernel's schema"
    ident = (key, tuple(sorted(f["shape"].items())))
    kernel, contract = get_spec(key).name, get_spec(key).default_contract
    rtol, atol = kernel_tolerance(kernel, contract)
    try:
        verdict, caveat = status_of(f["status"])
        for timing in (f, f.get("fast") or f):  # a range is checked at both of its ends
            check_measurement(kernel, f["shape"], contract, verdict=verdict, rtol=rtol, atol=atol,
                              mean_rel_L1=f["mean_rel_L1"], max_abs=f["max_abs"], max_rel=f["max_rel"],
                              latency_us=timing["latency_us"], gflops=timing.get("gflops"),
                              latency_text=timing.get("latency_text"), gflops_text=timing.get("gflops_text"),
                              require_count=False)
    except (EvidenceError, StatusCellError) as e:
        return str(e)
    herd_x = f["tile"].get("herd_m") or f["tile"].get("herd_x")
    event = KernelVerified(
        kernel=kernel, shape=f["shape"], contract=contract, executor="mlir-air", verdict=verdict,
        rtol=rtol, atol=atol, mean_rel_L1=f["mean_rel_L1"], max_abs=f["max_abs"], max_rel=f["max_rel"],
        latency_us=f["latency_us"], gflops=f.get("gflops"), tile=f["tile"],
        herd=[herd_x, f["tile"].get("herd_y", 1)] if herd_x else None,
        source="imported", provenance_class=IMPORTED_REGISTRY, role=f["used_by"], caveat=caveat, measured_at=date,
        provenance={"file": Path(rel).name, "sha256": sha, "table": " | ".join(header), "row": " | ".join(cells),
                    "status_text": f["status"]},
        note=f["status"] if caveat else "",
    )
    return [(ident, str(uuid.uuid5(NAMESPACE, f"{sha}|{key}|{ident[1]}")), event)]


def _later(key, name, header, cells, heading, sha, date, rel):
    spec = LATER[key]
    try:
        configs = later_fields(key, name, header, cells, heading)
    except StatusCellError as e:
        return str(e)
    if configs is None:
        return "not a shape row of this kernel's schema"
    out = []
    for f in configs:
        if any(not isinstance(v, int) or v <= 0 for v in f["shape"].values()):
            return f"shape {f['shape']} is not positive integers"
        l1 = f["mean_rel_L1"]
        if l1 is not None and not 0 <= l1 < float("inf"):
            return f"mean_rel_L1 {l1} is not a finite non-negative figure"
        ident = (key, tuple(sorted(f["shape"].items())), tuple(sorted(f["tile"].items())))
        herd = [f["tile"]["herd_x"], f["tile"]["herd_y"]] if "herd_x" in f["tile"] else None
        caveat = "upstream-warning" if f["status"].startswith("⚠") else ""
        event = KernelVerified(
            kernel=key, shape=f["shape"], contract="bf16", executor="mlir-air", verdict=f["verdict"],
            rtol=spec["rtol"], atol=spec["atol"], mean_rel_L1=l1, latency_us=f["latency_us"], tile=f["tile"],
            herd=herd, source="imported", provenance_class=IMPORTED_REGISTRY, caveat=caveat, measured_at=date,
            provenance={"file": Path(rel).name, "sha256": sha, "table": " | ".join(header),
                        "row": " | ".join(cells), "status_text": f["status"],
                        "schema_commit": spec["index_commit"] if name == "index" else spec["commit"]},
            note=f["status"] if f["verdict"] != "PASS" or caveat else "",
        )
        out.append((ident, str(uuid.uuid5(NAMESPACE, f"{sha}|{key}|{ident[1]}|{ident[2]}")), event))
    return out

