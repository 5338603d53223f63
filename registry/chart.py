"""The charts of phase3_full.md (per-layer cosine, per-step teacher-forced KL), as PNG bytes that are identical on every rebuild.

Determinism: matplotlib's default style inside a style context (whatever the caller configured), the Agg
canvas, fixed figure size and dpi, and PNG metadata with `Software` removed (PNG carries no timestamp
unless asked). The figure is built on a `Figure` object, not through pyplot's global state.
"""

from __future__ import annotations

import io
import textwrap
from typing import Sequence

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.0, 100
TITLE_CHARS = 100  # characters of a 10 pt title line that fit the 8-inch figure (about 7 px each at 100 dpi)


def layer_cosine_png(series: Sequence[tuple[str, Sequence[int], Sequence[float]]], title: str) -> bytes:
    """A line chart: one (label, layers, cosines) series per line; y is per-position cosine."""
    return line_chart_png(series, title, "layer", "per-position cosine (vs HF bf16)", legend="lower left")


def step_kl_png(series: Sequence[tuple[str, Sequence[int], Sequence[float]]], title: str) -> bytes:
    """A line chart: one (label, steps, KL) series per prompt; y is the teacher-forced KL(reference || ours)."""
    return line_chart_png(series, title, "teacher-forced step", "KL(reference || ours), nats", legend="upper left")


def line_chart_png(series: Sequence[tuple[str, Sequence[int], Sequence[float]]], title: str, xlabel: str,
                   ylabel: str, *, legend: str = "best") -> bytes:
    """A deterministic line chart (see the module docstring), one series per line."""
    import matplotlib.style  # here, not at the top: matplotlib is slow to import and only the charts need it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        for label, xs, ys in series:
            ax.plot(list(xs), list(ys), marker="o", markersize=3, linewidth=1.2, label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, linewidth=0.4, alpha=0.6)
        if series:
            ax.legend(loc=legend, fontsize=8)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def elf_breakdown_png(bars: Sequence[tuple[str, float, float, float, float]], title: str) -> bytes:
    """A horizontal stacked bar chart: one (label, bo_write_ms, npu_ms, bo_read_ms, host_or_xrt_ms) bar per ELF
    (per call x calls, i.e. the ELF's total), as the modelled NPU2 breakdown of a deployment."""
    import matplotlib.style  # here, not at the top: matplotlib is slow to import and only the charts need it

    with matplotlib.style.context("default"):
        fig = elf_breakdown_figure(bars, title)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def elf_breakdown_figure(bars: Sequence[tuple[str, float, float, float, float]], title: str):
    """The Figure `elf_breakdown_png` saves. Its title is a figure title wrapped to the figure's width (a
    deployment's name and the event it charts run longer than one line of the 8-inch figure, and an axes title
    centred over bars pushed right by long ELF names was cut at both edges)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, max(2.5, 0.45 * len(bars) + 1.2)), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    labels = [b[0] for b in bars]
    left = [0.0] * len(bars)
    for i, part in enumerate(("BO write", "NPU run", "BO read", "XRT")):
        widths = [b[i + 1] for b in bars]
        ax.barh(labels, widths, left=left, label=part)
        left = [a + w for a, w in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel("ms (modelled NPU2; prefill per prompt, decode per token)")
    fig.suptitle(textwrap.fill(title, TITLE_CHARS), fontsize=10)
    ax.grid(True, axis="x", linewidth=0.4, alpha=0.6)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
