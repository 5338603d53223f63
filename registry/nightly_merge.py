"""The merge mlir-air's dashboard applies to its nightly files, which the tool's perf pages follow, so that a page and
the dashboard show the same figure for a model at a length.

mlir-air's dashboard (programming_examples/generate_readme.py) reads the three ndjson files of the `perf-history`
branch and keeps, rather than a snapshot of the last run, a merge of every run:

* history.ndjson (`load_llm_history`, e972f29 :720-770): one row per model, the newest row that measured
  something (TTFT or tokens/s not null), else the model's newest row; the row's own verify status goes with it.
* sweep_history.ndjson (`load_llm_sweep_history`, e972f29 :567-618) and prefill_sweep_history.ndjson
  (`load_llm_prefill_sweep_history`, a32bef3, "same merge semantics"): one point per model and context (padded
  prefill length), where a measured point (tokens/s, TTFT not null) beats one without a figure and, between two
  of the same kind, the newer wins (timestamp_utc, else date; on a tie the later line); the model's verify badge
  is its strictly newest row's verify_status, whichever point won.
* a point without a figure reads "—" when its status is one of the contract's `dash_statuses` ("", "ok",
  "expected_fail": `_sweep_cell` e972f29 :641-646, `_prefill_sweep_cell` a32bef3), else "✗"; a figure is printed
  as the dashboard prints it (tokens/s to 2 decimals, TTFT to whole ms).

Rows are the nightly's line dicts in ledger (= file) order. Imports: npu_kernels.mlir_air.contract only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from npu_kernels.mlir_air.contract import NIGHTLY

# series -> (the axis a point sits on, the figure that makes it measured, how the dashboard prints that figure)
AXES = {"sweep": ("context_len", "decode_tokens_per_sec", "{:.2f}"), "prefill_sweep": ("prefill_len", "ttft_ms",
                                                                                          "{:.0f}")}
RULES = ("the newest point per model and length, a measured point beating one without a figure, and the verify badge "
         "from the model's newest row")


def _when(row: dict[str, Any]) -> str:
    return row.get("timestamp_utc") or row.get("date") or ""


def merged_history(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{model: the row the dashboard shows}: the newest row that measured something, else the newest."""
    newest: dict[str, tuple[str, dict]] = {}
    measured: dict[str, tuple[str, dict]] = {}
    for r in rows:
        model, ts = r.get("model"), _when(r)
        if not model:
            continue
        if model not in newest or ts >= newest[model][0]:
            newest[model] = (ts, r)
        if r.get("decode_tokens_per_sec") is not None or r.get("ttft_ms") is not None:
            if model not in measured or ts >= measured[model][0]:
                measured[model] = (ts, r)
    newest.update(measured)
    return {m: newest[m][1] for m in sorted(newest)}


@dataclass
class Curve:
    model: str
    verify: str = ""  # the model's newest row's verify_status
    points: dict[int, dict[str, Any]] = field(default_factory=dict)  # axis value -> the row shown there


def merged_curves(series: str, rows: Iterable[dict[str, Any]]) -> list[Curve]:
    """One Curve per model (sorted) of a sweep series, its points merged as the dashboard merges them."""
    axis, figure, _ = AXES[series]
    best: dict[tuple, tuple[bool, str, dict]] = {}
    verify: dict[str, tuple[str, str]] = {}
    for r in rows:
        model, at = r.get("model"), r.get(axis)
        if not model or at is None:
            continue
        ts, measured = _when(r), r.get(figure) is not None
        cur = best.get((model, at))
        if cur is None or (measured, ts) >= (cur[0], cur[1]):
            best[(model, at)] = (measured, ts, r)
        if model not in verify or ts >= verify[model][0]:
            verify[model] = (ts, r.get("verify_status", ""))
    curves: dict[str, Curve] = {}
    for (model, at), (_, _, r) in sorted(best.items()):
        curves.setdefault(model, Curve(model, verify[model][1])).points[at] = r
    return [curves[m] for m in sorted(curves)]


def cell(series: str, row: dict[str, Any] | None) -> str:
    """The dashboard's cell for a point: its figure as printed there, or "—" / "✗" by its status."""
    _, figure, fmt = AXES[series]
    value = (row or {}).get(figure)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt.format(value)
    return "—" if (row or {}).get("status", "") in NIGHTLY[series]["dash_statuses"] else "✗"
