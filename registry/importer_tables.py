"""Read mlir-air's tested-shapes markdown tables into `KernelVerified` events (the JSON importer's sibling).

* `parse_tables(text)`: every markdown table of a page, as (header, rows of cells, header line, end line).
* `events_from_markdown(folder)`: the eight kernels without a JSON file (GEMV, RMSNorm, LayerNorm, RoPE,
  FlashAttention, EltwiseAdd, SiLU_Mul, GELU), one imported `KernelVerified` per tested-shapes row with its
  status (`⚠️` rows carry caveat `upstream-warning` and keep the text). The tables' headers are
  `registry.mlir_air_tables`'s.
* `shape_of_cells` / `gemm_shape`: the shape a row is about (what `handlers.registry_merge` compares).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path
from typing import Any

from kernels.numerics.catalog import get_spec
from kernels.perf.evidence import EvidenceError, check_measurement
from kernels.thresholds import kernel_tolerance
from ledger.events import KernelVerified
from registry.mlir_air_tables import DETAILS, INDEX, NO_JSON, PAGE_OF


def _split(line: str) -> list[str]:
    body = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    cells, cur, esc = [], "", False
    for ch in body:
        if ch == "\\" and not esc:
            esc = True
            cur += ch
            continue
        if ch == "|" and not esc:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
        esc = False
    cells.append(cur.strip())
    return [c.replace("\\|", "|") for c in cells]


def parse_tables(text: str) -> list[tuple[tuple[str, ...], list[list[str]], int, int]]:
    """Every markdown table: (header, data rows, index of the header line, index after its last row)."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines) - 1:
        if lines[i].lstrip().startswith("|") and re.match(r"^\s*\|?\s*:?-{3,}", lines[i + 1]):
            header = tuple(_split(lines[i]))
            j, rows = i + 2, []
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(_split(lines[j]))
                j += 1
            out.append((header, rows, i, j))
            i = j
        else:
            i += 1
    return out


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.I)


def _first_number(cell: str) -> float | None:
    m = _NUMBER.search(cell.replace("**", "").replace(",", ""))
    return float(m.group()) if m else None


def _latency_us(cell: str) -> float | None:
    x = _first_number(cell)
    if x is None:
        return None
    if "ms" in cell:
        return x * 1000
    return x


def ints(cell: str) -> list[int]:
    """The integers of a cell, in order (bold markers ignored)."""
    return [int(x) for x in re.findall(r"\d+", cell.replace("**", ""))]


def status_of(cell: str) -> tuple[str, str]:
    """(verdict, caveat) of an upstream status cell."""
    if cell.startswith("❌"):
        return "FAIL", ""
    if cell.startswith("⚠"):
        return "PASS", "upstream-warning"
    return "PASS", ""


def row_fields(key: str, header: tuple[str, ...], cells: list[str]) -> dict[str, Any] | None:
    """The kernel, shape, tile and figures of one upstream row (None: not a shape row of this kernel)."""
    c = dict(zip(header, cells))
    f: dict[str, Any] = {"tile": {}}
    try:
        if key == "gemv":
            M, K = ints(c[header[0]])[:2]
            f["shape"] = {"M": M, "K": K}
            hm, tm, mi = (ints(c.get(header[1], "")) + [None] * 3)[:3]
            f["tile"] = {k: v for k, v in (("herd_m", hm), ("tile_m", tm), ("m_input", mi)) if v is not None}
            f["gflops"] = _first_number(c.get("GFLOPS", ""))
        elif key in ("rmsnorm", "layernorm"):
            M, N = ints(c[header[0]])[:2]
            f["shape"] = {"M": M, "N": N}
            if ints(c.get("herd_x", "")):
                f["tile"] = {"herd_x": ints(c["herd_x"])[0]}
        elif key == "rope":
            if header[0] == "rows":
                rows, hd = ints(c["rows"])[0], ints(c["head_dim"])[0]
            else:
                rows, hd = ints(c[header[0]])[:2]
            f["shape"] = {"rows": rows, "head_dim": hd}
            hx = ints(next((c[h] for h in header if "config" in h or h.startswith("herd")), ""))
            if len(hx) >= 2:
                f["tile"] = {"herd_x": hx[0], "herd_y": hx[1]}
        elif key == "flash_attention":
            lq, lk = ints(c["lq×lk"])[:2]
            dk, dv = ints(c["dk/dv"])[:2]
            hq, hkv = ints(c["heads q/kv"])[:2]
            f["shape"] = {"lq": lq, "lk": lk, "dk": dk, "dv": dv, "heads_q": hq, "heads_kv": hkv,
                          "causal": c.get("causal", "").startswith("✓")}
            f["gflops"] = _first_number(c.get("GFLOP/s", ""))
        elif key in ("eltwise_add", "silu_mul", "gelu"):
            f["shape"] = {"N": ints(c["N"])[0]}
            cfg = ints(next((c[h] for h in header if "config" in h), ""))
            tk = "tile" if key == "eltwise_add" else "tile_n"
            if len(cfg) >= 3:
                f["tile"] = {"herd_x": cfg[0], "herd_y": cfg[1], tk: cfg[2]}
        else:
            return None
    except (KeyError, IndexError, ValueError):
        return None
    f["latency_us"] = _latency_us(c.get("latency", ""))
    f["mean_rel_L1"] = _first_number(c.get("mean_rel_L1", ""))
    f["max_abs"] = _first_number(c.get("abs_err max", "")) if "abs_err max" in c else None
    f["max_rel"] = _first_number(c.get("rel_err max", "")) if "rel_err max" in c else None
    f["used_by"] = c.get("Used by", "")
    f["status"] = c.get("Status", "")
    return f


NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/Xilinx/mlir-air/kernel_registry/markdown")


def events_from_markdown(folder: str | Path) -> list[tuple[str, Any]]:
    """Imported `KernelVerified` events from the tested-shapes tables of the eight kernels without a JSON file
    (details pages first, then supported_kernels.md rows the details page lacks). Each row is validated like a
    harness transcript (kernels.perf.evidence, without an element count); a row that fails validation is skipped and
    named in the returned event's absence (`skipped_rows` gives them)."""
    folder = Path(folder)
    out: list[tuple[str, Any]] = []
    seen: set[tuple[str, tuple]] = set()
    skipped.clear()
    sources = [(key, folder / "details" / f"{PAGE_OF[key]}.md", {h for _, h in DETAILS[key]}) for key in NO_JSON]
    sources += [(key, folder / "supported_kernels.md", {INDEX[key]}) for key in NO_JSON]
    for key, path, headers in sources:
        if not path.is_file():
            continue
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        for header, rows, _, _ in parse_tables(data.decode("utf-8")):
            if header not in headers:
                continue
            for cells in rows:
                f = row_fields(key, header, cells)
                if f is None:
                    skipped.append(f"{path.name}: {' | '.join(cells)}")
                    continue
                ident = (key, tuple(sorted(f["shape"].items())))
                if ident in seen:
                    continue
                kernel = get_spec(key).name
                contract = get_spec(key).default_contract
                rtol, atol = kernel_tolerance(kernel, contract)
                verdict, caveat = status_of(f["status"])
                try:
                    check_measurement(kernel, f["shape"], contract, verdict=verdict, rtol=rtol, atol=atol,
                                      mean_rel_L1=f["mean_rel_L1"], max_abs=f["max_abs"], max_rel=f["max_rel"],
                                      latency_us=f["latency_us"], gflops=f["gflops"] if "gflops" in f else None,
                                      require_count=False)
                except EvidenceError as e:
                    skipped.append(f"{path.name}: {' | '.join(cells)} ({e})")
                    continue
                seen.add(ident)
                herd = [f["tile"].get("herd_m") or f["tile"].get("herd_x"), f["tile"].get("herd_y", 1)] \
                    if (f["tile"].get("herd_m") or f["tile"].get("herd_x")) else None
                event = KernelVerified(
                    kernel=kernel, shape=f["shape"], contract=contract, executor="mlir-air", verdict=verdict,
                    rtol=rtol, atol=atol, mean_rel_L1=f["mean_rel_L1"], max_abs=f["max_abs"], max_rel=f["max_rel"],
                    latency_us=f["latency_us"], gflops=f.get("gflops"), tile=f["tile"], herd=herd,
                    source="imported", role=f["used_by"], caveat=caveat, measured_at="2026-06",
                    provenance={"file": path.name, "sha256": sha, "table": " | ".join(header),
                                "row": " | ".join(cells), "status_text": f["status"]},
                    note=f["status"] if caveat else "",
                )
                eid = str(uuid.uuid5(NAMESPACE, f"{sha}|{key}|{ident[1]}"))
                out.append((eid, event))
    return out


skipped: list[str] = []  # rows of the last events_from_markdown call that could not be imported, and why


def shape_of_cells(key: str, header: tuple[str, ...], cells: list[str]) -> tuple | None:
    """The shape of one upstream row of kernel `key` as sorted (name, value) pairs (None: not a shape row)."""
    f = row_fields(key, header, cells)
    return tuple(sorted(f["shape"].items())) if f else None


def gemm_shape(cells: list[str]) -> tuple | None:
    """(M, K, N) of a GEMM table row (None: its first cell holds no three integers)."""
    nums = ints(cells[0]) if cells else []
    return tuple(nums[:3]) if len(nums) >= 3 else None
