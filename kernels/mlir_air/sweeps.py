"""mlir-air's nightly sweeps, read as a model directory's curve on hardware (issue #25 item 4).

`programming_examples/llms/bench/sweep_prefill.py` (at a32bef3, after e972f29) walks the padded prefill length:
for each L it runs `make -f <model dir>/Makefile profile-prefill CTX=L` (run_point), refuses a point whose
engines say they were built at another length (`constructing seq_len=N`: status `wrong_seq_len: ...`), reads
`Time to first token (TTFT): <s>s`, and prints, per length, `[sweep_prefill] <model> L=<L> ...` then
`[sweep_prefill]   <point as one JSON object>` - `prefill_len`, `ttft_ms`, `prefill_tokens_per_sec`
(L / TTFT), `status` ("ok", "expected_fail" with the cause in `detail`, or the failure), optional
`npu_dispatch_ms`, `host_ms`, `first_token_gate` - and writes the record `{model, axis: "prefill_len", metric:
"ttft_ms", timestamp_utc, points}` to --out; it exits 1 when a length outside --expect-fail failed.

`bench/sweep_decode.py` (at e972f29) walks the context, but only for the fused (Q4NX) decode superkernel: it
builds `_compile_decode_build LBUILD=<ctx>` templates and times them with fused_decode's `bench_decode.exe` or
`bench_qwen_decode.py`. A bf16 model directory (what `ledger scaffold` writes) has no such build, so on hardware
the decode axis is recorded as not swept, the modelled curve beside it.

`parse_prefill_sweep(transcript)` reads the per-point JSON lines (the lines are the contract: the --out file
is the same objects); `hardware_curve(points, modelled, provenance)` is the curve Phase 6 records (source
"mlir-air-sweep", label the figures' kernels.provenance class: "measured NPU2" only from a device). A transcript with no point line is a TranscriptError, never a curve.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from kernels.provenance import SHORT, figure_provenance
from kernels.mlir_air.output import TranscriptError

SWEEP_PREFILL_SRC = "mlir-air programming_examples/llms/bench/sweep_prefill.py@a32bef3 (run_point, main)"
SWEEP_DECODE_SRC = "mlir-air programming_examples/llms/bench/sweep_decode.py@e972f29 (build_templates, bench_decode)"
POINT_LINE = re.compile(r"^\[sweep_prefill\]\s+(\{.*?)\s*$", re.M)
SOURCE = "mlir-air-sweep"


def parse_prefill_sweep(transcript: str) -> list[dict[str, Any]]:
    """The points sweep_prefill.py printed, in order (see the module docstring)."""
    points = []
    for m in POINT_LINE.finditer(transcript):
        try:
            pt = json.loads(m.group(1))
        except json.JSONDecodeError as e:
            raise TranscriptError(f"a [sweep_prefill] point line is not JSON ({e}): {m.group(1)[:120]}", transcript) from e
        if not isinstance(pt, dict) or not isinstance(pt.get("prefill_len"), int) or "status" not in pt:
            raise TranscriptError(f"a [sweep_prefill] point has no prefill_len / status: {m.group(1)[:120]}", transcript)
        ttft = pt.get("ttft_ms")
        if pt["status"] == "ok" and not (isinstance(ttft, (int, float)) and ttft > 0):
            raise TranscriptError(f"the [sweep_prefill] point at L={pt['prefill_len']} is ok but has no TTFT", transcript)
        points.append(pt)
    if not points:
        raise TranscriptError("no `[sweep_prefill]   {...}` point line (the lines sweep_prefill.py prints per length)",
                              transcript)
    return points


def every_point(points: list[dict[str, Any]], requested: list[int] | None = None,
                skipped: Mapping[int, str] | None = None, failed: str = "") -> list[dict[str, Any]]:
    """The sweep's points plus one for every length it was asked for and printed nothing for (status "missing",
    or "failed" with `failed` when the whole sweep printed nothing, saying why), and one for every length of the
    curve not asked for (`skipped`: length -> why, status "not_swept"), by length: no length is silently dropped."""
    out = [{**p, "ttft_ms": p.get("ttft_ms") if p.get("status") == "ok" else None} for p in points]
    seen = {p["prefill_len"] for p in out}
    for L in requested or []:
        if L not in seen:
            out.append({"prefill_len": L, "ttft_ms": None, "status": "failed" if failed else "missing",
                        "detail": failed or "requested (SWEEP_LENGTHS) but sweep_prefill.py printed no point for it"})
            seen.add(L)
    for L, why in (skipped or {}).items():
        if L not in seen:
            out.append({"prefill_len": L, "ttft_ms": None, "status": "not_swept", "detail": f"not requested: {why}"})
    return sorted(out, key=lambda p: p["prefill_len"])


def hardware_curve(points: list[dict[str, Any]], modelled: Mapping[str, Any], provenance: Mapping[str, Any],
                   *, prefill_detail: str = "", decode_detail: str = "", requested: list[int] | None = None,
                   skipped: Mapping[int, str] | None = None) -> dict[str, Any]:
    """The curve a device's Phase 6 records: the prefill sweep's points (measured), every `requested` length it
    printed nothing for as a failed point and every `skipped` length as not swept, each with why (`every_point`;
    with neither and no point: none, `prefill_detail` saying why), no decode points (see the module docstring)
    and the modelled curve beside them."""
    prefill: dict[str, Any] = {"axis": "prefill_len", "metric": "ttft_ms",
                               "points": every_point(points, requested, skipped, "" if points else prefill_detail)}
    if not points:
        prefill.update(status="not_swept", detail=prefill_detail)
    cls = figure_provenance("mlir-air-profile", provenance)  # a stand-in's sweep prints modelled figures
    return {"source": SOURCE, "label": SHORT[cls], "provenance_class": cls, "layout": SWEEP_PREFILL_SRC,
            "prefill": prefill,
            "decode": {"axis": "context_len", "metric": "decode_tokens_per_sec", "points": [],
                       "status": "not_swept",
                       "detail": decode_detail or f"{SWEEP_DECODE_SRC} sweeps the fused (Q4NX) decode only; a bf16 "
                                                  "model directory has no decode template build to sweep"},
            "notes": ["prefill point at L: `make profile-prefill CTX=L`, the engines built for L (sweep_prefill.py)",
                      "decode: not swept on this model directory; the modelled curve is beside (modelled_npu2)"],
            "modelled_npu2": dict(modelled), "provenance": dict(provenance)}
