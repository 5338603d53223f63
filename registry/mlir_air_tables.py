"""mlir-air's own tested-shapes tables: their exact columns per kernel, rendering rows into them, reading them back.

mlir-air's Phase 1 playbook (.claude/skills/phase-1-kernel-validation/SKILL.md:88-95) appends each new
(kernel, shape) to that kernel's tested-shapes table in `kernel_registry/supported_kernels.md` and in
`details/<Kernel>_bf16.md`, "matching the existing rows' column schema for that kernel exactly". The headers
below are those tables' headers at mlir-air e972f29 (supported_kernels.md:41,59,132,193,214,226,260,280,308,334;
details/*.md:90-177, see each `DETAILS` entry), cell formats as upstream writes them: shapes `2048×2048`,
`9.7e-3`, `911 µs` / `15.4 ms`, `18.4 GB/s`, herd/tile cells `8/8/8`, status `✅` / `⚠️ text` / `❌`.

* `render_index_table(page)` / `render_details_tables(page)`: a kernel page's rows in upstream's columns.
  Emulated / torch rows are marked `🧪` in their figure cells and status, and are never bold ("best").
* `parse_tables(text)`: every markdown table of a page, as (header, rows of cells).
* `events_from_markdown(folder)`: the eight kernels without a JSON file (GEMV, RMSNorm, LayerNorm, RoPE,
  FlashAttention, EltwiseAdd, SiLU_Mul, GELU), one imported `KernelVerified` per tested-shapes row with its
  status (`⚠️` rows carry caveat `upstream-warning` and keep the text).
* `merge_into_mlir_air(dir, data)`: add the ledger's rows that a checkout's tables lack, in those tables'
  columns, right after each table's last row; nothing else in the files changes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from pathlib import Path
from typing import Any, Callable

from registry.fold import KernelPage, Measurement, RegistryData, ShapeRow, pick_best

# --- upstream headers -------------------------------------------------------------------------------------

INDEX: dict[str, tuple[str, ...]] = {  # supported_kernels.md
    "gemm_f32": ("(M×K×N)", "best tile (m/kl2/kl1/n)", "external GFLOPS", "direct GFLOPS", "mean_rel_L1", "Used by",
                 "Status"),
    "gemm_bf16": ("(M×K×N)", "high-prec fused-cast", "high-prec drain", "low-prec direct", "mean_rel_L1 (high / low)",
                  "Used by", "Status"),
    "gemv": ("(M×K)", "best tile (herd_m/tile_m/m_input)", "GFLOPS", "mean_rel_L1", "Used by", "Status"),
    "rmsnorm": ("(M×N)", "herd_x", "latency", "bandwidth", "mean_rel_L1", "Used by", "Status"),
    "layernorm": ("(M×N)", "herd_x", "latency", "bandwidth", "mean_rel_L1", "abs_err max", "Used by", "Status"),
    "flash_attention": ("lq×lk", "dk/dv", "heads q/kv", "causal", "dv_chunks", "latency", "GFLOP/s", "mean_rel_L1",
                        "Status"),
    "eltwise_add": ("N", "best config (hx/hy/tile_n)", "latency", "bandwidth", "mean_rel_L1", "Status"),
    "silu_mul": ("N", "(as 2-D)", "best config (hx/hy/tile_n)", "latency", "bandwidth", "mean_rel_L1", "abs_err max",
                 "Status"),
    "rope": ("(rows×head_dim)", "herd (hx/hy)", "latency", "bandwidth", "mean_rel_L1", "Used by", "Status"),
    "gelu": ("N", "(as 2-D)", "best config (hx/hy/tile_n)", "latency", "bandwidth", "mean_rel_L1", "abs_err max",
             "Used by", "Status"),
}
# details/<page>.md: (method or "", header); GEMM pages have one table per method
DETAILS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "gemm_bf16": (
        ("fused-cast", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS (incl. cast)", "mean_rel_L1", "Status")),
        ("drain", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS", "mean_rel_L1", "Status")),
        ("direct", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS", "mean_rel_L1", "abs_err max", "Status")),
    ),
    "gemm_f32": (
        ("external", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS", "mean_rel_L1", "Used by", "Status")),
        ("direct", ("(M, K, N)", "tile (m/kl2/kl1/n)", "GFLOPS", "mean_rel_L1", "Used by", "Status")),
    ),
    "gemv": (("", ("(M, K)", "tile (herd_m/tile_m/m_input)", "latency", "GFLOPS", "mean_rel_L1", "rel_err max",
                   "abs_err max", "Used by", "Status")),),
    "rmsnorm": (("", ("(M, N)", "herd_x", "latency", "bandwidth", "mean_rel_L1", "rel_err max", "abs_err max",
                      "Used by", "Status")),),
    "layernorm": (("", ("(M, N)", "herd_x", "latency", "bandwidth", "mean_rel_L1", "abs_err max", "Used by",
                        "Status")),),
    "flash_attention": (("", ("lq×lk", "dk/dv", "heads q/kv", "causal", "dv_chunks", "latency", "GFLOP/s",
                              "mean_rel_L1", "abs_err max", "Status")),),
    "eltwise_add": (("", ("N", "(as 2-D)", "best config (cols/rows/tile)", "latency", "bandwidth", "mean_rel_L1",
                          "abs_err max", "Status")),),
    "silu_mul": (("", ("N", "(as 2-D)", "best config (herd_x/herd_y/tile_n)", "latency", "bandwidth", "mean_rel_L1",
                       "abs_err max", "Status")),),
    "rope": (("", ("rows", "head_dim", "best config (hx/hy)", "latency", "bandwidth", "mean_rel_L1", "abs_err max",
                   "Used by", "Status")),),
    "gelu": (("", ("N", "(as 2-D)", "best config (herd_x/herd_y/tile_n)", "latency", "bandwidth", "mean_rel_L1",
                   "abs_err max", "Status")),),
}
NO_JSON = ("gemv", "rmsnorm", "layernorm", "rope", "flash_attention", "eltwise_add", "silu_mul", "gelu")
PAGE_OF = {"gemm_bf16": "GEMM_bf16_in_bf16_out", "gemm_f32": "GEMM_bf16_in_fp32_out", "gemv": "GEMV_bf16",
           "rmsnorm": "RMSNorm_bf16", "layernorm": "LayerNorm_bf16", "flash_attention": "FlashAttention_bf16",
           "eltwise_add": "EltwiseAdd_bf16", "silu_mul": "SiLU_Mul_bf16", "rope": "RoPE_bf16", "gelu": "GELU_bf16"}
EMULATED = "🧪"

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


def _g(m: Measurement | None) -> float | None:
    if m is None:
        return None
    if m.gflops is not None:
        return m.gflops
    return m.throughput if m.spec.unit == "GFLOP/s" else None


def _bw(m: Measurement | None) -> float | None:
    return m.throughput if m is not None and m.spec.unit == "GB/s" else None


def _mark(m: Measurement | None, text: str) -> str:
    return f"{EMULATED} {text}" if m is not None and not m.on_hardware and text not in ("—", "") else text


def _num(x: float | None, m: Measurement | None, bold: bool = False, digits: int = 0) -> str:
    if x is None:
        return "—"
    text = f"{x:.{digits}f}" if digits else (f"{x:.0f}" if x >= 100 else f"{x:.1f}")
    if bold and m is not None and m.on_hardware:
        text = f"**{text}**"
    return _mark(m, text)


def status_cell(row: ShapeRow, m: Measurement | None = None) -> str:
    ms = [m] if m is not None else list(row.measurements)
    hw = [x for x in ms if x.on_hardware]
    if hw and not any(x.passed for x in hw):
        return "❌"
    if not hw:
        return f"{EMULATED} emulated (not NPU2)" if any(x.passed for x in ms) else "❌"
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


def _best(row: ShapeRow, method: str | None = None, tier: str | None = None) -> Measurement | None:
    ms = [m for m in row.measurements if (method is None or m.method.split(":")[-1] == method)
          and (tier is None or m.tier == tier)]
    return pick_best(ms) or (ms[-1] if ms else None)


Cells = Callable[[ShapeRow], list[str]]


def _index_cells(key: str, row: ShapeRow) -> list[str]:
    s, b = _shape(row), row.best or (row.measurements[-1] if row.measurements else None)
    t = b.tile if b else {}
    if key == "gemm_f32":
        ext, dire = _best(row, "external"), _best(row, "direct")
        return [f"{s['M']}×{s['K']}×{s['N']}", _tile3(t, ("tile_m", "tile_k_l2", "tile_k_l1", "tile_n")),
                _num(_g(ext), ext), _num(_g(dire), dire), sci2(b.mean_rel_L1 if b else None), _used(row),
                status_cell(row)]
    if key == "gemm_bf16":
        fc, dr, lo = _best(row, "fused-cast", "high"), _best(row, "drain", "high"), _best(row, None, "low")
        high = pick_best([m for m in (fc, dr) if m is not None and m.on_hardware])
        l1_high = high or fc or dr
        return [f"{s['M']}×{s['K']}×{s['N']}", _num(_g(fc), fc, bold=fc is high and fc is not None),
                _num(_g(dr), dr, bold=dr is high and dr is not None), _num(_g(lo), lo),
                f"{sci2(l1_high.mean_rel_L1 if l1_high else None)} / {sci2(lo.mean_rel_L1 if lo else None)}",
                _used(row), status_cell(row)]
    if key == "gemv":
        return [f"{s['M']}×{s['K']}", _tile3(t, ("herd_m", "tile_m", "m_input")), _num(_g(b), b, digits=1),
                sci2(b.mean_rel_L1 if b else None), _used(row), status_cell(row)]
    if key in ("rmsnorm", "layernorm"):
        cells = [f"{s['M']}×{s['N']}", str(t.get("herd_x", "—")), _mark(b, latency_text(b.latency_us if b else None)),
                 _mark(b, f"{_bw(b):.1f} GB/s") if _bw(b) is not None else "—", sci2(b.mean_rel_L1 if b else None)]
        if key == "layernorm":
            cells.append(sci2(b.max_abs if b else None))
        return cells + [_used(row), status_cell(row)]
    if key == "flash_attention":
        return [f"{s.get('lq')}×{s.get('lk')}", f"{s.get('dk')}/{s.get('dv')}",
                f"{s.get('heads')}/{s.get('kv_heads')}", "✓" if s.get("causal") else "✗",
                str(max(1, int(s.get("dv") or 64) // int(t.get("lkp", 64) or 64))),
                _mark(b, latency_text(b.latency_us if b else None)), _num(_g(b), b, bold=True),
                sci2(b.mean_rel_L1 if b else None), status_cell(row)]
    if key in ("eltwise_add", "silu_mul", "gelu"):
        tk = "tile" if key == "eltwise_add" else "tile_n"
        cells = [str(s["N"])]
        if key != "eltwise_add":
            cells.append("—")
        cells += [_tile3(t, ("herd_x", "herd_y", tk)), _mark(b, latency_text(b.latency_us if b else None)),
                  _mark(b, f"{_bw(b):.1f} GB/s") if _bw(b) is not None else "—", sci2(b.mean_rel_L1 if b else None)]
        if key != "eltwise_add":
            cells.append(sci2(b.max_abs if b else None))
        if key == "gelu":
            cells.append(_used(row))
        return cells + [status_cell(row)]
    if key == "rope":
        return [f"{s['rows']}×{s['head_dim']}", _tile3(t, ("herd_x", "herd_y")),
                _mark(b, latency_text(b.latency_us if b else None)),
                _mark(b, f"{_bw(b):.2f} GB/s") if _bw(b) is not None else "—", sci2(b.mean_rel_L1 if b else None),
                _used(row), status_cell(row)]
    raise KeyError(key)


def _details_cells(key: str, method: str, row: ShapeRow) -> list[str] | None:
    s = _shape(row)
    if key in ("gemm_bf16", "gemm_f32"):
        m = _best(row, method)
        if m is None:
            return None
        cells = [f"{s['M']}×{s['K']}×{s['N']}", _tile3(m.tile, ("tile_m", "tile_k_l2", "tile_k_l1", "tile_n")),
                 _num(_g(m), m), sci2(m.mean_rel_L1)]
        if key == "gemm_bf16" and method == "direct":
            cells.append(sci2(m.max_abs))
        if key == "gemm_f32":
            cells.append(_used(row))
        return cells + [status_cell(row, m)]
    b = row.best or (row.measurements[-1] if row.measurements else None)
    t = b.tile if b else {}
    if key == "gemv":
        return [f"{s['M']}×{s['K']}", _tile3(t, ("herd_m", "tile_m", "m_input")),
                _mark(b, latency_text(b.latency_us if b else None)), _num(_g(b), b, digits=1),
                sci2(b.mean_rel_L1 if b else None), sci2(b.max_rel if b else None), sci2(b.max_abs if b else None),
                _used(row), status_cell(row)]
    if key == "rmsnorm":
        return [f"{s['M']}×{s['N']}", str(t.get("herd_x", "—")), _mark(b, latency_text(b.latency_us if b else None)),
                _mark(b, f"{_bw(b):.1f} GB/s") if _bw(b) is not None else "—", sci2(b.mean_rel_L1 if b else None),
                sci2(b.max_rel if b else None), sci2(b.max_abs if b else None), _used(row), status_cell(row)]
    if key == "flash_attention":
        cells = _index_cells(key, row)
        return cells[:-1] + [sci2(b.max_abs if b else None), cells[-1]]
    if key == "layernorm":
        return _index_cells(key, row)
    if key in ("eltwise_add", "silu_mul", "gelu"):
        tk = "tile" if key == "eltwise_add" else "tile_n"
        return [str(s["N"]), "—", _tile3(t, ("herd_x", "herd_y", tk)),
                _mark(b, latency_text(b.latency_us if b else None)),
                _mark(b, f"{_bw(b):.1f} GB/s") if _bw(b) is not None else "—", sci2(b.mean_rel_L1 if b else None),
                sci2(b.max_abs if b else None), status_cell(row)]
    if key == "rope":
        return [str(s["rows"]), str(s["head_dim"]), _tile3(t, ("herd_x", "herd_y")),
                _mark(b, latency_text(b.latency_us if b else None)),
                _mark(b, f"{_bw(b):.2f} GB/s") if _bw(b) is not None else "—", sci2(b.mean_rel_L1 if b else None),
                sci2(b.max_abs if b else None), _used(row), status_cell(row)]
    raise KeyError(key)


def _md(headers: tuple[str, ...], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def render_index_table(page: KernelPage) -> str:
    key = page.spec.key
    return _md(INDEX[key], [_index_cells(key, r) for r in page.rows])


def render_details_tables(page: KernelPage) -> str:
    key = page.spec.key
    parts = []
    for method, headers in DETAILS[key]:
        rows = [c for r in page.rows if (c := _details_cells(key, method, r)) is not None]
        if method:
            parts.append(f"**{method}**\n")
        parts.append(_md(headers, rows))
    return "\n".join(parts)


# --- reading upstream tables ------------------------------------------------------------------------------


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


def _ints(cell: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", cell.replace("**", ""))]


def _status(cell: str) -> tuple[str, str]:
    """(verdict, caveat) of an upstream status cell."""
    if cell.startswith("❌"):
        return "FAIL", ""
    if cell.startswith("⚠"):
        return "PASS", "upstream-warning"
    return "PASS", ""


def _row_fields(key: str, header: tuple[str, ...], cells: list[str]) -> dict[str, Any] | None:
    """The kernel, shape, tile and figures of one upstream row (None: not a shape row of this kernel)."""
    c = dict(zip(header, cells))
    f: dict[str, Any] = {"tile": {}}
    try:
        if key == "gemv":
            M, K = _ints(c[header[0]])[:2]
            f["shape"] = {"M": M, "K": K}
            hm, tm, mi = (_ints(c.get(header[1], "")) + [None] * 3)[:3]
            f["tile"] = {k: v for k, v in (("herd_m", hm), ("tile_m", tm), ("m_input", mi)) if v is not None}
            f["gflops"] = _first_number(c.get("GFLOPS", ""))
        elif key in ("rmsnorm", "layernorm"):
            M, N = _ints(c[header[0]])[:2]
            f["shape"] = {"M": M, "N": N}
            if _ints(c.get("herd_x", "")):
                f["tile"] = {"herd_x": _ints(c["herd_x"])[0]}
        elif key == "rope":
            if header[0] == "rows":
                rows, hd = _ints(c["rows"])[0], _ints(c["head_dim"])[0]
            else:
                rows, hd = _ints(c[header[0]])[:2]
            f["shape"] = {"rows": rows, "head_dim": hd}
            hx = _ints(next((c[h] for h in header if "config" in h or h.startswith("herd")), ""))
            if len(hx) >= 2:
                f["tile"] = {"herd_x": hx[0], "herd_y": hx[1]}
        elif key == "flash_attention":
            lq, lk = _ints(c["lq×lk"])[:2]
            dk, dv = _ints(c["dk/dv"])[:2]
            hq, hkv = _ints(c["heads q/kv"])[:2]
            f["shape"] = {"lq": lq, "lk": lk, "dk": dk, "dv": dv, "heads_q": hq, "heads_kv": hkv,
                          "causal": c.get("causal", "").startswith("✓")}
            f["gflops"] = _first_number(c.get("GFLOP/s", ""))
        elif key in ("eltwise_add", "silu_mul", "gelu"):
            f["shape"] = {"N": _ints(c["N"])[0]}
            cfg = _ints(next((c[h] for h in header if "config" in h), ""))
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
    harness transcript (kernels.evidence, without an element count); a row that fails validation is skipped and
    named in the returned event's absence (`skipped_rows` gives them)."""
    from kernels.catalog import get_spec
    from kernels.evidence import EvidenceError, check_measurement
    from kernels.thresholds import kernel_tolerance
    from ledger.events import KernelVerified

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
                f = _row_fields(key, header, cells)
                if f is None:
                    skipped.append(f"{path.name}: {' | '.join(cells)}")
                    continue
                ident = (key, tuple(sorted(f["shape"].items())))
                if ident in seen:
                    continue
                kernel = get_spec(key).name
                contract = get_spec(key).default_contract
                rtol, atol = kernel_tolerance(kernel, contract)
                verdict, caveat = _status(f["status"])
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


# --- writing into an mlir-air checkout ----------------------------------------------------------------------


def _shape_of_cells(key: str, header: tuple[str, ...], cells: list[str]) -> tuple | None:
    f = _row_fields(key, header, cells)
    return tuple(sorted(f["shape"].items())) if f else None


def _gemm_shape(cells: list[str]) -> tuple | None:
    nums = _ints(cells[0]) if cells else []
    return tuple(nums[:3]) if len(nums) >= 3 else None


def merge_into_mlir_air(directory: str | Path, data: RegistryData) -> dict[str, int]:
    """Add the ledger's hardware-measured rows that `directory`'s (an mlir-air kernel_registry/) tables lack,
    in those tables' own columns, after each table's last row; also add missing shapes/methods to the GEMM
    JSON. Prose, headings and existing rows are left byte for byte. Returns {file: rows added}."""
    import json

    from registry.render_json import GEMM_JSON, method_entry, shape_entry

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
            if not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
            lines = text.split("\n")
            inserts: list[tuple[int, list[str]]] = []
            for method, header in tables:
                found = [t for t in parse_tables(text) if t[0] == header]
                if not found:
                    continue
                if key.startswith("gemm") and where == "details" and len(DETAILS[key]) > 1:
                    # several method tables may share a header: the n-th table with that header is the n-th method
                    same = [m for m, h in DETAILS[key] if h == header]
                    found = [found[same.index(method)]] if same.index(method) < len(found) else []
                for hdr, existing, _, end in found[:1]:
                    have = {(_gemm_shape(c) if key.startswith("gemm") else _shape_of_cells(key, hdr, c))
                            for c in existing}
                    new = []
                    for r in rows:
                        ident = (tuple(dict(r.shape)[k] for k in ("M", "K", "N")) if key.startswith("gemm")
                                 else tuple(sorted(dict(r.shape).items())))
                        if key == "flash_attention":
                            s = dict(r.shape)
                            ident = tuple(sorted({"lq": s["lq"], "lk": s["lk"], "dk": s["dk"], "dv": s["dv"],
                                                  "heads_q": s["heads"], "heads_kv": s["kv_heads"],
                                                  "causal": bool(s["causal"])}.items()))
                        if ident in have:
                            continue
                        cells = _index_cells(key, r) if where == "index" else _details_cells(key, method, r)
                        if cells is None or "🧪" in "".join(cells):
                            continue
                        new.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
                    if new:
                        inserts.append((end, new))
            for end, new in sorted(inserts, reverse=True):
                lines[end:end] = new
            n = sum(len(x) for _, x in inserts)
            if n:
                path.write_text("\n".join(lines), encoding="utf-8")
                added[str(path.relative_to(directory))] = added.get(str(path.relative_to(directory)), 0) + n
    for dtype, name in GEMM_JSON.items():
        path = directory / "details" / name
        if not path.is_file():
            continue
        doc = json.loads(path.read_text())
        page = data.page("gemm_bf16" if dtype == "bf16" else "gemm_f32")
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
            shape = index[mkn]
            for m in ours:
                if m.method not in shape["methods"]:
                    shape["methods"][m.method] = method_entry(m)
                    n += 1
        if n:
            # upstream writes \\u escapes (ensure_ascii): dumping the same way leaves its bytes unchanged
            path.write_text(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
            added[f"details/{name}"] = n
    return added
