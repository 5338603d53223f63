"""The curve section of phase6_finalize.md: a Phase 6 PerformanceMeasured's `curve` (npu_kernels.perf.curve's shape:
TTFT against padded prefill length, decode tokens/s against context) as tables and the PNG beside them. Pure; the
PNG's bytes are identical on every rebuild (npu_kernels.perf.curve.curve_png)."""

from __future__ import annotations

from typing import Any, Mapping

from npu_kernels.perf.curve import curve_png, render_curve
from registry.chart import memo_png

CURVE_CHART = "phase6_curve.png"


def curve_section(curve: Mapping[str, Any], name: str, seq: int) -> tuple[str, bytes | None]:
    """The markdown of the section and its chart (no section and None for a record without a curve)."""
    if not curve or not (curve.get("prefill") and curve.get("decode")):
        return "", None
    label = curve.get("label") or curve.get("source")
    body = _under(render_curve(curve, name))
    text = (f"## Prefill length and decode context as axes ({label}, PerformanceMeasured seq {seq})\n\n"
            f"![TTFT against padded prefill length, decode tokens/s against context]({CURVE_CHART})\n\n{body}")
    modelled = curve.get("modelled_npu2")
    if modelled:  # a device's sweep: the performance model's curve beside it
        text += "\n### The NPU2 performance model's curve beside it\n\n" + _under(render_curve(modelled, name))
    return text, memo_png(curve_png, curve, f"{name}: {label} (PerformanceMeasured seq {seq})")


def _under(markdown: str) -> str:
    """render_curve's tables and notes without its title, one heading level down (under this page's section)."""
    return markdown.split("\n", 2)[2].replace("## ", "### ")
