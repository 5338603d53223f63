"""mlir-air's nightly perf history as npu-ledger reads and writes it: the schema of its ndjson lines, their check,
the fold of the imported rows, and the ledger's own figures written as such lines.

The nightly (`.github/workflows/nightlyPerfBenchmark.yml`) keeps, on the `perf-history` branch, one flat JSON
object per line (`json.dumps` of a dict). The fields, their order, their types and the statuses a sweep point may
carry are pinned in the mlir-air contract (npu_kernels/mlir_air/contract.toml `[nightly.<series>]`, each with the file
and commit it was read at); the schemas below are built from it:

* `history`        history.ndjson, one line per model per run (append_history.py `_flat_rows`, e972f29 :36-50).
* `sweep`          sweep_history.ndjson, one line per (model, context) per run (`_flat_sweep_rows`, :69-83).
* `prefill_sweep`  prefill_sweep_history.ndjson, one line per (model, padded prefill length) per run, as the file
                   itself holds them (perf-history e1c524ce, first run 2026-08-28): the provenance fields, then
                   prefill_len, ttft_ms, npu_dispatch_ms, prefill_tokens_per_sec, first_token_gate, status, detail
                   and verify_status. A model that failed has null figures and a status "fail: <first error line>".

Types: strings are str ("" where the nightly had no value: `tc.get(..., "")`), run_id an int (GitHub's run id) or
a str (append_history keeps a non-numeric id as given), a metric a finite number or null (the nightly writes null
for a metric its run did not produce), a context / length an int. `runner` and `verify_status` are absent from
history / sweep rows written before they were carried through (the real files have both kinds), so they may be
absent; every other field must be there, and a field or a status the contract does not have is refused (a new one
is a contract change). A line is written back as `json.dumps` of its fields in the contract's order, so an
imported file is exported byte for byte.

What the ledger writes (`export_rows`): its Phase 6 / reverify PerformanceMeasured figures, one `history` line
per record (TTFT at its prefill length, decode tokens/s; `context_len` the prompt length, as extract_perf.py's
`prompt_len`), one `sweep` line at the decode context the figure was taken at and one `prefill_sweep` line at the
prefill length. Fields it cannot know are what the schema writes for missing values: `aie_hash` "" (the ledger
records aie-opt's version, not mlir-aie's commit), `air_sha` / `peano` "" off hardware, `npu_dispatch_ms` null,
`first_token_gate` and `detail` "". `run_id` is "npu-ledger:<deployment>:<seq>" (a string, as the schema allows).
`runner` names where the figure came from, `npu-ledger/<class>` with the figure's npu_kernels.provenance class.

Only `npu2-measured` figures are exported unless the caller asks for the others (`modelled`, `--modelled`), and
then each such line's `model` carries its class, e.g. "smollm2_135m_instruct (modelled NPU2)": mlir-air's
dashboard (programming_examples/generate_readme.py, e972f29 :720-870) renders every line as a measurement on its
NPU2 runner and never shows `runner`, so the model name is the one field of the line it prints that can say so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Sequence

from npu_kernels.perf.constants import PEAK_FLOPS
from npu_kernels.perf.evidence import printed_unit
from npu_kernels.thresholds import DDR_BANDWIDTH_BYTES_S
from npu_kernels.mlir_air.contract import NIGHTLY
from npu_kernels.provenance import CPU_EMULATOR, MODELLED_NPU2, NPU2_MEASURED, SHORT, STANDIN_REHEARSAL, UNATTESTED, \
    perf_row_provenance
from ledger.record import RecordedEvent

NIGHTLY_STREAM = "nightly:perf-history"
OUR_RUNNER = "npu-ledger/"
# our runner suffixes (npu_kernels.provenance classes; "measured-npu2" in lines exported before the vocabulary)
SOURCES = {NPU2_MEASURED: "measured NPU2 (npu-ledger)", "measured-npu2": "measured NPU2 (npu-ledger)",
           MODELLED_NPU2: "modelled NPU2 (not measured)", CPU_EMULATOR: "CPU emulator (not NPU2)",
           STANDIN_REHEARSAL: "stand-in rehearsal (not NPU2)", UNATTESTED: "unattested (not NPU2)"}

_STR, _ID, _NUM, _INT, _OPT_INT = "str", "int|str", "number|null", "int", "int|null"


def _schema(series: str) -> tuple[tuple[str, str], ...]:
    return tuple(tuple(f.split(":", 1)) for f in NIGHTLY[series]["fields"])  # type: ignore[misc]


SERIES = ("history", "sweep", "prefill_sweep")
SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {s: _schema(s) for s in SERIES}
FILES = {s: NIGHTLY[s]["file"] for s in SERIES}
MAY_BE_ABSENT = {s: frozenset(NIGHTLY[s].get("may_be_absent", ())) for s in SERIES}
STATUSES = {s: tuple(NIGHTLY[s].get("statuses", ())) for s in SERIES}  # "...: " entries are prefixes of a cause


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
    missing = [k for k in schema if k not in row and k not in MAY_BE_ABSENT[series]]
    if missing:
        return f"{FILES[series]} row without {', '.join(missing)}"
    for key, kind in schema.items():
        if key in row and not _type_ok(kind, row[key]):
            return f"{key} is {json.dumps(row[key])}, not {kind}"
    if row["date"] != row["timestamp_utc"][:10]:
        return f"date {row['date']!r} is not the day of timestamp_utc {row['timestamp_utc']!r}"
    return status_problem(series, row)


def status_problem(series: str, row: dict[str, Any]) -> str | None:
    """Why a sweep point's status (and the prefill sweep's first_token_gate) is not one the contract pins."""
    known = STATUSES[series]
    status = row.get("status")
    if known and status is not None and not any(status == s or (s.endswith(": ") and status.startswith(s))
                                                for s in known):
        return f"status {json.dumps(status)[:80]} is not one of {FILES[series]}'s statuses ({', '.join(known)})"
    gates = NIGHTLY[series].get("first_token_gate")
    if gates is not None and row.get("first_token_gate") not in gates:
        return f"first_token_gate {json.dumps(row.get('first_token_gate'))[:40]} is not one of {gates}"
    return None


# --- what an imported line may claim -----------------------------------------------------------------------------
# Positions: no model in scope trains beyond 131072 (the nightly's decode sweep stops there, sweep_decode.py); a
# context or prefill length must be 1 .. MAX_POSITIONS (8x that), so a typo or a forged -4 / 1e9 is refused.
MAX_POSITIONS = 1 << 20
# Tokens/s: decode streams every weight from DDR once per token, so tokens/s <= DDR bandwidth / weight bytes; the
# smallest model the tool deploys is SmolLM2-135M, at 4 bits 67.5 MB: 256e9 / 67.5e6 = 3793 tokens/s on NPU2.
# Prefill needs 2 FLOP per weight per token: tokens/s <= NPU2's peak / (2 x 135e6).
SMALLEST_PARAMS = 135e6
MAX_DECODE_TOKENS_S = DDR_BANDWIDTH_BYTES_S["npu2"] / (SMALLEST_PARAMS * 0.5)
MAX_PREFILL_TOKENS_S = PEAK_FLOPS["npu2"] / (2 * SMALLEST_PARAMS)
_METRICS = ("ttft_ms", "decode_tokens_per_sec", "ms_per_token", "prefill_tokens_per_sec", "npu_dispatch_ms")
_POSITIONS = ("context_len", "prefill_len")


def claims_ours(row: dict[str, Any]) -> str | None:
    """Why a line would pass for this tool's own figure (None: it does not): its runner names npu-ledger (what
    `export_rows` writes, and what `source_of` reads as ours) or its run_id is one of ours."""
    runner = str(row.get("runner") or "")
    if runner.strip().lower().startswith(OUR_RUNNER.rstrip("/")):
        return f"runner {json.dumps(runner)} claims this tool's own figure; an imported line is the nightly's"
    run_id = row.get("run_id")
    if isinstance(run_id, str) and run_id.strip().lower().startswith("npu-ledger:"):
        return f"run_id {json.dumps(run_id)} is one of this tool's own; an imported line is the nightly's"
    return None


def _agree(a: float, b: float, product: float) -> bool:
    """a x b = product, within half a unit in the last digit each carries (npu_kernels.perf.evidence.printed_unit)."""
    ha, hb = printed_unit(a) / 2, printed_unit(b) / 2
    return (a - ha) * (b - hb) <= product * (1 + 1e-12) and (a + ha) * (b + hb) >= product * (1 - 1e-12)


def figure_problem(series: str, row: dict[str, Any]) -> str | None:
    """Why the figures of a schema-valid line cannot be a measurement (None: they can): metrics positive,
    positions 1 .. MAX_POSITIONS, tokens/s under the physical bounds above, and the figures that are one another's
    inverse agreeing to their digits (ms_per_token x tokens/s = 1000; prefill tokens/s x ttft = length x 1000)."""
    for key in _METRICS:
        v = row.get(key)
        if v is not None and not v > 0:
            return f"{key} is {json.dumps(v)}: a time or rate is a positive number"
    for key in _POSITIONS:
        v = row.get(key)
        if v is not None and not 1 <= v <= MAX_POSITIONS:
            return f"{key} is {json.dumps(v)}, outside 1 .. {MAX_POSITIONS}"
    tps = row.get("decode_tokens_per_sec")
    if tps is not None and tps > MAX_DECODE_TOKENS_S:
        return (f"decode_tokens_per_sec {tps:g} exceeds {MAX_DECODE_TOKENS_S:.0f}, what NPU2's DDR bandwidth allows "
                "the smallest model in scope")
    ptps = row.get("prefill_tokens_per_sec")
    if ptps is not None and ptps > MAX_PREFILL_TOKENS_S:
        return (f"prefill_tokens_per_sec {ptps:g} exceeds {MAX_PREFILL_TOKENS_S:.0f}, what NPU2's peak allows the "
                "smallest model in scope")
    ms = row.get("ms_per_token")
    if tps is not None and ms is not None and not _agree(tps, ms, 1000.0):
        return f"ms_per_token {ms:g} and decode_tokens_per_sec {tps:g} contradict each other (their product is not 1000)"
    ttft, plen, npu = row.get("ttft_ms"), row.get("prefill_len"), row.get("npu_dispatch_ms")
    if ttft is not None and npu is not None and npu - printed_unit(npu) / 2 > ttft + printed_unit(ttft) / 2:
        return f"npu_dispatch_ms {npu:g} exceeds ttft_ms {ttft:g}: the NPU dispatch is part of the time to first token"
    if ptps is not None and ttft is not None and plen is not None and not _agree(ptps, ttft, plen * 1000.0):
        return (f"prefill_tokens_per_sec {ptps:g} is not prefill_len {plen} over ttft_ms {ttft:g} "
                f"({plen / ttft * 1e3:.6g})")
    return None


def import_problem(series: str, row: Any) -> str | None:
    """Why `row` may not be imported as a line of `series`: its schema, then its claim, then its figures."""
    return row_problem(series, row) or claims_ours(row) or figure_problem(series, row)


def figure_key(series: str, row: dict[str, Any]) -> tuple:
    """(series, run id, model, context or prefill length): one figure per key."""
    return (series, json.dumps(row.get("run_id")), row.get("model"),
            row.get("prefill_len") if series == "prefill_sweep" else row.get("context_len"))


def figures_of(row: dict[str, Any]) -> tuple:
    return tuple(row.get(k) for k in _METRICS)


def parse_lines(text: str, file: str, known: dict[tuple, tuple[str, tuple]] | None = None
                ) -> list[tuple[int, str, dict[str, Any]]]:
    """(line number, series, row) of every non-blank line; raise `BadLine` at the first line that is not a row, or
    whose (run id, model, context) already has another figure in the file or in `known` ({key: (where, figures)},
    what the ledger holds)."""
    out = []
    seen: dict[tuple, tuple[str, tuple]] = dict(known or {})
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadLine(f"{file}:{n}: not JSON ({e.msg}): {line[:60]!r}") from None
        series = series_of(row) if isinstance(row, dict) else "history"
        why = import_problem(series, row)
        if why:
            raise BadLine(f"{file}:{n}: {why}")
        key, figs = figure_key(series, row), figures_of(row)
        if key in seen and seen[key][1] != figs:
            raise BadLine(f"{file}:{n}: run {key[1]} of {key[2]} at {key[3]} already has another figure "
                          f"({seen[key][0]}); one run measures one figure per model and context")
        seen.setdefault(key, (f"line {n}", figs))
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
    """The imported rows of the nightly stream, in ledger order, each re-checked as on import (schema, claim,
    figures); rows of one (run id, model, context) with different figures are all flagged (which one is right
    cannot be told), so a row appended behind the importer's back is never shown or exported as measured."""
    rows = [rec for rec in events if rec.stream_id == NIGHTLY_STREAM and rec.type == "NightlyPerfImported"]
    problems = {rec.seq: import_problem(rec.payload["series"], rec.payload["row"]) for rec in rows}
    figures: dict[tuple, dict[tuple, int]] = {}
    for rec in rows:
        p = rec.payload
        if problems[rec.seq] is None:
            figures.setdefault(figure_key(p["series"], p["row"]), {}).setdefault(figures_of(p["row"]), rec.seq)
    out = []
    for rec in rows:
        p = rec.payload
        why = problems[rec.seq]
        if why is None:
            others = figures[figure_key(p["series"], p["row"])]
            if len(others) > 1:
                seqs = ", ".join(map(str, sorted(others.values())))
                why = f"its run, model and context hold {len(others)} different figures (seq {seqs})"
        out.append(NightlyRow(rec.seq, p["series"], p["row"], p.get("file", ""), why))
    return out


# --- the ledger's own figures as nightly lines ------------------------------------------------------------------


def _stamp(recorded_at: str) -> str:
    return recorded_at.replace("+00:00", "Z")[:19] + "Z" if recorded_at else ""


def _r2(x: float | None) -> float | None:
    return None if x is None else round(float(x), 2)


def model_label(model: str, cls: str) -> str:
    """The `model` field of an exported line: the bare name for an NPU2 measurement, else the name with its class
    (npu_kernels.provenance SHORT), e.g. "smollm2_135m_instruct (modelled NPU2)", the only field of the line mlir-air's
    dashboard prints that can say the figure is not a measurement."""
    return model if cls == NPU2_MEASURED else f"{model} ({SHORT.get(cls, cls)})"


def own_figures_problem(p: dict[str, Any]) -> str | None:
    """Why a PerformanceMeasured's figures cannot be written as nightly lines (None: they can): a TTFT, tokens/s or
    ms/token that is not a positive finite number, or that is zero at the two decimals a line carries (the prefill
    tokens/s of a line is its length over that TTFT: it is never divided by zero)."""
    for key, scale, unit in (("ttft_s", 1e3, "ms"), ("tokens_per_s", 1.0, "tokens/s"), ("ms_per_token", 1.0, "ms")):
        v = p.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            return f"{key} {v!r} is not a positive finite number"
        if _r2(v * scale) == 0:
            return f"{key} {v:g} is 0.00 {unit} at the two decimals a nightly line carries"
    return None


def _own_lines(rec: RecordedEvent, name: str, model: str, cls: str, verify: str) -> list[tuple[int, str, dict]]:
    """The history / sweep / prefill_sweep lines of one PerformanceMeasured record (the module docstring); its
    figures passed `own_figures_problem`."""
    p = rec.payload
    tc = p.get("toolchain") or {}
    ts = _stamp(str(rec.recorded_at))
    base = {"date": ts[:10], "timestamp_utc": ts, "run_id": f"npu-ledger:{name}:{rec.seq}",
            "air_sha": tc.get("mlir_air_commit") or "", "aie_hash": "", "peano": tc.get("peano") or "",
            "model": model_label(model, cls), "runner": OUR_RUNNER + cls}
    ttft = _r2(p["ttft_s"] * 1e3) if p.get("ttft_s") is not None else None
    tps = _r2(p.get("tokens_per_s"))
    seq_len = int(p.get("n_prompt_tokens") or 0) or None
    ctx = ((p.get("profile") or {}).get("npu2") or {}).get("ctx")
    out = [(rec.seq, "history", {**base, "ttft_ms": ttft, "decode_tokens_per_sec": tps, "context_len": seq_len,
                                 "verify_status": verify})]
    if tps is not None and isinstance(ctx, int):
        ms = p.get("ms_per_token")
        out.append((rec.seq, "sweep", {**base, "context_len": ctx, "decode_tokens_per_sec": tps,
                                       "ms_per_token": _r2(ms) if ms is not None else None, "status": "ok",
                                       "verify_status": verify}))
    if ttft is not None and seq_len:
        out.append((rec.seq, "prefill_sweep", {**base, "prefill_len": seq_len, "ttft_ms": ttft, "npu_dispatch_ms": None,
                                               "prefill_tokens_per_sec": round(seq_len / (ttft / 1e3), 1),
                                               "first_token_gate": "", "status": "ok", "detail": "",
                                               "verify_status": verify}))
    return out


def export_rows(events: Sequence[RecordedEvent], model_of, modelled: bool = False,
                skipped: list[str] | None = None) -> list[tuple[int, str, dict[str, Any]]]:
    """(seq, series, row) of every line the ledger holds: imported rows verbatim and, for each PerformanceMeasured
    with a TTFT or tokens/s figure measured on NPU2 (or of any class, with `modelled`, its model name then carrying
    the class: `model_label`), its history / sweep / prefill_sweep lines (the module docstring). A record whose
    figures cannot be lines (`own_figures_problem`: zero, negative, not finite) writes none; why is appended to
    `skipped` when given."""
    out = [(r.seq, r.series, r.row) for r in fold_nightly(events) if r.problem is None]
    gates: dict[str, list[bool]] = {}
    for rec in events:
        stream, p = rec.stream_id, rec.payload
        if rec.type == "PhaseStarted":
            gates[stream] = []
        elif rec.type == "TokenGateChecked":
            gates.setdefault(stream, []).append(bool(p.get("passed")))
        elif rec.type == "PerformanceMeasured" and (p.get("ttft_s") is not None or p.get("tokens_per_s") is not None):
            cls = perf_row_provenance(p)  # the figure's class, re-derived from the record's facts
            if not modelled and cls != NPU2_MEASURED:
                continue
            name = stream.split(":", 1)[1]
            why = own_figures_problem(p)
            if why:
                if skipped is not None:
                    skipped.append(f"seq {rec.seq} ({name}): {why}; not exported")
                continue
            seen = gates.get(stream, [])
            verify = ("pass" if all(seen) else "fail") if seen else ""
            out += _own_lines(rec, name, model_of(name), cls, verify)
    return sorted(out, key=lambda x: x[0])
