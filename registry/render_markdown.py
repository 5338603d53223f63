"""Markdown halves of the kernel registry, rendered from the registry fold (`registry.fold`).

`render_supported_kernels(data)` -> `kernel_registry/supported_kernels.md`: the index (best throughput per
kernel) and one "tested shapes" table per kernel in that kernel's own columns (GEMM M/K/N, GEMV M/K,
RMSNorm M/N, RoPE rows/head_dim, FlashAttention lq/lk/dk/heads/causal, elementwise N).
`render_details(page)` -> `kernel_registry/details/<Page>.md`: datapath tier, tolerances (as recorded in
events, else docs/numerics.md), per-shape and per-method tables, caveats and notes, reproduce commands.
Pure: same data, same bytes.
"""

from __future__ import annotations

from npu_kernels.toolchain import toolchain_label
from registry.fold import NOT_NPU2, KernelPage, RegistryMeasurement, RegistryData, ShapeRow, not_npu2_mark
from registry.text import DASH, cell, fixed, num, scalar, sci, shape_args, shape_text, table

STATUS_GLYPH = {"verified": "✅", "caveat": "⚠️", "failed": "❌", "unattested": "❔", "rehearsal": "🎭", "emulated": "🧪"}
LEGEND = (
    "**Status legend**: ✅ verified on real NPU2 (a harness run that named its NPU2 device and toolchain, or "
    "imported from mlir-air's registry) · ⚠️ verified on NPU2 with a recorded caveat · ❔ unattested harness run "
    "(no device / toolchain reported) · 🎭 stand-in rehearsal (`ledger twin`: emulated numerics, modelled time) · "
    "🧪 emulated / torch evidence only · ❔ 🎭 🧪 are **not** measured on NPU2: never bold, never best over an NPU2 "
    "row, never in the JSON mlir-air's `registry_lookup` reads · ❌ failed"
)
_TILE_ORDER = ("tile_m", "tile_k_l2", "tile_k_l1", "tile_n")


from registry.mlir_air_tables import render_details_tables, render_index_table  # noqa: E402


def header(what: str, data: RegistryData) -> str:
    return (
        f"<!-- {what}: projected by npu-ledger from {data.n_events} KernelVerified events (seq <= "
        f"{data.last_seq}). Do not edit by hand: `ledger registry build` rewrites it and "
        f"`ledger registry build --check` fails on hand edits. -->\n"
    )


def tile_text(tile: dict) -> str | None:
    if not tile:
        return None
    if all(k in tile for k in _TILE_ORDER):
        rest = {k: v for k, v in tile.items() if k not in _TILE_ORDER}
        core = "/".join(scalar(tile[k]) for k in _TILE_ORDER)
        return core + ("".join(f", {k}={scalar(rest[k])}" for k in sorted(rest)) if rest else "")
    return ", ".join(f"{k}={scalar(tile[k])}" for k in sorted(tile))


def herd_text(m: RegistryMeasurement) -> str | None:
    return "×".join(str(h) for h in m.herd) if m.herd is not None else None


def tiles_text(m: RegistryMeasurement) -> str | None:
    if m.tiles_in_flight is None:
        return None
    text = f"{m.tiles_in_flight}/{m.tiles_target}" if m.tiles_target is not None else str(m.tiles_in_flight)
    return f"{text} ({m.tile_justification})" if m.tile_justification else text


def status_text(row: ShapeRow) -> str:
    glyph = STATUS_GLYPH[row.status]
    if row.best is not None and row.status in ("verified", "caveat"):
        return f"{glyph} {row.best.evidence if row.best.evidence != 'hardware' else row.best.source}"
    if row.best is not None and row.status in NOT_NPU2:
        return not_npu2_mark(row.best)
    return glyph


def throughput_text(m: RegistryMeasurement | None, unit: str, bold: bool = False) -> str | None:
    if m is None or m.throughput is None:
        return None
    text = f"{num(m.throughput)} {unit}"
    return f"**{text}**" if bold else text


def _shape_cells(page: KernelPage, row_shape) -> list[str]:
    have = dict(row_shape)
    return [scalar(have[c]) if c in have else DASH for c in page.columns]


def _shape_headers(page: KernelPage) -> list[str]:
    return list(page.columns) or ["shape"]


def _kernel_status(page: KernelPage) -> str:
    statuses = {row.status for row in page.rows}
    for status in ("verified", "caveat", "unattested", "rehearsal", "emulated", "failed"):
        if status in statuses:
            return STATUS_GLYPH[status]
    return "not measured yet"


def index_table(data: RegistryData) -> str:
    rows = []
    for page in data.pages:
        best = page.best
        if best is None:
            best_text = None
        else:
            row, m = best
            where = f"{m.method}, {shape_text(row.shape)}" + (f", herd {herd_text(m)}" if m.herd else "")
            tp = throughput_text(m, page.spec.unit, bold=True)
            if m.on_hardware:
                best_text = f"{tp} ({where})" if tp else f"({where}; no throughput recorded)"
            else:
                best_text = (f"— not measured on NPU2 (only {not_npu2_mark(m)} rows: {where}; NPU2 rows come from "
                             "`--executor mlir-air` runs on the hardware or `ledger registry import`)")
        counts = {s: sum(1 for r in page.rows if r.status == s) for s in STATUS_GLYPH}
        count_text = " ".join(f"{counts[s]}{STATUS_GLYPH[s]}" for s in STATUS_GLYPH if counts[s]) or "0"
        rows.append([
            page.spec.title, f"[`details/{page.spec.page}.md`](details/{page.spec.page}.md)", best_text,
            f"{len(page.rows)} ({count_text})", _kernel_status(page),
        ])
    return table(["Kernel", "Detail", "Best measured throughput (NPU2)", "Shapes", "Status"], rows)


def toolchain_text(m: RegistryMeasurement) -> str:
    """Which toolchain measured the row (npu_kernels.toolchain label; "unrecorded" for rows older than provenance)."""
    return toolchain_label(m.provenance.get("toolchain"))


def shapes_table(page: KernelPage) -> str:
    unit = page.spec.unit
    headers = _shape_headers(page) + [
        "best method", "best tile", f"throughput ({unit})", "mean_rel_L1", "max_abs", "contracts",
        "methods measured", "executor", "Used by", "measured", "toolchain", "Status",
    ]
    rows = []
    for row in page.rows:
        b = row.best
        rows.append(_shape_cells(page, row.shape) + [
            b.method if b else None,
            tile_text(b.tile) if b else None,
            (num(b.throughput) if b.on_hardware else f"{not_npu2_mark(b)}: {num(b.throughput)}")
            if b and b.throughput is not None else None,
            sci(b.mean_rel_L1) if b else None,
            sci(b.max_abs) if b else None,
            ", ".join(row.contracts),
            ", ".join(row.methods),
            b.executor if b else ", ".join(sorted({m.executor for m in row.measurements})),
            " + ".join(row.used_by),
            row.measured,
            toolchain_text(b) if b else None,
            status_text(row),
        ])
    return table(headers, rows)


def render_supported_kernels(data: RegistryData) -> str:
    parts = [
        header("supported_kernels.md", data),
        "# Supported Kernels Registry — LLM Deployment on NPU2\n",
        "Index of the leaf kernels validated for decoder-only LLM deployment on AMD NPU2 (Strix, AIE2P): "
        "which shapes were tested, the best measured configuration and throughput, and which deployments use "
        "them. Per-kernel detail (datapath, tolerances, every method measured, how to reproduce) lives in "
        "`details/<Kernel>.md`; the GEMM rows are also in `details/GEMM_bf16_in_*_out.json`, the files "
        "mlir-air's `registry_lookup.gemm_config()` reads.\n",
        LEGEND + "\n",
        "---\n",
        "## Kernels\n",
        index_table(data),
    ]
    for page in data.pages:
        if not page.rows:
            continue
        parts += [
            "---\n",
            f"## {page.spec.title} — tested shapes\n",
            (f"`{page.spec.math}`. " if page.spec.math else "")
            + f"Best = fastest PASS on NPU2 ({page.spec.unit}); full per-method data in "
            f"[`details/{page.spec.page}.md`](details/{page.spec.page}.md).\n",
            shapes_table(page),
            "In mlir-air's own columns for this kernel (`kernel_registry/supported_kernels.md`; 🧪 = emulated, "
            "never best, never bold):\n",
            render_index_table(page),
        ]
    return "\n".join(parts)


def _tolerance_table(page: KernelPage) -> str:
    if page.tolerances:
        rows = [[t.contract, sci(t.rtol), sci(t.atol), n, "recorded in events"] for t, n in page.tolerances]
    else:
        rows = [[t.contract, sci(t.rtol), sci(t.atol), 0, "docs/numerics.md (no events yet)"] for t in page.spec.tolerances]
    return table(["contract", "rtol", "atol", "events", "source"], rows)


def _verdict(m: RegistryMeasurement) -> str:
    if m.implausible:
        return "refused: implausible"
    return "kept apart: method unknown" if m.unkeyed else m.verdict


def _method_table(page: KernelPage) -> str:
    unit = page.spec.unit
    headers = _shape_headers(page) + [
        "contract", "tier", "method", "evidence", "executor", "tile", "herd", "tiles in flight",
        f"throughput ({unit})", "latency (µs)", "mean_rel_L1", "max_abs", "rtol / atol", "runs (PASS/total)",
        "verdict", "seq",
    ]
    rows = []
    for row in page.rows:
        for m in row.representatives():
            same = [x for x in row.measurements if (x.contract, x.method, x.evidence) == (m.contract, m.method, m.evidence)]
            rows.append(_shape_cells(page, row.shape) + [
                m.contract, m.tier, m.method, m.evidence, m.executor, tile_text(m.tile), herd_text(m),
                tiles_text(m), num(m.throughput) if m.on_hardware or m.throughput is None
                else f"{not_npu2_mark(m)}: {num(m.throughput)}", fixed(m.latency_us, 1), sci(m.mean_rel_L1), sci(m.max_abs),
                f"{sci(m.rtol)} / {sci(m.atol)}", f"{sum(1 for x in same if x.passed)}/{len(same)}",
                _verdict(m),
                m.seq,
            ])
    return table(headers, rows)


def _notes(page: KernelPage) -> list[str]:
    lines: list[str] = []
    for row in page.rows:
        for c in row.caveats:
            lines.append(f"- ⚠️ **{shape_text(row.shape)}**: {cell(c)}")
        if row.status in NOT_NPU2 and row.best is not None:
            lines.append(f"- {not_npu2_mark(row.best)} — **{shape_text(row.shape)}**: no NPU2 evidence yet; "
                         "measure it on NPU2.")
        seen: set[str] = set()
        for m in row.measurements:
            if m.note and m.note not in seen:
                seen.add(m.note)
                lines.append(f"- **{shape_text(row.shape)}** ({m.method}, seq {m.seq}): {cell(m.note)}")
    return lines


def _reproduce(page: KernelPage) -> str:
    commands: list[str] = []
    recorded: list[str] = []
    for row in page.rows:
        for contract in row.contracts:
            commands.append(
                f"ledger kernel run {page.spec.kernel} --shape {shape_args(row.shape)} --contract {contract} "
                f"--executor mlir-air"
            )
        for m in row.measurements:
            cmd = m.provenance.get("command")
            if isinstance(cmd, str) and cmd and cmd not in recorded:
                recorded.append(cmd)
    if not commands:
        commands.append(
            f"ledger kernel run {page.spec.kernel} --shape <dims> --contract {page.spec.default_contract} "
            f"--executor mlir-air"
        )
    text = (
        "Every row re-runs with one command; `--executor emulated` (the default) or `--executor torch` runs the "
        "same check without an NPU (recorded as 🧪, never as an NPU2 figure). `ledger registry build` then "
        "rewrites these pages.\n\n```bash\n" + "\n".join(commands) + "\n```\n"
    )
    if recorded:
        text += "\nHarness commands as recorded in the events' provenance:\n\n```bash\n" + "\n".join(recorded) + "\n```\n"
    return text


def render_details(page: KernelPage, data: RegistryData) -> str:
    spec = page.spec
    cols = " × ".join(page.columns or spec.columns) or "as recorded"
    parts = [
        header(f"details/{spec.page}.md", data),
        f"# {spec.title} — Kernel Detail\n",
        (f"> `{spec.math}`. " if spec.math else "> ") + f"Shapes written as `{cols}`.\n>\n"
        "> Companion: [`../supported_kernels.md`](../supported_kernels.md). Scope: NPU2 (Strix / AIE2P).\n",
        "---\n",
        "## Numerical datapath (tier)\n",
        (f"{spec.datapath}.\n\n" if spec.datapath else "")
        + f"NPU2-measured mean_rel_L1 (mlir-air registry, docs/numerics.md): {spec.npu2_mean_rel_L1 or DASH}. "
        f"Target tiles in flight: {spec.target_tiles if spec.target_tiles is not None else DASH}.\n",
        "## Tolerances\n",
        "Verdict = every element of the full output satisfies `|out - ref| <= atol + rtol * |ref|` against the "
        "FP32 reference (0 mismatches); `mean_rel_L1 = mean|out-ref| / mean|ref|` is the headline figure. "
        "Never gated on cosine.\n",
        _tolerance_table(page),
        "## Tested shapes\n",
    ]
    if page.rows:
        parts.append(LEGEND + "\n")
        parts.append(shapes_table(page))
        parts += ["### In mlir-air's columns\n", f"The tested-shapes table(s) of mlir-air's `details/{spec.page}.md`, "
                  "column for column (🧪 = emulated, never best, never bold):\n", render_details_tables(page)]
        parts += ["### Every method measured\n", "One row per (shape, contract, method, evidence): its best PASS, "
                  "else its latest run.\n", _method_table(page)]
        notes = _notes(page)
        if notes:
            parts += ["## Caveats and notes\n", "\n".join(notes) + "\n"]
    else:
        parts.append("No shape measured yet.\n")
    parts += ["## How to reproduce\n", _reproduce(page)]
    return "\n".join(parts)


def render_all_markdown(data: RegistryData) -> dict[str, bytes]:
    """{relpath under kernel_registry/: bytes} for the index and every details page."""
    out = {"supported_kernels.md": render_supported_kernels(data).encode("utf-8")}
    for page in data.pages:
        out[f"details/{page.spec.page}.md"] = render_details(page, data).encode("utf-8")
    return out
