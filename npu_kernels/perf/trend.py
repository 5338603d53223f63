"""A curve point whose figure breaks its curve's trend (issue 46 item 5): a point the sweep marked "ok" whose time
grew from the previous measured point by more than the work it does can explain.

mlir-air's nightly recorded LFM2-1.2B's prefill at 4096 as "ok" at 81877 ms against 1079 ms at 2048 (perf-history
prefill_sweep_history.ndjson, run 33236790246, 2026-08-29, no first-token gate; tests/fixtures/nightly_history):
75.9x the time for twice the tokens. No schedule of the same work does that; something other than the prefill was
timed (a fallback to the host, a thrashing buffer, a retried launch). This module says so, with the bound it used.

The test, between two adjacent measured points x1 < x2 of one curve (a point without a figure is skipped over):

  prefill   time t(L) = TTFT at padded length L. The work is the prefill's FLOPs, F(L) = a*L + b*L^2: every weight
            matmul is linear in L, attention's QK^T and PV quadratic. So F(L2)/F(L1) <= (L2/L1)^2 whatever a and b
            are (the "quadratic ceiling", used when the model is not known, as for a nightly line); with the model's
            config the ratio is its own (`prefill_flops`).
  decode    time per token at context C = ms/token (1000 / tokens/s). The work is streaming the weights (constant in
            C) plus reading the KV cache (linear in C), so the bytes grow at most C2/C1 (the "linear ceiling").

A point breaks the trend when t(x2)/t(x1) > work ratio x TREND_SLACK. TREND_SLACK = 2: two builds of adjacent lengths
may run their FLOPs at different rates (a tile that no longer fits a memory tile, a buffer split in two), and the
nightly's own healthy 2048 -> 4096 steps show how much: llama31_8b 5955 -> 17702 ms, 2.97x against the 2.07x its
FLOPs grow (1.43x the FLOP ratio), llama32_3b 2.68x, phi4_mini 2.67x (same fixture). A step past twice the work's
ratio is not a rate change but a different thing being timed. A point is only flagged, never changed: its status and
figures stay what the sweep said, with `trend_break` beside them. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from npu_kernels.model.config import ModelConfig

TREND_SLACK = 2.0
TREND_SRC = ("npu_kernels.perf.trend (issue 46 item 5; the LFM2 4096 point of mlir-air's prefill_sweep_history.ndjson, "
             "run 33236790246)")


def prefill_flops(config: ModelConfig, length: int) -> float:
    """FLOPs of one prefill of `length` tokens, the terms that grow with the length (nanoGPT's estimate_mfu
    accounting): per layer and token, 2 x (the q, k, v, o projections and the three MLP matmuls' weights), and
    per layer causal attention's QK^T and PV, 2 matmuls x 2 FLOP x heads x head_dim x L^2 / 2. Every layer is counted
    as attention (a hybrid's convolution layers have less quadratic work, so its true ratio is lower: the bound
    only gets looser). The LM head runs on the last position only (constant in L) and is left out, which can only
    raise the ratio, never lower it."""
    c = config
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    per_token = 2 * c.n_layers * (c.emb_dim * q + 2 * c.emb_dim * kv + q * c.emb_dim + 3 * c.emb_dim * c.hidden_dim)
    attention = 2 * c.n_layers * c.n_heads * c.head_dim  # x L^2
    return per_token * length + attention * length * length


def _point_time(pt: Mapping[str, Any], axis: str) -> float | None:
    """The point's time: TTFT (ms) for prefill, ms per token for decode (from tokens/s when only that is given)."""
    if pt.get("status", "ok") != "ok":
        return None
    if axis == "prefill":
        v = pt.get("ttft_ms")
    else:
        v = pt.get("ms_per_token")
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            tps = pt.get("decode_tokens_per_sec")
            v = 1000.0 / tps if isinstance(tps, (int, float)) and not isinstance(tps, bool) and tps > 0 else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def trend_breaks(points: list[Mapping[str, Any]], axis: str,
                 flops: Callable[[int], float] | None = None) -> dict[int, dict[str, Any]]:
    """{x: trend_break} for every point of `points` (one axis: "prefill" or "decode", the curve's point dicts) whose
    time exceeds the previous measured point's by more than the work ratio x TREND_SLACK (the module docstring).
    `flops(L)` gives the prefill's FLOPs (`prefill_flops` of the model); None: the quadratic ceiling."""
    xkey = "prefill_len" if axis == "prefill" else "context_len"
    timed = sorted((int(p[xkey]), t) for p in points if isinstance(p.get(xkey), int)
                   for t in [_point_time(p, axis)] if t is not None)
    out: dict[int, dict[str, Any]] = {}
    for (x1, t1), (x2, t2) in zip(timed, timed[1:]):
        if axis == "prefill" and flops is not None:
            work, basis = flops(x2) / flops(x1), "the model's prefill FLOPs"
        elif axis == "prefill":
            work, basis = (x2 / x1) ** 2, "the quadratic ceiling (L2/L1)^2 of a prefill's FLOPs (model not known)"
        else:
            work, basis = x2 / x1, "the linear ceiling C2/C1 of a decode step's bytes (weights + KV cache)"
        factor, bound = t2 / t1, work * TREND_SLACK
        if factor > bound:
            what, unit = ("TTFT", "ms") if axis == "prefill" else ("decode time per token", "ms")
            out[x2] = {"against": x1, "factor": round(factor, 3), "bound": round(bound, 3),
                       "work_ratio": round(work, 3), "slack": TREND_SLACK, "basis": basis,
                       "detail": (f"{what} {t2:g} {unit} at {x2} is {factor:.1f}x the {t1:g} {unit} at {x1}; "
                                  f"{basis} grow {work:.2f}x, x slack {TREND_SLACK:g} = {bound:.2f}x: a cliff, "
                                  "not the curve's trend")}
    return out


def flag_axis(axis_dict: Mapping[str, Any], axis: str, flops: Callable[[int], float] | None = None) -> dict[str, Any]:
    """A curve axis ({"points": [...], ...}) with `trend_break` on each point that breaks the trend (`trend_breaks`),
    and `trend_breaks` (how many) on the axis when any does; an axis without a break is returned as it was."""
    points = list(axis_dict.get("points") or [])
    xkey = "prefill_len" if axis == "prefill" else "context_len"
    breaks = trend_breaks(points, axis, flops)
    if not breaks:
        return dict(axis_dict)
    return {**axis_dict, "trend_breaks": len(breaks),
            "points": [{**p, "trend_break": breaks[p[xkey]]} if p.get(xkey) in breaks else dict(p) for p in points]}


def flag_curve(curve: Mapping[str, Any], config: ModelConfig | None = None) -> dict[str, Any]:
    """A curve of npu_kernels.perf.curve's shape (modelled or a device's sweep) with its trend breaks flagged on both
    axes, the prefill judged against `config`'s FLOPs when given (else the quadratic ceiling)."""
    flops = (lambda n: prefill_flops(config, n)) if config is not None else None
    out = dict(curve)
    for axis in ("prefill", "decode"):
        if isinstance(curve.get(axis), Mapping):
            out[axis] = flag_axis(curve[axis], axis, flops if axis == "prefill" else None)
    return out
