"""GEMM registry JSON in mlir-air's schema, projected from the registry fold.

`render_gemm_json(data, output_dtype)` returns the bytes of `details/GEMM_bf16_in_<dtype>_out.json`:

    {_comment, kernel, output_dtype, target, measured, herd,
     shapes: [{M, K, N, used_by, methods: {<name>: {tile, gflops, mean_rel_L1, tier, herd?, ...}},
               best: {high, low?}, _note?}]}

so that mlir-air's own `registry_lookup.gemm_config(M, K, N, output_dtype, precision)` reads it unchanged.

Choices, stated once:

* Only PASS measurements on NPU2 target go in (upstream's tables only hold accepted configs; FAILs are in
  the markdown). A method's entry is its best PASS (fastest, earliest on ties).
* `shapes` holds NPU2 evidence only (npu2-measured harness rows and mlir-air's own imported rows; the class is
  re-derived from each row's facts, npu_kernels.provenance): `gemm_config` reads `best` and `gemm_config_method` reads
  `methods.<name>` as measured configs (mlir-air registry_lookup.py:38-95, :97-125 at e972f29), and their callers
  build NPU kernels from the answer. Stand-in rehearsal, unattested, emulated and torch PASS rows go to the
  top-level `_not_measured_on_npu2` list (shape, method, tier, tile, provenance), which mlir-air's lookup never
  reads; a shape with only such evidence is not in `shapes`, so the lookup raises instead of handing back an
  unmeasured config. A hardware PASS with no throughput recorded is listed (`gflops: null`, as upstream does) but
  cannot be `best`.
* A harness row filed under no method mlir-air's lookup knows for its contract (registry.fold's `unkeyed`) is in
  neither `methods` nor `best` (mlir-air's builders raise on a method they do not know, gemm_builder.py:101 at
  e972f29); it is listed apart, under the top-level `_method_unknown_to_lookup` (shape, contract, seq, why).
* A per-method `herd` is written only where upstream had one (imported rows remember it) or where a
  measured herd differs from the file's full-chip `herd` — exactly the override upstream's lookup surfaces.
* Key order: upstream's, fixed; shapes in first-measured order; methods hardware first, then by tier and
  name; `indent=2`, trailing newline.
"""

from __future__ import annotations

import json
import math
from typing import Any

from registry.catalog import PAGES
from registry.fold import RegistryMeasurement, RegistryData, ShapeRow, pick_best
from registry.text import plain

FULL_HERD = (8, 4)
# the pages with mlir-air's best-configuration JSON beside them (GEMM's, a page per output dtype; its module's
# `registry_page`), by output dtype: the page key and the JSON's file name under details/
_JSON_PAGES = sorted((p.output_dtype, key, p.json) for key, p in PAGES.items() if p.json)
GEMM_PAGES = {dtype: key for dtype, key, _ in _JSON_PAGES}
GEMM_JSON = {dtype: name for dtype, _, name in _JSON_PAGES}
_TIER_ORDER = {"high": 0, "low": 1}
_TILE_ORDER = ("tile_m", "tile_k_l2", "tile_k_l1", "tile_n")


def _comment(output_dtype: str) -> str:
    out = "BF16-out" if output_dtype == "bf16" else "FP32-out"
    return (
        f"Machine-readable registry for BF16-in / {out} GEMM on NPU2, projected by npu-ledger from its event "
        "ledger (KernelVerified events) -- do not edit: `ledger registry build` rewrites it and "
        "`ledger registry build --check` fails on hand edits. Read by registry_lookup.py gemm_config(). "
        "tile is {tile_m, tile_k_l2, tile_k_l1, tile_n}; herd 8x4 unless a method says otherwise. "
        "best.<tier> = fastest PASS measured on NPU2 (a harness run naming its device and toolchain, or imported "
        "from mlir-air's registry); rows not measured on NPU2 (stand-in rehearsal, unattested, emulated) are only "
        "listed under _not_measured_on_npu2, never in shapes."
    )


_NOT_TILE = ("herd_m", "herd_n", "method", "codegen")  # recorded on harness rows; upstream keeps them elsewhere


def _tile(tile: dict[str, Any]) -> dict[str, Any]:
    """upstream's `tile` object: tile_m, tile_k_l2, tile_k_l1, tile_n (the herd is the method's `herd`, the
    method its key, so a harness row's herd_m / herd_n / method are not repeated here)."""
    ordered = {k: plain(tile[k]) for k in _TILE_ORDER if k in tile}
    ordered.update({k: plain(tile[k]) for k in sorted(tile) if k not in ordered and k not in _NOT_TILE})
    return ordered


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _gflops(m: RegistryMeasurement) -> float | None:
    """Recorded gflops; for our own rows with only a latency, 2MKN / latency (imported rows stay verbatim)."""
    if m.gflops is not None or m.evidence == "imported" or m.throughput is None:
        return m.gflops
    return float(round(m.throughput))


def method_entry(m: RegistryMeasurement) -> dict[str, Any]:
    """One method's entry of a shape in mlir-air's `gemm.json` layout (tile, gflops, mean_rel_L1, tier, ...)."""
    entry: dict[str, Any] = {
        "tile": _tile(m.tile),
        "gflops": plain(_gflops(m)),
        "mean_rel_L1": _finite(m.mean_rel_L1),
    }
    extra = m.provenance.get("extra") if m.evidence == "imported" else None
    if isinstance(extra, dict):
        for k in sorted(extra):
            entry[k] = extra[k]
    entry["tier"] = m.tier
    if m.evidence == "imported":
        if m.provenance.get("herd_from") == "method" and m.herd is not None:
            entry["herd"] = list(m.herd)
    elif m.herd is not None and tuple(m.herd) != FULL_HERD:
        entry["herd"] = list(m.herd)
    if m.evidence != "imported" and m.note:
        entry["_note"] = m.note
    elif m.provenance.get("method_note"):
        entry["_note"] = m.provenance["method_note"]
    return entry


def shape_entry(row: ShapeRow) -> dict[str, Any] | None:
    """One shape's `gemm.json` entry: its passing methods (best measurement each) and the best method per
    tier on hardware; None when no measurement of the shape passed."""
    candidates = [m for m in row.measurements if m.passed and m.on_hardware]
    if not candidates:
        return None
    by_method: dict[str, list[RegistryMeasurement]] = {}
    for m in candidates:
        by_method.setdefault(m.method, []).append(m)
    reps = {name: pick_best(ms) for name, ms in by_method.items()}
    names = sorted(reps, key=lambda n: (_TIER_ORDER.get(reps[n].tier, 9), reps[n].tier, n))
    best: dict[str, str] = {}
    for tier in sorted({reps[n].tier for n in names}, key=lambda t: (_TIER_ORDER.get(t, 9), t)):
        eligible = [n for n in names if reps[n].tier == tier and _gflops(reps[n]) is not None]
        if eligible:
            best[tier] = max(eligible, key=lambda n: (_gflops(reps[n]), -reps[n].seq))
    shape = dict(row.shape)
    entry: dict[str, Any] = {
        "M": shape.get("M"),
        "K": shape.get("K"),
        "N": shape.get("N"),
        "used_by": " + ".join(row.used_by),
        "methods": {n: method_entry(reps[n]) for n in names},
    }
    if best:
        entry["best"] = best
    notes = [m.provenance["shape_note"] for m in row.measurements if m.provenance.get("shape_note")]
    if notes:
        entry["_note"] = notes[0]
    return entry


def gemm_document(data: RegistryData, output_dtype: str) -> dict[str, Any]:
    """The JSON document (a dict in upstream key order) for one GEMM output dtype."""
    if output_dtype not in GEMM_PAGES:
        raise ValueError(f"output_dtype must be one of {sorted(GEMM_PAGES)}, got {output_dtype!r}")
    page = data.page(GEMM_PAGES[output_dtype])
    shapes, elsewhere, apart = [], [], []
    measured = ""
    for row in page.rows:
        elsewhere += not_npu2_entries(row)
        apart += [{"M": dict(row.shape).get("M"), "K": dict(row.shape).get("K"), "N": dict(row.shape).get("N"),
                   "contract": m.contract, "seq": m.seq, "why": m.unkeyed} for m in row.measurements if m.unkeyed]
        entry = shape_entry(row)
        if entry is None:
            continue
        shapes.append(entry)
        measured = max([measured] + [m.measured[:7] for m in row.measurements if m.passed and m.on_hardware])
    doc = {
        "_comment": _comment(output_dtype),
        "kernel": "GEMM",
        "output_dtype": output_dtype,
        "target": "npu2",
        "measured": measured,
        "herd": list(FULL_HERD),
        "shapes": shapes,
    }
    if elsewhere:
        doc["_not_measured_on_npu2"] = elsewhere
    if apart:
        doc["_method_unknown_to_lookup"] = apart
    return doc


def not_npu2_entries(row: ShapeRow) -> list[dict[str, Any]]:
    """The shape's passing rows that are not NPU2 evidence, one per (method, evidence): where they came from and
    the tile they ran, no throughput (a rehearsal's or emulator's figure is not one mlir-air may build from)."""
    groups: dict[tuple[str, str], list[RegistryMeasurement]] = {}
    for m in row.measurements:
        if m.passed and not m.on_hardware:
            groups.setdefault((m.method, m.evidence), []).append(m)
    out = []
    for (method, _), ms in groups.items():
        m = pick_best(ms)
        out.append({"M": dict(row.shape).get("M"), "K": dict(row.shape).get("K"), "N": dict(row.shape).get("N"),
                    "method": method, "tier": m.tier, "tile": _tile(m.tile), "provenance": m.provenance_class,
                    "seq": m.seq})
    return out


def render_gemm_json(data: RegistryData, output_dtype: str) -> bytes:
    doc = gemm_document(data, output_dtype)
    return (json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def render_all_json(data: RegistryData) -> dict[str, bytes]:
    """{relpath under kernel_registry/: bytes} for both GEMM files."""
    return {f"details/{GEMM_JSON[d]}": render_gemm_json(data, d) for d in GEMM_JSON}
