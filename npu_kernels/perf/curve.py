"""Prefill length and decode context as axes: the modelled NPU2 curves of a deployment.

`npu2_curve(config, switches, ...) -> dict` gives two curves, in the layout the field publishes them
(mlir-air's README tables "Prefill latency vs padded prefill length (TTFT, ms)" and "Decode throughput vs
context (tok/s)", rendered by programming_examples/generate_readme.py @a5a6c31 from the nightly's
bench/sweep_prefill.py @a32bef3 and bench/sweep_decode.py @e972f29; FastFlowLM's published tables report
decode TPS at 1k ... 32k context and prefill TPS at the same prompt lengths):

  prefill   TTFT (ms) and prefill tokens/s (= L / TTFT, as sweep_prefill.py computes `prefill_tokens_per_sec`)
            at padded prefill length L in PREFILL_LENGTHS. mlir-air compiles its prefill ELFs for one seq_len
            and pads every prompt to it (sweep_prefill.py's docstring: at a fixed 2048 engine a 128-token prompt
            costs what a 2048-token one does), so the point at L models the deployment *compiled for L*, one
            build per point, not a prompt of L tokens padded to 2048. Each point is `npu_kernels.perf.predict` at
            seq=L and the Phase 6 context: the 2048 point is exactly the TTFT `ledger predict` and Phase 6 give.
  decode    decode tokens/s and ms/token at context C in DECODE_CONTEXTS (Phase 6's modelled context, then
            1k ... 32k): `predict` at the compiled seq (2048) and ctx=C; the Phase 6 context's point is exactly
            the decode figure `ledger predict` and Phase 6 give.

What bounds each axis (a point beyond a bound has no figure, a `status` naming the bound and a `detail`):

  * the model's context window (`max_position_embeddings` of its config.json, when given): neither a prompt
    nor a KV cache past it is a position the model was trained for (status "beyond_context_window"). Phase 6 builds
    within it (`npu_kernels.perf.figures.build_seq`: a 512-context model is compiled and timed at 512, so its curve
    has nothing past 512); only a config recorded before the window was (no `max_positions`) keeps its Phase 6
    points past it (the compiled 2048, the modelled context), with a `detail` saying so;
  * the dispatch plan at L: every launch must have a legal NPU2 tile (npu_kernels.numerics.tiles) where the 2048
    build's does - a rule that breaks only because of L ends the axis ("no_legal_tile"; a rule broken at
    every length, as in the tiny test models, is the shape's, said in `notes`); and no buffer object of the
    plan may pass the 4 GiB one BO addresses (npu_kernels.perf.memory.BO_ADDRESS_LIMIT: the activation BOs grow
    as L x hidden) ("bo_address_limit");
  * the RoPE tables the model is deployed with (LongRoPE's short factors cover original_max_position_embeddings;
    the long factors are not implemented): a length or context past them is "beyond_rope_tables", no figure;
  * the 4-bit on-device decode (weights "q4nx-device"): the fused decode template streams an ATTN_MAXL (2048) KV
    window, the one build the model prices; a context past it is "beyond_decode_window", no figure;
  * the decode KV cache: `npu_kernels.perf.memory.memory_fit` at context C. Decode attention runs on the CPU
    (llms/README.md "What runs on NPU vs CPU", e972f29), so the cache is host memory: it is checked against
    the target machine's memory when `host_bytes` is given ("does_not_fit"), otherwise not at all (said in
    `notes`).
A point whose time grows past what its work allows from the previous point (npu_kernels.perf.trend: the model's
prefill FLOP ratio x 2) carries `trend_break` (factor, bound, why), and the tables and the PNG say so.
Pure and deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from npu_kernels.model.architecture import load_raw_config
from npu_kernels.model.config import ModelConfig
from npu_kernels.numerics.tiles import check_tile, plan_tile
from npu_kernels.perf.dispatch import dispatch_plan
from npu_kernels.perf.figures import NPU2_DECODE_CTX, build_seq, decode_ctx
from npu_kernels.perf.memory import BO_ADDRESS_LIMIT, BO_LIMIT_SRC
from npu_kernels.perf.q4nx import ATTN_MAXL, predict_weights
from npu_kernels.perf.trend import flag_curve

PREFILL_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DECODE_CONTEXTS = (NPU2_DECODE_CTX, 1024, 2048, 4096, 8192, 16384, 32768)
SOURCE = "modelled-npu2"
LAYOUT_SRC = ("mlir-air programming_examples/generate_readme.py@a5a6c31 (render_llm_prefill_sweep, "
              "render_llm_sweep), llms/bench/sweep_prefill.py@a32bef3, llms/bench/sweep_decode.py@e972f29")


def context_window(model_path) -> int | None:
    """The model's trained context, `max_position_embeddings` of the config.json at `model_path` (a HF folder or the
    file); None when there is none or it says none (the curve then has no context-window bound)."""
    try:
        value = load_raw_config(model_path).get("max_position_embeddings")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _beyond_rope(config: ModelConfig, positions: int) -> str:
    """Why `positions` is past the RoPE tables the model is deployed with ("" when it is not): LongRoPE's short
    factors cover original_max_position_embeddings only (the description's rope_max_positions; the long factors
    are not implemented, so the pipeline refuses such positions and the model prices none)."""
    limit = config.arch.rope_max_positions
    if limit is None or positions <= limit:
        return ""
    return (f"{positions} positions > the {limit} its RoPE tables cover (LongRoPE short factors; the long factors "
            "are not implemented)")


def _illegal(config: ModelConfig, switches: Mapping[str, bool], seq: int) -> dict[tuple[str, str], str]:
    """(kernel, rule) -> message for every prefill launch of the plan at `seq` that has no legal NPU2 tile."""
    plan = dispatch_plan(config, dict(switches), seq, NPU2_DECODE_CTX)
    out: dict[tuple[str, str], str] = {}
    for call in [*plan.prefill_layer, plan.lm_head]:
        for la in call.launches:
            tp = plan_tile(la.kernel, la.shape, "npu2")
            if not tp.legal:  # the planner's own tile breaks these rules at this shape
                for rule, msg in check_tile(la.kernel, la.shape, tp.tile, "npu2"):
                    out.setdefault((la.kernel, rule), f"{la.kernel} {la.role}: {rule}: {msg}")
    return out


def _largest_bo(config: ModelConfig, switches: Mapping[str, bool], seq: int) -> tuple[int, str]:
    """The largest buffer object (any category) of the prefill plan at `seq`, and its name."""
    plan = dispatch_plan(config, dict(switches), seq, NPU2_DECODE_CTX)
    return max(((n, f"{c.elf}:{b}") for c in [*plan.prefill_layer, plan.lm_head]
                for d in (c.write, c.static, c.intermediate, c.read) for b, n in d.items()), key=lambda x: x[0])


def prefill_curve(config: ModelConfig, switches: Mapping[str, bool], lengths=PREFILL_LENGTHS,
                  max_positions: int | None = None, weights: str = "bf16") -> tuple[list[dict[str, Any]], list[str]]:
    """The prefill points (see the module docstring) under the prefill path's `switches`, and the notes."""
    seq6 = build_seq(config)
    max_positions = max_positions if max_positions is not None else config.max_positions
    base = _illegal(config, switches, seq6)
    notes = [f"no legal NPU2 tile at {seq6} either ({base[k]}): the shape's, not the length's (the "
             "hardware needs it padded)" for k in sorted(base)]
    points = []
    for L in lengths:
        pt: dict[str, Any] = {"prefill_len": L, "ttft_ms": None, "prefill_tokens_per_sec": None, "status": "ok"}
        new = {k: m for k, m in _illegal(config, switches, L).items() if k not in base}
        size, bo = _largest_bo(config, switches, L)
        rope = _beyond_rope(config, L)
        if max_positions is not None and L > max_positions and L != seq6:
            pt.update(status="beyond_context_window",
                      detail=f"{L} positions > the model's max_position_embeddings {max_positions}")
        elif rope:
            pt.update(status="beyond_rope_tables", detail=rope)
        elif new:
            pt.update(status="no_legal_tile", detail="; ".join(new[k] for k in sorted(new)))
        elif size > BO_ADDRESS_LIMIT:
            pt.update(status="bo_address_limit", detail=f"BO {bo} is {size / 2**30:.2f} GiB, past the 4 GiB one BO "
                                                        f"addresses ({BO_LIMIT_SRC})")
        else:
            p = predict_weights(config, weights, seq=L, switches=dict(switches), ctx=decode_ctx(config))
            pt.update(ttft_ms=round(p.ttft_s * 1e3, 3), ttft_s=p.ttft_s,
                      prefill_tokens_per_sec=round(L / p.ttft_s, 1), prefill_s=p.prefill_s)
            if max_positions is not None and L > max_positions:  # the Phase 6 build itself: kept, and said
                pt["detail"] = (f"{L} > the model's max_position_embeddings {max_positions}: Phase 6's compiled "
                                "length, which mlir-air pads every prompt to")
        points.append(pt)
    return points, notes


def decode_curve(config: ModelConfig, switches: Mapping[str, bool], contexts=DECODE_CONTEXTS,
                 max_positions: int | None = None, host_bytes: int | None = None,
                 weights: str = "bf16") -> tuple[list[dict[str, Any]], list[str]]:
    """The decode points (see the module docstring) under the decode path's `switches`, and the notes."""
    seq6, ctx6 = build_seq(config), decode_ctx(config)
    max_positions = max_positions if max_positions is not None else config.max_positions
    notes = [] if host_bytes is not None else [
        "host memory not given: the KV cache (host memory; decode attention runs on the CPU) is not checked "
        "against a machine's DDR (`--host-memory-gib` checks it)"]
    points = []
    for C in contexts:
        pt: dict[str, Any] = {"context_len": C, "decode_tokens_per_sec": None, "ms_per_token": None, "status": "ok"}
        if max_positions is not None and C > max_positions and C != ctx6:
            pt.update(status="beyond_context_window",
                      detail=f"{C} positions > the model's max_position_embeddings {max_positions}")
            points.append(pt)
            continue
        rope = _beyond_rope(config, C)
        if rope:
            pt.update(status="beyond_rope_tables", detail=rope)
            points.append(pt)
            continue
        if weights == "q4nx-device" and C > ATTN_MAXL:
            pt.update(status="beyond_decode_window", detail=(
                f"{C} positions > the fused decode template's ATTN_MAXL {ATTN_MAXL} KV window, the only build the "
                "model streams (npu_kernels.perf.q4nx; a longer context needs another template build, not modelled)"))
            points.append(pt)
            continue
        p = predict_weights(config, weights, seq=seq6, switches=dict(switches), ctx=C, host_bytes=host_bytes)
        pt["kv_cache_bytes"] = p.memory["kv_cache_bytes"]
        if not p.memory["fits"]:
            pt.update(status="does_not_fit", detail="; ".join(p.memory["problems"]))
        else:
            pt.update(decode_tokens_per_sec=p.decode_tokens_per_s, ms_per_token=p.ms_per_token)
            if max_positions is not None and C > max_positions:  # Phase 6's modelled context itself: kept, and said
                pt["detail"] = f"{C} > the model's max_position_embeddings {max_positions}: Phase 6's modelled context"
        points.append(pt)
    return points, notes


def npu2_curve(config: ModelConfig, prefill_switches: Mapping[str, bool], decode_switches: Mapping[str, bool], *,
               max_positions: int | None = None, host_bytes: int | None = None, weights: str = "bf16") -> dict[str, Any]:
    """Both curves of a deployment (see the module docstring), each path under its own switches (a deployment's
    switch dict gives them through `npu_kernels.perf.figures.path_switches`; `ledger predict` one set for both)."""
    pre_sw, dec_sw = dict(prefill_switches), dict(decode_switches)
    seq6, ctx6 = build_seq(config), decode_ctx(config)
    max_positions = max_positions if max_positions is not None else config.max_positions
    pre, pre_notes = prefill_curve(config, pre_sw, max_positions=max_positions, weights=weights)
    dec, dec_notes = decode_curve(config, dec_sw, max_positions=max_positions, host_bytes=host_bytes, weights=weights)
    label = "modelled NPU2" + (f", {weights} weights" if weights != "bf16" else "")
    return flag_curve({**({"weights": weights} if weights != "bf16" else {}), "source": SOURCE, "label": label,
                       "layout": LAYOUT_SRC,
            "phase6_seq": seq6, "phase6_ctx": ctx6, "max_positions": max_positions,
            "switches": {"prefill": dict(pre_sw), "decode": dict(dec_sw)},
            "prefill": {"axis": "prefill_len", "metric": "ttft_ms", "points": pre},
            "decode": {"axis": "context_len", "metric": "decode_tokens_per_sec", "points": dec},
            "notes": [f"prefill point at L: the deployment compiled for L (mlir-air pads a prompt to the built "
                      f"seq_len, so a {seq6} build costs its {seq6}-point TTFT at any "
                      "prompt length up to it)",
                      f"decode points: prefill compiled for {seq6}; the decode step over a KV cache "
                      "of C positions", *pre_notes, *dec_notes]}, config)


def point(curve: Mapping[str, Any], axis: str, x: int) -> dict[str, Any] | None:
    """The point of `curve`'s "prefill" or "decode" axis at x (None when the curve has none there)."""
    key = "prefill_len" if axis == "prefill" else "context_len"
    return next((p for p in (curve.get(axis) or {}).get("points", []) if p.get(key) == x), None)


def _label(n: int) -> str:
    """1024 -> '1k' (the column labels of mlir-air's curve tables); other lengths as they are."""
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def _cell(pt: Mapping[str, Any], key: str, fmt: str) -> str:
    v = pt.get(key)
    return format(v, fmt) if isinstance(v, (int, float)) else "—"


def render_curve(curve: Mapping[str, Any], title: str) -> str:
    """Both curves as markdown tables, one column per length / context, every figure labelled with its source;
    a point without a figure shows "—" and its status below the table."""
    label = curve.get("label") or curve.get("source")
    pre, dec = curve["prefill"]["points"], curve["decode"]["points"]
    lines = [f"# {title}: prefill length and decode context as axes ({label})", ""]

    def block(name: str, points, xkey: str, rows: list[tuple[str, str, str]], axis: Mapping[str, Any]) -> None:
        if not points:  # an axis not swept (a device's decode on a bf16 model directory): why, no table
            lines.extend([f"## {name} ({label})", "", f"{axis.get('status', 'no points')}: {axis.get('detail', '')}", ""])
            return
        lines.extend([f"## {name} ({label})", "",
                      "| metric | " + " | ".join(_label(p[xkey]) for p in points) + " |",
                      "|:---|" + "---:|" * len(points)])
        lines.extend(f"| {m} | " + " | ".join(_cell(p, k, f) for p in points) + " |" for m, k, f in rows)
        lines.extend([f"- {_label(p[xkey])}: {p['status']}: {p.get('detail', '')}" for p in points
                      if p["status"] != "ok" or p.get("detail")])
        lines.extend(f"- {_label(p[xkey])}: TREND BREAK (npu_kernels.perf.trend): {p['trend_break']['detail']}"
                     for p in points if p.get("trend_break"))
        lines.extend(f"- the sweep failed (not forgiven): {f}" for f in axis.get("failures", []))
        lines.append("")

    block("Prefill latency vs padded prefill length", pre, "prefill_len",
          [("TTFT (ms)", "ttft_ms", ".1f"), ("prefill tokens/s", "prefill_tokens_per_sec", ".1f")], curve["prefill"])
    block("Decode throughput vs context", dec, "context_len",
          [("decode tokens/s", "decode_tokens_per_sec", ".2f"), ("ms/token", "ms_per_token", ".2f")], curve["decode"])
    lines += [f"- {n}" for n in curve.get("notes", [])]
    lines.append(f"- layout: {curve.get('layout', LAYOUT_SRC)}")
    return "\n".join(lines) + "\n"


def curve_png(curve: Mapping[str, Any], title: str) -> bytes:
    """Two panels, TTFT against padded prefill length and decode tokens/s against context (log2 x axes), as PNG
    bytes identical on every rebuild (Agg canvas on a Figure, default style, no `Software` metadata)."""
    import io

    import matplotlib.style  # here, not at the top: matplotlib is slow to import and only the charts need it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    label = curve.get("label") or curve.get("source")
    panels = [("prefill", "prefill_len", "ttft_ms", "padded prefill length (tokens)", "TTFT (ms)",
               "Prefill latency vs padded prefill length"),
              ("decode", "context_len", "decode_tokens_per_sec", "context length (tokens)", "decode tokens/s",
               "Decode throughput vs context")]
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(10.0, 4.0), dpi=100)
        FigureCanvasAgg(fig)
        for i, (axis, xkey, ykey, xlabel, ylabel, name) in enumerate(panels, start=1):
            ax = fig.add_subplot(1, 2, i)
            series = [(label, curve, "-")] + ([("modelled NPU2", curve["modelled_npu2"], "--")]
                                              if curve.get("modelled_npu2") else [])  # a device's curve: the model beside
            for name_, c, style in series:
                pts = [p for p in c[axis]["points"] if p.get(ykey) is not None]
                ax.plot([p[xkey] for p in pts], [p[ykey] for p in pts], style, marker="o", markersize=4,
                        linewidth=1.2, label=name_)
                cliff = [p for p in pts if p.get("trend_break")]
                if cliff:  # a point past its trend's bound (npu_kernels.perf.trend): marked, and named in the legend
                    worst = max(cliff, key=lambda p: p["trend_break"]["factor"])["trend_break"]
                    ax.plot([p[xkey] for p in cliff], [p[ykey] for p in cliff], linestyle="none", marker="X",
                            markersize=10, color="tab:red",
                            label=f"{name_}: trend break ({worst['factor']:.1f}x > {worst['bound']:.1f}x bound)")
            ax.set_xscale("log", base=2)
            xs = sorted({p[xkey] for _, c, _ in series for p in c[axis]["points"] if p.get(xkey)})
            if xs:
                ax.set_xticks(xs, [_label(x) for x in xs], fontsize=7)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(f"{name} ({label})", fontsize=9)
            ax.grid(True, linewidth=0.4, alpha=0.6)
            ax.legend(loc="best", fontsize=8)
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


@dataclass
class CurveComparison:
    """A recorded curve against the one a deployment gives now, point by point (`compare_curves`)."""

    compared: int = 0  # points with a figure on both sides
    regressions: list[str] = field(default_factory=list)  # slower beyond the band, or a figure that is gone
    changes: list[str] = field(default_factory=list)  # faster beyond the band, a new figure, or not judged
    rtol: float | None = None


AXES = (("prefill", "prefill_len", "ttft_ms", "TTFT", "ms", +1), ("decode", "context_len", "decode_tokens_per_sec",
                                                                   "decode", "tokens/s", -1))


def compare_curves(recorded: Mapping[str, Any], now: Mapping[str, Any], rtol: float | None) -> CurveComparison:
    """Compare two curves of npu_kernels.perf.curve's shape. A point whose figure moved the slow way (TTFT up, decode
    tokens/s down) by more than `rtol` (relative), or that had a figure and has none now, is a regression; one that
    moved the fast way, or gained a figure, is a change. `rtol` None (a source with no agreed band, e.g. a
    device's sweep) lists every difference as a change, judging none; curves from two sources are not compared."""
    out = CurveComparison(rtol=rtol)
    if recorded.get("source") != now.get("source"):
        out.changes.append(f"curve source {recorded.get('source')} recorded, {now.get('source')} now: not compared")
        return out
    for axis, key, metric, name, unit, slow in AXES:
        was = {p.get(key): p for p in (recorded.get(axis) or {}).get("points", [])}
        for p in (now.get(axis) or {}).get("points", []):
            x, old = p.get(key), was.get(p.get(key))
            if old is None:
                continue
            a, b = old.get(metric), p.get(metric)
            where = f"{name} at {_label(x)}"
            if a is not None and b is None:
                out.regressions.append(f"{where}: {a:g} {unit} recorded, none now ({p.get('status')}: {p.get('detail', '')})")
            elif a is None and b is not None:
                out.changes.append(f"{where}: {b:g} {unit} now, none recorded ({old.get('status')})")
            elif a is not None and b is not None:
                out.compared += 1
                moved = (b - a) / a if a else (0.0 if b == a else math.copysign(math.inf, b - a))
                if moved and (rtol is None or abs(moved) > rtol):
                    line = f"{where}: {a:g} -> {b:g} {unit} ({moved:+.2%})"
                    judged = rtol is not None and moved * slow > 0
                    (out.regressions if judged else out.changes).append(line + ("" if rtol is not None else " (not judged: no agreed band)"))
    return out
