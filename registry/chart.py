"""The charts of phase3_full.md (per-layer cosine, per-step teacher-forced KL), as PNG bytes that are identical on every rebuild.

Determinism: matplotlib's default style inside a style context (whatever the caller configured), the Agg
canvas, fixed figure size and dpi, and PNG metadata with `Software` removed (PNG carries no timestamp
unless asked). The figure is built on a `Figure` object, not through pyplot's global state.

Reuse: a chart is a pure function of its inputs, so `memo_png` keeps each drawn PNG in the user's cache
(`~/.cache/npu-ledger/charts`, beside the converted models), named by the hash of the drawing function, its
inputs, the source of the modules that draw it and matplotlib's version; a projection rebuilt with the same
figures reads the bytes back instead of drawing them again (2-3.5 s of matplotlib per `ledger advance` on a
tiny model, 2026-12-03). The bytes are the same either way.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import io
import os
import sys
import tempfile
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.0, 100
TITLE_CHARS = 100  # characters of a 10 pt title line that fit the 8-inch figure (about 7 px each at 100 dpi)


CACHE = Path.home() / ".cache" / "npu-ledger" / "charts"
CACHE_KEEP = 2000  # PNGs kept; past it the oldest half is removed


@lru_cache(maxsize=None)
def _source_digest(module: str) -> str:
    """The hash of a drawing module's source and this one's (a changed chart is a new key)."""
    h = hashlib.sha256()
    for name in sorted({module, __name__}):
        h.update(Path(inspect.getsourcefile(sys.modules[name]) or "").read_bytes())
    try:
        h.update(importlib.metadata.version("matplotlib").encode())
    except importlib.metadata.PackageNotFoundError:
        pass
    return h.hexdigest()


def memo_png(render: Callable[..., bytes | None], *args: Any, **kwargs: Any) -> bytes | None:
    """`render(*args, **kwargs)`, read back from the chart cache when these inputs were drawn before (see the
    module docstring). The inputs' `repr` is the key: numbers, strings and dataclasses of them."""
    key = hashlib.sha256(f"{render.__module__}.{render.__qualname__}|{args!r}|{sorted(kwargs.items())!r}|"
                         f"{_source_digest(render.__module__)}".encode()).hexdigest()
    path = CACHE / f"{key}.png"
    try:
        return path.read_bytes()
    except OSError:
        pass
    png = render(*args, **kwargs)
    if png is not None:
        _keep(path, png)
    return png


def _keep(path: Path, png: bytes) -> None:
    """Write `png` to the cache atomically (two processes may draw the same chart); a cache that cannot be
    written is no error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(png)
        os.replace(tmp, path)
        kept = sorted(path.parent.glob("*.png"), key=lambda p: p.stat().st_mtime)
        for old in kept[:len(kept) // 2] if len(kept) > CACHE_KEEP else ():
            old.unlink(missing_ok=True)
    except OSError:
        pass


def layer_cosine_png(series: Sequence[tuple[str, Sequence[int], Sequence[float]]], title: str) -> bytes:
    """A line chart: one (label, layers, cosines) series per line; y is per-position cosine."""
    return memo_png(line_chart_png, series, title, "layer", "per-position cosine (vs HF bf16)", legend="lower left")


def step_kl_png(series: Sequence[tuple[str, Sequence[int], Sequence[float]]], title: str) -> bytes:
    """A line chart: one (label, steps, KL) series per prompt; y is the teacher-forced KL(reference || ours)."""
    return memo_png(line_chart_png, series, title, "teacher-forced step", "KL(reference || ours), nats",
                    legend="upper left")


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
    """`draw_elf_breakdown_png`, reused from the chart cache where drawn before."""
    return memo_png(draw_elf_breakdown_png, bars, title)


def draw_elf_breakdown_png(bars: Sequence[tuple[str, float, float, float, float]], title: str) -> bytes:
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
