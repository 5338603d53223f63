"""The projection llms/<model>/docs/perf_history.md (+ perf_history.png): figures and verify status per toolchain.

Like mlir-air's nightly `programming_examples/llms/bench/history.ndjson` (each figure tied to the air / aie /
peano commits it ran on, with its verify status), built from the ledger alone: one row per toolchain
(kernels.toolchain label) in the order the deployment first used it, with

  * TTFT and tokens/s: the last Phase 6 (or reverify/audit) PerformanceMeasured on that toolchain, and its
    source (modelled NPU2 on emulated / torch, measured on mlir-air);
  * Phase 1: PASS (or documented-caveat) rows / rows measured on that toolchain, latest verdict per shape;
  * verify: the token gate runs recorded while that toolchain was the deployment's latest (pass / total),
    and any reverify blocker raised on it.

Rows written before provenance existed show the toolchain "unrecorded". The chart has TTFT (ms) and tokens/s
against the toolchain index; bytes are identical on every rebuild (registry.chart's determinism).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Sequence

from kernels.toolchain import toolchain_label
from ledger.record import RecordedEvent
from registry.chart import DPI, HEIGHT_IN, WIDTH_IN
from registry.text import fixed, shown, table

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


def fold_history(events: Sequence[RecordedEvent]) -> list[ToolchainRow]:
    """The per-toolchain rows of one deployment's stream (see the module docstring)."""
    rows: dict[str, ToolchainRow] = {}
    current: str | None = None

    def row(label: str, seq: int) -> ToolchainRow:
        return rows.setdefault(label, ToolchainRow(label, seq))

    for rec in events:
        p = rec.payload
        if rec.type == "KernelVerified":
            current = toolchain_label((p.get("provenance") or {}).get("toolchain"))
            key = (p["kernel"], json.dumps(p["shape"], sort_keys=True))
            row(current, rec.seq).kernels[key] = p["verdict"] == "PASS" or bool(p.get("caveat"))
        elif rec.type == "PerformanceMeasured":
            current = toolchain_label(p.get("toolchain"))
            if p.get("ttft_s") is not None or p.get("tokens_per_s") is not None:
                r = row(current, rec.seq)
                r.ttft_s, r.tokens_per_s, r.perf_seq = p.get("ttft_s"), p.get("tokens_per_s"), rec.seq
                r.source = str((p.get("profile") or {}).get("source") or p.get("executor") or "")
        elif rec.type == "TokenGateChecked" and current is not None:
            r = row(current, rec.seq)
            r.gates += 1
            r.gates_passed += bool(p.get("passed"))
        elif rec.type == "BlockerRaised" and current is not None and str(p.get("reason", "")).startswith("reverify"):
            row(current, rec.seq).blockers.append(f"seq {rec.seq}: {p['reason']}")
    return sorted(rows.values(), key=lambda r: r.first_seq)


def render_history(name: str, rows: Sequence[ToolchainRow]) -> str:
    parts = [f"# {name}: performance and verify status per toolchain\n",
             "Projected from the ledger (`ledger registry build`); never edit by hand. One row per toolchain the "
             "deployment's evidence was recorded on (npu-ledger version; the emulated numerics' and perf model's "
             "versions, or the mlir-air commit and aie / peano / XRT versions on hardware).\n"]
    if not rows:
        parts.append("No evidence recorded yet.\n")
        return "\n".join(parts)
    cells = []
    for i, r in enumerate(rows, start=1):
        n_ok = sum(r.kernels.values())
        cells.append([
            i, f"`{r.label}`", r.first_seq,
            fixed(r.ttft_s * 1e3, 2) if r.ttft_s is not None else None,
            fixed(r.tokens_per_s, 2) if r.tokens_per_s is not None else None,
            r.source or None,
            f"{n_ok}/{len(r.kernels)}" if r.kernels else None,
            f"{r.gates_passed}/{r.gates}" if r.gates else None,
            "; ".join(r.blockers) if r.blockers else ("green" if (n_ok == len(r.kernels) and r.gates_passed == r.gates)
                                                      else "failures recorded"),
        ])
    parts.append(table(["#", "toolchain", "first seq", "TTFT (ms)", "tokens/s", "figures", "Phase 1 PASS",
                        "token gate PASS", "verify"], cells))
    if any(r.ttft_s is not None for r in rows):
        parts.append("![TTFT and tokens/s per toolchain](perf_history.png)\n")
    return "\n".join(parts)


def history_png(name: str, rows: Sequence[ToolchainRow]) -> bytes | None:
    """TTFT (ms, left axis) and tokens/s (right axis) per toolchain index; None without any figure."""
    points = [(i, r) for i, r in enumerate(rows, start=1) if r.ttft_s is not None or r.tokens_per_s is not None]
    if not points:
        return None
    import matplotlib.style  # here, not at the top: matplotlib is slow to import and only the chart needs it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        xs = [i for i, r in points if r.ttft_s is not None]
        ax.plot(xs, [r.ttft_s * 1e3 for _, r in points if r.ttft_s is not None], marker="o", color="tab:blue",
                label="TTFT (ms)")
        ax.set_xlabel("toolchain # (see the table)")
        ax.set_ylabel("TTFT (ms)")
        ax2 = ax.twinx()
        xs2 = [i for i, r in points if r.tokens_per_s is not None]
        ax2.plot(xs2, [r.tokens_per_s for _, r in points if r.tokens_per_s is not None], marker="s",
                 color="tab:orange", label="tokens/s")
        ax2.set_ylabel("tokens/s")
        for i, r in points:  # verify status: a red x on toolchains with a failure or a reverify blocker
            bad = r.blockers or sum(r.kernels.values()) != len(r.kernels) or r.gates_passed != r.gates
            if bad and r.ttft_s is not None:
                ax.plot([i], [r.ttft_s * 1e3], marker="x", markersize=12, color="tab:red")
        ax.set_xticks([i for i, _ in points])
        ax.set_title(f"{name}: TTFT and tokens/s per toolchain (x: verify failures)")
        ax.grid(True, linewidth=0.4, alpha=0.6)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def project_history(events: Sequence[RecordedEvent], name: str) -> dict[str, bytes]:
    """{FILE_MD: markdown, FILE_PNG: png (when figures exist)} of deployment `name` (paths under llms/<name>/)."""
    stream = f"deployment:{name}"
    rows = fold_history([e for e in events if e.stream_id == stream])
    out = {FILE_MD: render_history(shown(name), rows).encode("utf-8")}
    png = history_png(shown(name), rows)
    if png is not None:
        out[FILE_PNG] = png
    return out
