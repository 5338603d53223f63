"""mlir-air's nightly perf history as npu-ledger reads and writes it: the schema of its ndjson lines, their check,
the fold of the imported rows, and the ledger's own figures written as such lines.

The nightly (`.github/workflows/nightlyPerfBenchmark.yml`) keeps, on the `perf-history` branch, one flat JSON
object per line. The fields, their order and their types are those `append_history.py` writes (e972f29
programming_examples/llms/bench/append_history.py:31-83):

* `history`        history.ndjson, one line per model per run (`_flat_rows`, :36-50): date, timestamp_utc,
                   run_id, air_sha, aie_hash, peano, model, runner, ttft_ms, decode_tokens_per_sec, context_len,
                   verify_status.
* `sweep`          sweep_history.ndjson, one line per (model, context) per run (`_flat_sweep_rows`, :69-83; the
                   points of sweep_decode.py, e972f29 sweep_decode.py:300-305): ... runner, context_len,
                   decode_tokens_per_sec, ms_per_token, status, verify_status.
* `prefill_sweep`  prefill_sweep_history.ndjson, one line per (model, padded prefill length) per run: the same
                   provenance fields, then the point fields of sweep_prefill.py (57bbed0 sweep_prefill.py:
                   `prefill_len`, `ttft_ms`, `prefill_tokens_per_sec`, `status`) and verify_status, as the later
                   docs loader reads them (generate_readme.py `load_llm_prefill_sweep_history`). No append_history.py
                   we could read writes this file; its field list is ours, from those two files.

Types: strings are str ("" where the nightly had no value: `tc.get(..., "")`), run_id an int (GitHub's run id) or
a str (append_history keeps a non-numeric id as given), a metric a finite number or null (the nightly writes null
for a metric its run did not produce), a context / length an int. `runner` and `verify_status` are absent from
rows written before they were carried through (the real history.ndjson has both kinds), so they may be absent; every
other field must be there, and a field the schema does not have is refused (a new field is a contract change).

What the ledger writes (`export_rows`): its Phase 6 / reverify PerformanceMeasured figures, one `history` line
per record (TTFT at its prefill length, decode tokens/s; `context_len` the prompt length, as extract_perf.py's
`prompt_len`), one `sweep` line at the decode context the figure was taken at and one `prefill_sweep` line at the
prefill length. Fields it cannot know are what the schema writes for missing values: `aie_hash` "" (the ledger
records aie-opt's version, not mlir-aie's commit), `air_sha` / `peano` "" off hardware. `run_id` is
"npu-ledger:<deployment>:<seq>" (a string, as the schema allows). `runner` names where the figure came from,
`npu-ledger/<class>` with the figure's kernels.provenance class. Only `npu2-measured` figures are exported unless
the caller asks for the others (`--include-not-measured`): mlir-air's published page keeps the runner label off
the page (programming_examples/test_perf_publish.py:176 at e972f29), so a modelled or rehearsal line fed to its
tools would read as a nightly measurement; in our own projections `source_of` names every line's class.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Sequence

from kernels.provenance import CPU_EMULATOR, MODELLED_NPU2, NPU2_MEASURED, STANDIN_REHEARSAL, UNATTESTED, \
    perf_row_provenance
from ledger.record import RecordedEvent

NIGHTLY_STREAM = "nightly:perf-history"
OUR_RUNNER = "npu-ledger/"
# our runner suffixes (kernels.provenance classes; "measured-npu2" in lines exported before the vocabulary)
SOURCES = {NPU2_MEASURED: "measured NPU2 (npu-ledger)", "measured-npu2": "measured NPU2 (npu-ledger)",
           MODELLED_NPU2: "modelled NPU2 (not measured)", CPU_EMULATOR: "CPU emulator (not NPU2)",
           STANDIN_REHEARSAL: "stand-in rehearsal (not NPU2)", UNATTESTED: "unattested (not NPU2)"}

_STR, _ID, _NUM, _INT, _OPT_INT = "str", "int|str", "number|null", "int", "int|null"
_PROVENANCE = (("date", _STR), ("timestamp_utc", _STR), ("run_id", _ID), ("air_sha", _STR), ("aie_hash", _STR),
               ("peano", _STR), ("model", _STR), ("runner", _STR))
SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {
    "history": _PROVENANCE + (("ttft_ms", _NUM), ("decode_tokens_per_sec", _NUM), ("context_len", _OPT_INT),
                              ("verify_status", _STR)),
    "sweep": _PROVENANCE + (("context_len", _INT), ("decode_tokens_per_sec", _NUM), ("ms_per_token", _NUM),
                            ("status", _STR), ("verify_status", _STR)),
    "prefill_sweep": _PROVENANCE + (("prefill_len", _INT), ("ttft_ms", _NUM), ("prefill_tokens_per_sec", _NUM),
                                    ("status", _STR), ("verify_status", _STR)),
}
FILES = {"history": "history.ndjson", "sweep": "sweep_history.ndjson", "prefill_sweep": "prefill_sweep_history.ndjson"}
MAY_BE_ABSENT = frozenset({"runner", "verify_status"})


class BadLine(ValueError):
    """Raised when a line is not one of the nightly schemas' rows (the message names the line and the field)."""


def series_of(row: dict[str, Any]) -> str:
    """Which file a row belongs to, by the fields only that file's rows have."""
    return "prefill_sweep" if "prefill_len" in row else "sweep" if "status" in row else "history"


def _type_ok(kind: str, v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if kind == _STR:
        return isinstance(v, str)
    if kind == _ID:
        return isinstance(v, (int, str))
    if kind == _INT:
        return isinstance(v, int)
    if kind == _OPT_INT:
        return v is None or isinstance(v, int)
    return v is None or (isinstance(v, (int, float)) and math.isfinite(v))


def row_problem(series: str, row: Any) -> str | None:
    """Why `row` is not a line of `series` (None: it is). Field names, presence and types, and date = the day of
    timestamp_utc (append_history derives one from the other)."""
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    schema = dict(SCHEMAS[series])
    extra = sorted(set(row) - set(schema))
    if extra:
        return f"field(s) {', '.join(extra)} are not in {FILES[series]}'s schema"
    missing = [k for k in schema if k not in row and k not in MAY_BE_ABSENT]
    if missing:
        return f"{FILES[series]} row without {', '.join(missing)}"
    for key, kind in schema.items():
        if key in row and not _type_ok(kind, row[key]):
            return f"{key} is {json.dumps(row[key])}, not {kind}"
    if row["date"] != row["timestamp_utc"][:10]:
        return f"date {row['date']!r} is not the day of timestamp_utc {row['timestamp_utc']!r}"
    return None


def parse_lines(text: str, file: str) -> list[tuple[int, str, dict[str, Any]]]:
    """(line number, series, row) of every non-blank line; raise `BadLine` at the first line that is not a row."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadLine(f"{file}:{n}: not JSON ({e.msg}): {line[:60]!r}") from None
        series = series_of(row) if isinstance(row, dict) else "history"
        why = row_problem(series, row)
        if why:
            raise BadLine(f"{file}:{n}: {why}")
        out.append((n, series, row))
    if not out:
        raise BadLine(f"{file}: no line to import")
    return out


def line_text(series: str, row: dict[str, Any]) -> str:
    """The row as append_history writes it: `json.dumps` of the fields in the schema's order (absent stay absent)."""
    return json.dumps({k: row[k] for k, _ in SCHEMAS[series] if k in row})


def source_of(row: dict[str, Any]) -> str:
    """The label of a row's figure: ours name their source in `runner`; every other row is the nightly's."""
    runner = row.get("runner") or ""
    if runner.startswith(OUR_RUNNER):
        return SOURCES.get(runner[len(OUR_RUNNER):], runner)
    return "measured NPU2 nightly (mlir-air)"


@dataclass(frozen=True)
class NightlyRow:
    seq: int
    series: str
    row: dict[str, Any]
    file: str
    problem: str | None  # the check re-run on the recorded row (None: it still validates)


def fold_nightly(events: Sequence[RecordedEvent]) -> list[NightlyRow]:
    """The imported rows of the nightly stream, in ledger order, each re-checked against its schema."""
    out = []
    for rec in events:
        if rec.stream_id == NIGHTLY_STREAM and rec.type == "NightlyPerfImported":
            p = rec.payload
            out.append(NightlyRow(rec.seq, p["series"], p["row"], p.get("file", ""), row_problem(p["series"], p["row"])))
    return out


# --- the ledger's own figures as nightly lines ------------------------------------------------------------------


def _figure_source(p: dict[str, Any]) -> str:
    """The figure's class (kernels.provenance), re-derived from the record's facts."""
    return perf_row_provenance(p)


def _stamp(recorded_at: str) -> str:
    return recorded_at.replace("+00:00", "Z")[:19] + "Z" if recorded_at else ""


def _r2(x: float | None) -> float | None:
    return None if x is None else round(float(x), 2)


def export_rows(events: Sequence[RecordedEvent], model_of,
                include_not_measured: bool = False) -> list[tuple[int, str, dict[str, Any]]]:
    """(seq, series, row) of every line the ledger holds: imported rows verbatim and, for each PerformanceMeasured
    with a TTFT or tokens/s figure measured on NPU2 (or any, with `include_not_measured`), its history / sweep /
    prefill_sweep lines (the module docstring)."""
    out = [(r.seq, r.series, r.row) for r in fold_nightly(events) if r.problem is None]
    gates: dict[str, list[bool]] = {}
    for rec in events:
        stream, p = rec.stream_id, rec.payload
        if rec.type == "PhaseStarted":
            gates[stream] = []
        elif rec.type == "TokenGateChecked":
            gates.setdefault(stream, []).append(bool(p.get("passed")))
        elif rec.type == "PerformanceMeasured" and (p.get("ttft_s") is not None or p.get("tokens_per_s") is not None):
            if not include_not_measured and _figure_source(p) != NPU2_MEASURED:
                continue
            name = stream.split(":", 1)[1]
            tc = p.get("toolchain") or {}
            ts = _stamp(str(rec.recorded_at))
            seen = gates.get(stream, [])
            base = {"date": ts[:10], "timestamp_utc": ts, "run_id": f"npu-ledger:{name}:{rec.seq}",
                    "air_sha": tc.get("mlir_air_commit") or "", "aie_hash": "", "peano": tc.get("peano") or "",
                    "model": model_of(name), "runner": OUR_RUNNER + _figure_source(p)}
            verify = ("pass" if all(seen) else "fail") if seen else ""
            ttft = _r2(p["ttft_s"] * 1e3) if p.get("ttft_s") is not None else None
            tps = _r2(p.get("tokens_per_s"))
            seq_len = int(p.get("n_prompt_tokens") or 0) or None
            ctx = ((p.get("profile") or {}).get("npu2") or {}).get("ctx")
            out.append((rec.seq, "history", {**base, "ttft_ms": ttft, "decode_tokens_per_sec": tps,
                                             "context_len": seq_len, "verify_status": verify}))
            if tps is not None and isinstance(ctx, int):
                ms = p.get("ms_per_token")
                out.append((rec.seq, "sweep", {**base, "context_len": ctx, "decode_tokens_per_sec": tps,
                                               "ms_per_token": _r2(ms) if ms is not None else None, "status": "ok",
                                               "verify_status": verify}))
            if ttft is not None and seq_len:
                out.append((rec.seq, "prefill_sweep", {**base, "prefill_len": seq_len, "ttft_ms": ttft,
                                                       "prefill_tokens_per_sec": round(seq_len / (ttft / 1e3), 1),
                                                       "status": "ok", "verify_status": verify}))
    return sorted(out, key=lambda x: x[0])
