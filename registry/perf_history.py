"""The projection llms/<model>/docs/perf_history.md (+ perf_history.png): figures and verify status per toolchain.

Like mlir-air's nightly `programming_examples/llms/bench/history.ndjson` (each figure tied to the air / aie /
peano commits it ran on, with its verify status), built from the ledger alone: one row per toolchain
(npu_kernels.toolchain label) in the order the deployment first used it, with

  * TTFT and tokens/s: the last Phase 6 (or reverify/audit) PerformanceMeasured on that toolchain, and its
    source (modelled NPU2 on emulated / torch, measured on mlir-air);
  * Phase 1: PASS (or documented-caveat) rows / rows measured on that toolchain, latest verdict per shape;
  * verify: the token gate runs recorded while that toolchain was the deployment's latest (pass / total),
    and any reverify blocker raised on it.

Rows written before provenance existed show the toolchain "unrecorded". The chart has TTFT (ms) and tokens/s
against the toolchain index; bytes are identical on every rebuild (registry.chart's determinism).

Beside them, the rows of mlir-air's own nightly imported into the ledger (`ledger perf import-history`,
registry.nightly_history) for the deployment's mlir-air model directory name: one table per series (history,
decode vs context, prefill TTFT vs padded length), each row with its source label (measured NPU2 nightly, or an
npu-ledger export's own label), then the same rows merged as mlir-air's dashboard merges them
(registry.nightly_merge: newest point per model and length, measured beats failed, verify from the newest row,
and the page says so), each merged curve followed by its trend breaks (npu_kernels.perf.trend: a point whose time
grows past twice what its work allows, e.g. LFM2's 81.9 s prefill at 4096 after 1.08 s at 2048, marked "ok"), and a
second panel of the chart (TTFT and tokens/s per nightly run).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace
from typing import Sequence

from npu_kernels.perf.trend import trend_breaks
from npu_kernels.toolchain import toolchain_label
from ledger.record import RecordedEvent
from registry.chart import DPI, HEIGHT_IN, WIDTH_IN, memo_png
from npu_kernels.provenance import perf_row_provenance
from registry.nightly_history import FILES, SOURCES, NightlyRow, fold_nightly, source_of
from registry.nightly_merge import RULES, cell as merged_cell, merged_curves, merged_history
from registry.text import escaped, fixed, shown, table
from ledger.streams import deployment_stream

FILE_MD = "docs/perf_history.md"
FILE_PNG = "docs/perf_history.png"


@dataclass
class ToolchainRow:
    label: str
    first_seq: int
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    perf_seq: int | None = None
    source: str = ""
    kernels: dict = field(default_factory=dict)  # (kernel, shape json) -> passed
    gates_passed: int = 0
    gates: int = 0
    blockers: list[str] = field(default_factory=list)


class HistoryFold:
    """The per-toolchain rows grown a record at a time (`add`, in the stream's seq order; `rows()` a copy of them so
    far): `fold_history` over a stream read whole, or the rows a unit of work's view keeps (registry.model_fold)."""

    def __init__(self) -> None:
        self._rows: dict[str, ToolchainRow] = {}
        self._current: str | None = None

    def _row(self, label: str, seq: int) -> ToolchainRow:
        return self._rows.setdefault(label, ToolchainRow(label, seq))

    def add(self, rec: RecordedEvent) -> None:
        p = rec.payload
        if rec.type == "KernelVerified":
            self._current = toolchain_label((p.get("provenance") or {}).get("toolchain"))
            key = (p["kernel"], json.dumps(p["shape"], sort_keys=True))
            self._row(self._current, rec.seq).kernels[key] = p["verdict"] == "PASS" or bool(p.get("caveat"))
        elif rec.type == "PerformanceMeasured":
            self._current = toolchain_label(p.get("toolchain"))
            if p.get("ttft_s") is not None or p.get("tokens_per_s") is not None:
                r = self._row(self._current, rec.seq)
                r.ttft_s, r.tokens_per_s, r.perf_seq = p.get("ttft_s"), p.get("tokens_per_s"), rec.seq
                r.source = perf_row_provenance(p)  # the figure's class, re-derived from its facts
        elif rec.type == "TokenGateChecked" and self._current is not None:
            r = self._row(self._current, rec.seq)
            r.gates += 1
            r.gates_passed += bool(p.get("passed"))
        elif (rec.type == "BlockerRaised" and self._current is not None
              and str(p.get("reason", "")).startswith("reverify")):
            self._row(self._current, rec.seq).blockers.append(f"seq {rec.seq}: {p['reason']}")

    def rows(self) -> list[ToolchainRow]:
        """The rows so far in the order the deployment first used each toolchain (copies: later `add`s leave them)."""
        return [replace(r, kernels=dict(r.kernels), blockers=list(r.blockers))
                for r in sorted(self._rows.values(), key=lambda r: r.first_seq)]


def fold_history(events: Sequence[RecordedEvent]) -> list[ToolchainRow]:
    """The per-toolchain rows of one deployment's stream (see the module docstring)."""
    fold = HistoryFold()
    for rec in events:
        fold.add(rec)
    return fold.rows()


_LABEL = SOURCES


def nightly_rows(events: Sequence[RecordedEvent], model: str) -> list[NightlyRow]:
    """The imported nightly rows of mlir-air model directory `model` that still pass their schema check."""
    return [r for r in fold_nightly(events) if r.problem is None and r.row.get("model") == model]


def _nightly_tables(model: str, nightly: Sequence[NightlyRow]) -> list[str]:
    parts = []
    hist = [r for r in nightly if r.series == "history"]
    sweep = [r for r in nightly if r.series == "sweep"]
    pre = [r for r in nightly if r.series == "prefill_sweep"]
    if not (hist or sweep or pre):
        return parts
    parts.append(f"## mlir-air nightly: `{model}` (imported)\n")
    parts.append("Lines of mlir-air's nightly perf history (`ledger perf import-history`), as recorded; the source "
                 "column says whose figure each is.\n")
    def base(r):
        w = r.row
        return [r.seq, w["date"], f"`{w['air_sha'][:7]}`" if w["air_sha"] else None, source_of(w)]
    if hist:
        parts.append(table(["seq", "date", "mlir-air", "source", "context", "TTFT (ms)", "tokens/s", "verify"],
                           [base(r) + [r.row["context_len"], r.row["ttft_ms"], r.row["decode_tokens_per_sec"],
                                       r.row.get("verify_status") or None] for r in hist]))
    if sweep:
        parts.append("Decode throughput against context (sweep_history.ndjson):\n")
        parts.append(table(["seq", "date", "mlir-air", "source", "context", "tokens/s", "ms/token", "status"],
                           [base(r) + [r.row["context_len"], r.row["decode_tokens_per_sec"], r.row["ms_per_token"],
                                       r.row["status"]] for r in sweep]))
    if pre:
        parts.append("Prefill TTFT against padded prefill length (prefill_sweep_history.ndjson):\n")
        parts.append(table(["seq", "date", "mlir-air", "source", "prefill length", "TTFT (ms)", "NPU dispatch (ms)",
                            "first token", "status", "detail"],
                           [base(r) + [r.row["prefill_len"], r.row["ttft_ms"], r.row["npu_dispatch_ms"],
                                       r.row["first_token_gate"] or None, escaped(r.row["status"]),
                                       escaped(r.row["detail"]) or None] for r in pre]))
    return parts + _merged_tables(hist, sweep, pre)


def _merged_tables(hist, sweep, pre) -> list[str]:
    """The imported rows as mlir-air's dashboard shows them (registry.nightly_merge: its merge rules)."""
    parts = [f"The rows above as mlir-air's dashboard shows them, merged by its rules (generate_readme.py): {RULES}.\n"]
    parts = parts if (hist or sweep or pre) else []
    for w in merged_history(r.row for r in hist).values():
        parts.append(table(["history", "context", "TTFT (ms)", "tokens/s", "measured", "verify"],
                           [["newest measured" if w["ttft_ms"] is not None or w["decode_tokens_per_sec"] is not None
                             else "newest (no figure)", w["context_len"], w["ttft_ms"], w["decode_tokens_per_sec"],
                             w["date"], w.get("verify_status") or None]]))
    for series, rows, what in (("sweep", sweep, "context"), ("prefill_sweep", pre, "prefill length")):
        for curve in merged_curves(series, (r.row for r in rows)):
            cells = [[at, merged_cell(series, w), escaped(w.get("status", "")), w["date"]]
                     for at, w in sorted(curve.points.items())]
            parts.append(f"{FILES[series]} merged (verify badge, from the newest row: "
                         f"{escaped(curve.verify) or 'blank'}):\n")
            parts.append(table([what, "TTFT (ms)" if series == "prefill_sweep" else "tokens/s", "status", "date"],
                               cells))
            breaks = trend_breaks(list(curve.points.values()), "prefill" if series == "prefill_sweep" else "decode")
            parts.extend(f"- TREND BREAK at {at} (marked {escaped(curve.points[at].get('status', ''))!s} by the "
                         f"nightly; npu_kernels.perf.trend): {b['detail']}\n" for at, b in sorted(breaks.items()))
    return parts


def render_history(name: str, rows: Sequence[ToolchainRow], model: str = "",
                   nightly: Sequence[NightlyRow] = ()) -> str:
    parts = [f"# {name}: performance and verify status per toolchain\n",
             "Projected from the ledger (`ledger registry build`); never edit by hand. One row per toolchain the "
             "deployment's evidence was recorded on (npu-ledger version; the emulated numerics' and perf model's "
             "versions, or the mlir-air commit and aie / peano / XRT versions on hardware).\n"]
    if not rows:
        parts.append("No evidence recorded yet.\n")
        return "\n".join(parts + _nightly_tables(model, nightly))
    cells = []
    for i, r in enumerate(rows, start=1):
        n_ok = sum(r.kernels.values())
        cells.append([
            i, f"`{r.label}`", r.first_seq,
            fixed(r.ttft_s * 1e3, 2) if r.ttft_s is not None else None,
            fixed(r.tokens_per_s, 2) if r.tokens_per_s is not None else None,
            f"{_LABEL.get(r.source, r.source)} ({r.source})" if r.source else None,
            f"{n_ok}/{len(r.kernels)}" if r.kernels else None,
            f"{r.gates_passed}/{r.gates}" if r.gates else None,
            "; ".join(r.blockers) if r.blockers else ("green" if (n_ok == len(r.kernels) and r.gates_passed == r.gates)
                                                      else "failures recorded"),
        ])
    parts.append(table(["#", "toolchain", "first seq", "TTFT (ms)", "tokens/s", "figures", "Phase 1 PASS",
                        "token gate PASS", "verify"], cells))
    parts += _nightly_tables(model, nightly)
    if any(r.ttft_s is not None for r in rows) or any(r.series == "history" for r in nightly):
        parts.append("![TTFT and tokens/s per toolchain, and per nightly run](perf_history.png)\n")
    return "\n".join(parts)


def _panel(ax, xs_t, ttft_ms, xs_s, tps, xlabel: str, title: str):
    ax.plot(xs_t, ttft_ms, marker="o", color="tab:blue", label="TTFT (ms)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("TTFT (ms)")
    ax2 = ax.twinx()
    ax2.plot(xs_s, tps, marker="s", color="tab:orange", label="tokens/s")
    ax2.set_ylabel("tokens/s")
    ax.set_title(title, fontsize=9)
    ax.grid(True, linewidth=0.4, alpha=0.6)


def history_png(name: str, rows: Sequence[ToolchainRow], nightly: Sequence[NightlyRow] = ()) -> bytes | None:
    """TTFT (ms, left axis) and tokens/s (right axis) per toolchain index, and beside it (when imported nightly
    history rows exist) the same per nightly run; None without any figure."""
    points = [(i, r) for i, r in enumerate(rows, start=1) if r.ttft_s is not None or r.tokens_per_s is not None]
    runs = [r.row for r in nightly if r.series == "history"]
    if not points and not runs:
        return None
    import matplotlib.style  # here, not at the top: matplotlib is slow to import and only the chart needs it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        fig = Figure(figsize=(WIDTH_IN * (2 if runs else 1), HEIGHT_IN), dpi=DPI)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 2 if runs else 1, 1)
        sources = sorted({_LABEL.get(r.source, r.source) for _, r in points if r.source})
        _panel(ax, [i for i, r in points if r.ttft_s is not None],
               [r.ttft_s * 1e3 for _, r in points if r.ttft_s is not None],
               [i for i, r in points if r.tokens_per_s is not None],
               [r.tokens_per_s for _, r in points if r.tokens_per_s is not None], "toolchain # (see the table)",
               f"{name}: per toolchain, {', '.join(sources) or 'no figure'} (x: verify failures)")
        for i, r in points:  # verify status: a red x on toolchains with a failure or a reverify blocker
            bad = r.blockers or sum(r.kernels.values()) != len(r.kernels) or r.gates_passed != r.gates
            if bad and r.ttft_s is not None:
                ax.plot([i], [r.ttft_s * 1e3], marker="x", markersize=12, color="tab:red")
        ax.set_xticks([i for i, _ in points])
        if runs:
            nx = fig.add_subplot(1, 2, 2)
            idx = list(enumerate(runs, start=1))
            _panel(nx, [i for i, w in idx if w["ttft_ms"] is not None], [w["ttft_ms"] for _, w in idx
                                                                          if w["ttft_ms"] is not None],
                   [i for i, w in idx if w["decode_tokens_per_sec"] is not None],
                   [w["decode_tokens_per_sec"] for _, w in idx if w["decode_tokens_per_sec"] is not None],
                   "imported nightly row # (see the table)",
                   "mlir-air nightly: " + ", ".join(sorted({source_of(w) for w in runs})))
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def project_history(events: Sequence[RecordedEvent], name: str, model: str = "",
                    rows: Sequence[ToolchainRow] | None = None) -> dict[str, bytes]:
    """{FILE_MD: markdown, FILE_PNG: png (when figures exist)} of deployment `name` (paths under llms/<name>/);
    `model` is its mlir-air model directory name, which the imported nightly rows are matched on. `rows`: the
    deployment's toolchain rows folded already (its docs' view keeps them); else its stream in `events` is folded."""
    if rows is None:
        stream = deployment_stream(name)
        rows = fold_history([e for e in events if e.stream_id == stream])
    nightly = nightly_rows(events, model) if model else []
    out = {FILE_MD: render_history(shown(name), rows, model, nightly).encode("utf-8")}
    png = memo_png(history_png, shown(name), rows, nightly)
    if png is not None:
        out[FILE_PNG] = png
    return out
