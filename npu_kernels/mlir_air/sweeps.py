"""mlir-air's nightly sweeps, read as a model directory's curve on hardware (issues #25 item 4, #38 items 2-3).

Prefill: `programming_examples/llms/bench/sweep_prefill.py` (at 57bbed0b, after a32bef3) walks the padded prefill
length: for each L it runs `make -f <model dir>/Makefile profile-prefill CTX=L` (run_point), refuses a point whose
engines say they were built at another length (`constructing seq_len=N`: status `wrong_seq_len: ...`), reads
`Time to first token (TTFT): <s>s`, and prints, per length, `[sweep_prefill] <model> L=<L> ...` then
`[sweep_prefill]   <point as one JSON object>` - `prefill_len`, `ttft_ms`, `prefill_tokens_per_sec` (L / TTFT),
`status`, optional `min_ttft_ms`, `npu_dispatch_ms`, `host_ms`, `first_token_gate` - and writes the record
`{model, axis: "prefill_len", metric: "ttft_ms", timestamp_utc, points}` to --out; it exits 1 when a point failed
unforgiven.

Statuses (sweep_prefill.py@57bbed0b `_classify`, `EXPECTABLE`, main): "ok"; a failure named by its cause
(`no_registry_shape`, `bd_exhaustion`, `method_tile_mismatch`, `stitcher_mixed_tile_m`, `device_fail`, `host_oom`,
`timeout`, `no_number`, `fail: ...`, `wrong_seq_len: engines built at N`); and "expected_fail" with the cause moved
to `detail` - only for a length given in --expect-fail AND a cause in the closed list `PREFILL_EXPECTABLE`.
`wrong_seq_len` is never forgiven: its number would belong to another point (the guard), so it fails the run even
at a length listed as expected to fail.

Decode: `bench/sweep_decode.py` (at e972f29) sweeps only the fused (Q4NX) decode superkernel (template builds per
context). `bench/sweep_decode_runtime.py` (at c0dabd80) sweeps a bf16 model directory whose context is a run-time
value: ONE `make -f <model dir>/Makefile profile-decode CONTEXTS=c1,c2,...` prints, per context,
`[bench] decode ctx=<C> median <ms> ms min <ms> ms (<tok/s> tok/s)` (POINT_RE); a context with no such line gets
the run's status (`host_oom`, `xrt_incomplete`, `fail: ...`, `no_number`; `timeout` when the sweep timed out); it
writes the record `{model, axis: "context_len", metric: "decode_tokens_per_sec", timestamp_utc, runner, points}`
(points: `context_len`, `decode_tokens_per_sec`, `ms_per_token` (the median), `min_ms_per_token`, `status`,
`detail`) to --out - the same record as sweep_decode.py's - and prints only `[sweep] ...` summary lines, so the
record file is what is read. --expect-fail forgives only `DECODE_EXPECTABLE`.

`parse_prefill_sweep(transcript)` reads the per-point JSON lines; `parse_decode_sweep(record_text)` the runtime
decode sweep's --out record; `hardware_curve(points, modelled, provenance, decode=...)` is the curve Phase 6
records (source "mlir-air-sweep", label the figures' npu_kernels.provenance class: "measured NPU2" only from a device).
An expected failure is a point with its cause and no figure (never a measured point); an unforgiven failure is
listed in the axis' `failures` and Phase 6 fails on it. A transcript with no point line is a TranscriptError,
never a curve.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from npu_kernels.model.config import ModelConfig
from npu_kernels.perf.trend import flag_curve
from npu_kernels.provenance import SHORT, figure_provenance
from npu_kernels.mlir_air.output import TranscriptError

SWEEP_PREFILL_SRC = "mlir-air programming_examples/llms/bench/sweep_prefill.py@57bbed0 (run_point, _classify, main)"
SWEEP_DECODE_SRC = "mlir-air programming_examples/llms/bench/sweep_decode.py@e972f29 (build_templates, bench_decode)"
SWEEP_DECODE_RUNTIME_SRC = "mlir-air programming_examples/llms/bench/sweep_decode_runtime.py@c0dabd80 (run_sweep, main)"
POINT_LINE = re.compile(r"^\[sweep_prefill\]\s+(\{.*?)\s*$", re.M)
SOURCE = "mlir-air-sweep"
EXPECTED = "expected_fail"
# the causes --expect-fail may forgive: sweep_prefill.py@57bbed0b EXPECTABLE (wrong_seq_len deliberately absent)
PREFILL_EXPECTABLE = frozenset({"no_registry_shape", "method_tile_mismatch", "stitcher_mixed_tile_m",
                                "bd_exhaustion", "device_fail", "host_oom", "timeout"})
# sweep_decode_runtime.py@c0dabd80 EXPECTABLE (the rule sweep_decode.py applies): reached the hardware, not held
DECODE_EXPECTABLE = frozenset({"xrt_incomplete", "host_oom", "timeout"})
PREFILL_FIGURES = ("ttft_ms", "prefill_tokens_per_sec", "min_ttft_ms", "npu_dispatch_ms", "host_ms")
DECODE_FIGURES = ("decode_tokens_per_sec", "ms_per_token", "min_ms_per_token")


def cause(status: str) -> str:
    """A status's cause word: `wrong_seq_len: engines built at 2048` -> `wrong_seq_len` (main's `split(":")[0]`)."""
    return str(status).split(":")[0].strip()


NOT_SWEPT = "not_swept"  # a length of the curve the sweep was not asked for (past the window): no failure


def point_failure(pt: Mapping[str, Any], axis_key: str, expectable: frozenset[str]) -> str | None:
    """None when the point is measured or an expected failure mlir-air's rule forgives; else why the run failed."""
    status = str(pt.get("status", ""))
    if status == "ok":
        return None
    where = f"{axis_key}={pt.get(axis_key)}"
    if status == EXPECTED:
        detail = str(pt.get("detail") or "")
        if cause(detail) in expectable:
            return None
        return (f"{where}: expected_fail with cause {detail or '(none)'!r}, which --expect-fail never forgives "
                f"(forgivable: {', '.join(sorted(expectable))})")
    return f"{where}: {status}"


def _kept(pt: dict[str, Any], figures: tuple[str, ...]) -> dict[str, Any]:
    """The point as the curve keeps it: a point that is not "ok" carries its status and cause, never a figure."""
    if pt.get("status") == "ok":
        return dict(pt)
    return {**{k: v for k, v in pt.items() if k not in figures}, **{figures[0]: None}}


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


def parse_decode_sweep(record_text: str) -> list[dict[str, Any]]:
    """The points of sweep_decode_runtime.py's --out record (see the module docstring), in order."""
    try:
        rec = json.loads(record_text)
    except json.JSONDecodeError as e:
        raise TranscriptError(f"the decode sweep's record is not JSON ({e})", record_text[-2000:]) from e
    if not isinstance(rec, dict) or rec.get("axis") != "context_len" or not isinstance(rec.get("points"), list):
        raise TranscriptError("the decode sweep's record has no context_len axis / points", record_text[-2000:])
    points = []
    for pt in rec["points"]:
        if not isinstance(pt, dict) or not isinstance(pt.get("context_len"), int) or "status" not in pt:
            raise TranscriptError(f"a decode sweep point has no context_len / status: {json.dumps(pt)[:120]}",
                                  record_text[-2000:])
        tps = pt.get("decode_tokens_per_sec")
        if pt["status"] == "ok" and not (isinstance(tps, (int, float)) and tps > 0):
            raise TranscriptError(f"the decode sweep point at ctx={pt['context_len']} is ok but has no tokens/s",
                                  record_text[-2000:])
        points.append(pt)
    if not points:
        raise TranscriptError("the decode sweep's record holds no point", record_text[-2000:])
    return points


def _axis(points: list[dict[str, Any]], axis_key: str, metric: str, figures: tuple[str, ...],
          expectable: frozenset[str], detail: str) -> dict[str, Any]:
    out: dict[str, Any] = {"axis": axis_key, "metric": metric, "points": [_kept(p, figures) for p in points]}
    failures = [f for f in (point_failure(p, axis_key, expectable) for p in points if p.get("status") != NOT_SWEPT) if f]
    if failures:
        out["failures"] = failures
    if not points:
        out.update(status="not_swept", detail=detail)
    return out


def hardware_curve(points: list[dict[str, Any]], modelled: Mapping[str, Any], provenance: Mapping[str, Any],
                   *, prefill_detail: str = "", decode_detail: str = "", decode: list[dict[str, Any]] | None = None,
                   requested: list[int] | None = None, skipped: Mapping[int, str] | None = None,
                   config: ModelConfig | None = None) -> dict[str, Any]:
    """The curve a device's Phase 6 records: the prefill sweep's points, every `requested` length it printed
    nothing for as a failed point and every `skipped` length as not swept, each with why (`every_point`; with
    neither and no point: none, `prefill_detail` saying why), the runtime decode sweep's (`decode`; None: not
    swept, `decode_detail` saying why), each axis' unforgiven `failures`, and the modelled curve beside them. A
    point marked "ok" whose time breaks the curve's trend carries `trend_break` (npu_kernels.perf.trend; judged
    against `config`'s prefill FLOPs when given, else the quadratic ceiling); it stays a point, not a failure."""
    prefill = _axis(every_point(points, requested, skipped, "" if points else prefill_detail), "prefill_len",
                    "ttft_ms", PREFILL_FIGURES, PREFILL_EXPECTABLE, prefill_detail)
    why_not = decode_detail or (f"{SWEEP_DECODE_SRC} sweeps the fused (Q4NX) decode only and this model directory's "
                                f"runtime decode sweep ({SWEEP_DECODE_RUNTIME_SRC}) printed no point")
    dec = _axis(decode or [], "context_len", "decode_tokens_per_sec", DECODE_FIGURES, DECODE_EXPECTABLE, why_not)
    cls = figure_provenance("mlir-air-profile", provenance)  # a stand-in's sweep prints modelled figures
    return flag_curve({"source": SOURCE, "label": SHORT[cls], "provenance_class": cls, "layout": SWEEP_PREFILL_SRC,
            "decode_layout": SWEEP_DECODE_RUNTIME_SRC, "prefill": prefill, "decode": dec,
            "notes": ["prefill point at L: `make profile-prefill CTX=L`, the engines built for L (sweep_prefill.py)",
                      "decode point at C: one `make profile-decode CONTEXTS=...` over every context "
                      "(sweep_decode_runtime.py); the modelled curve is beside (modelled_npu2)",
                      "expected_fail: a point --expect-fail forgave, its cause in `detail`, no figure"],
            "modelled_npu2": dict(modelled), "provenance": dict(provenance)}, config)
