"""The NPU2 model fitted to one machine: its per-machine constants from that machine's own recorded runs
(`ledger perf calibrate`; docs/calibration.md).

The performance model's end-to-end figures are sums of five groups of time (`Prediction.totals`, npu_kernels.perf.predict):
the NPU run of the launches (`npu`: the kernel constants fitted on mlir-air's kernel registry, npu_kernels.perf.constants),
the BO writes (`bo_write`: bytes at `bo_write_bps`), the BO reads (`bo_read`: bytes at `bo_read_bps`), the per-call
XRT dispatch (`xrt`: calls x `xrt_call_s`) and the host's own work (`host`: copies, embedding, Python scheduling, CPU
decode attention; npu_kernels.perf.host). Each group is linear in one per-machine constant, so a machine whose NPU clock,
host memory or XRT stack differs from the machine mlir-air published (its kernel registry and the Llama-3.2-1B
profile, profile_llama32_1b.toml) scales that group by one factor:

  figure = sum_g  s_g * T_g(model, length, switches)      T_g: the group's time on mlir-air's published machine

`fit_calibration(rows)` fits the factors s_g to measured figures (TTFT, prefill, ms/token of profiled runs) by
non-negative least squares on relative error (npu_kernels.perf.fit.nnls; each row weighs as its relative error, as the
kernel fit does). A group that is under 1% of every row's time cannot be told apart from the others and stays at
the published machine's value (said in `fixed`). The named constants follow from the factors (`constants`):
npu_time_scale = s_npu, bo_write_bps = published / s_bo_write, bo_read_bps = published / s_bo_read,
xrt_call_s = published x s_xrt, host_time_scale = s_host.

Error bars, both from leave-one-out refits (one refit without each row):
  * a constant's: three jackknife standard errors, SE = sqrt((n-1)/n * sum_i (s_(i) - mean)^2). Three, not two,
    because the five are read together: on synthesised data (three models' Phase 4-6 figures, 2% noise, seeds
    0-59) 2 SE held each constant 90-95% of the time but all five at once only 78%; 3 SE held all five 93%;
  * a figure's: twice the root-mean-square of the held-out rows' relative residuals (predicted / measured - 1)
    of that figure kind (ttft_s, prefill_s, ms_per_token; all rows' when the kind has none), as a fraction of it.
`calibrated(prediction, calibration, config, switches)` gives a prediction's TTFT and ms/token on the calibrated
machine with those error bars. Pure and deterministic (no randomness, no clock).

Physics bounds every figure (`figure_floor`): a prefill does 2 FLOP per projection weight per token, so it takes at
least that at the target's peak (TTFT: and the LM head's one row); a decode token streams every projection's and the
LM head's weights from DDR once, so it takes at least those bytes at the DDR bandwidth, counted in the smallest weight
format in scope (Q4NX, 0.625 B/weight: a floor a 4-bit deployment's real figure cannot break). `figure_problem` names a
measured figure under its floor (`ledger perf calibrate` leaves such a row out); `physics_problems` names a fit whose
constants are beyond physics (a group of time at zero - an infinitely fast BO or XRT call -, a BO rate above the DDR
bandwidth, an NPU time under a row's floor): such a fit is refused, and a recorded one is not applied by `predict`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from npu_kernels.model.config import ModelConfig
from npu_kernels.perf.constants import PEAK_FLOPS
from npu_kernels.perf.dispatch import dispatch_plan
from npu_kernels.perf.fit import nnls
from npu_kernels.perf.host import host_constants
from npu_kernels.perf.predict import Prediction, predict
from npu_kernels.perf.q4nx import Q4_BYTES_PER_WEIGHT, projection_shapes
from npu_kernels.thresholds import DDR_BANDWIDTH_BYTES_S

GROUPS = ("npu", "bo_write", "bo_read", "xrt", "host")
FIGURES = ("ttft_s", "prefill_s", "ms_per_token")
MIN_SHARE = 0.01  # a group under this share of every row's time is not fitted (it stays at the published value)
CONSTANT_SIGMAS = 3.0  # a constant's bar: 3 jackknife SE, so the five hold together ~95% (module docstring)
FIGURE_SIGMAS = 2.0  # a figure's bar: 2 x leave-one-out RMS (~95% for one figure)
PUBLISHED = "mlir-air's published machine (kernel registry + Llama-3.2-1B profile.md, e972f29)"


# a decode token's floor streams every weight once in the smallest format in scope (Q4NX: 4-bit codes + bf16 scale
# and min per 32, npu_kernels.perf.q4nx), so a 4-bit deployment's real figure is never under it; bf16 is 3.2x more
FLOOR_BYTES_PER_WEIGHT = Q4_BYTES_PER_WEIGHT


class CalibrationError(ValueError):
    """Too few or unusable rows to fit: one line saying what is missing."""


@dataclass(frozen=True)
class CalibrationRow:
    """One measured figure of a profiled run: what ran (config, prefill length, decode context, the path's
    switches) and what it measured (`figure` in FIGURES; seconds, ms/token in ms), with where it was recorded."""

    config: ModelConfig
    seq: int
    ctx: int
    switches: Mapping[str, bool]
    figure: str
    measured: float
    label: str = ""


@dataclass
class Calibration:
    scales: dict[str, float]
    scale_errors: dict[str, float]
    fixed: list[str]
    error_bars: dict[str, float]  # figure kind -> relative error bar (2 x LOO RMS)
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def constants(self) -> dict[str, dict[str, Any]]:
        return constants_of(self.scales, self.scale_errors)


def _published() -> dict[str, float]:
    h = host_constants()
    return {"bo_write_bps": h["bo_write_bps"], "bo_read_bps": h["bo_read_bps"], "xrt_call_s": h["xrt_call_s"]}


def constants_of(scales: Mapping[str, float], errors: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """The named per-machine constants of fitted factors, each {value, error, published, unit} (module docstring)."""
    pub = _published()
    out: dict[str, dict[str, Any]] = {}
    for g, name, unit, base, inverse in (("npu", "npu_time_scale", "x published", 1.0, False),
                                         ("bo_write", "bo_write_bps", "B/s", pub["bo_write_bps"], True),
                                         ("bo_read", "bo_read_bps", "B/s", pub["bo_read_bps"], True),
                                         ("xrt", "xrt_call_s", "s", pub["xrt_call_s"], False),
                                         ("host", "host_time_scale", "x published", 1.0, False)):
        s, e = scales[g], errors.get(g, 0.0)
        if inverse:  # a rate: the group's time is bytes / rate
            value = base / s if s > 0 else math.inf
            err = base * e / (s * s) if s > 0 else math.inf
        else:
            value, err = base * s, base * e
        out[name] = {"value": value, "error": err, "published": base, "unit": unit, "group": g}
    return out


def components(p: Prediction, figure: str, config: ModelConfig, switches: Mapping[str, bool]) -> dict[str, float]:
    """Seconds of each group in `figure` of prediction `p` (ms_per_token: milliseconds, as it is measured)."""
    if figure == "ms_per_token":
        return {g: p.totals["decode"][g] for g in GROUPS}
    t = {g: p.totals["prefill"][g] / 1e3 for g in GROUPS}
    if figure == "prefill_s":  # TTFT less the LM head's one call
        head = dispatch_plan(config, dict(switches), p.seq, p.ctx).lm_head.elf
        e = p.per_elf.get(f"prefill:{head}", {})
        for g in ("bo_write", "npu", "bo_read", "xrt"):
            t[g] -= e.get(f"{g}_ms", 0.0) / 1e3
    return t


def figure_floor(config: ModelConfig, figure: str, seq: int, target: str = "npu2") -> float:
    """The least time physics allows `figure` of `config` at prefill length `seq`, in the figure's unit (s; ms for
    ms_per_token): the module docstring's FLOP floor (prefill_s, ttft_s) or DDR floor (ms_per_token)."""
    weights = sum(m * k for i in range(config.n_layers) for m, k in projection_shapes(config, i).values())
    head = config.vocab_size * config.emb_dim
    if figure == "ms_per_token":
        return FLOOR_BYTES_PER_WEIGHT * (weights + head) / DDR_BANDWIDTH_BYTES_S[target] * 1e3
    return (2.0 * weights * seq + (2.0 * head if figure == "ttft_s" else 0.0)) / PEAK_FLOPS[target]


def _unit(figure: str) -> str:
    return "ms" if figure == "ms_per_token" else "s"


def figure_problem(row: CalibrationRow, target: str = "npu2") -> str | None:
    """Why a measured figure cannot be a run of its config (None: it can): not a positive finite number, or under
    the figure's physical floor on the target (`figure_floor`)."""
    value = row.measured
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return f"{row.figure} {value!r} is not a positive finite {_unit(row.figure)}"
    floor = figure_floor(row.config, row.figure, row.seq, target)
    if value < floor:
        what = (f"streaming its weights at {FLOOR_BYTES_PER_WEIGHT} B each (4-bit, the smallest format in scope) at "
                f"{target}'s DDR bandwidth" if row.figure == "ms_per_token" else
                f"its {row.seq}-token prefill's FLOPs at {target}'s peak")
        return (f"{row.figure} {value:.4g} {_unit(row.figure)} is under the {floor:.4g} {_unit(row.figure)} "
                f"{what} takes: beyond physics")
    return None


def physics_problems(scales: Mapping[str, float], npu_times: Sequence[tuple[str, float, float]],
                     fixed: Sequence[str] = (), target: str = "npu2") -> list[str]:
    """Why fitted factors are beyond physics ([]: they are not): a fitted factor that is not a positive finite
    number (a group of time at zero: an infinitely fast BO transfer or XRT call, a free host), a BO rate above the
    target's DDR bandwidth, or, for each (what, the NPU group's time on the published machine, its floor) of
    `npu_times`, an NPU time scaled under that floor (same unit)."""
    out = []
    for g in GROUPS:
        s = scales.get(g)
        if g not in fixed and (not isinstance(s, (int, float)) or not math.isfinite(s) or s <= 0):
            out.append(f"factor {g} = {s!r}: the {g} time of every figure would be zero or not a number")
    ddr = DDR_BANDWIDTH_BYTES_S[target]
    consts = constants_of({g: float(scales.get(g, 1.0)) for g in GROUPS}, {})
    for name in ("bo_write_bps", "bo_read_bps"):
        v = consts[name]["value"]
        if math.isfinite(v) and v > ddr:
            out.append(f"{name} {v:.4g} B/s exceeds {target}'s DDR bandwidth of {ddr:.4g} B/s")
    s_npu = scales.get("npu")
    if isinstance(s_npu, (int, float)) and math.isfinite(s_npu) and s_npu > 0:
        for what, t_npu, floor in npu_times:
            if s_npu * t_npu < floor:
                out.append(f"{what}: the NPU time {s_npu * t_npu:.4g} is under its physical floor {floor:.4g}")
                break
    return out


def row_components(row: CalibrationRow) -> dict[str, float]:
    if row.figure not in FIGURES:
        raise CalibrationError(f"unknown figure {row.figure!r}; expected one of {', '.join(FIGURES)}")
    p = predict(row.config, seq=row.seq, switches=dict(row.switches), ctx=row.ctx)
    return components(p, row.figure, row.config, row.switches)


def _solve(X: np.ndarray, y: np.ndarray, free: list[int]) -> np.ndarray:
    """Factors (1 for the fixed groups) minimising relative error, every factor >= 0."""
    s = np.ones(X.shape[1])
    A = X / y[:, None]
    fixed = [j for j in range(X.shape[1]) if j not in free]
    b = np.ones(len(y)) - A[:, fixed].sum(axis=1)
    scale = A[:, free].max(axis=0)
    s[free] = nnls(A[:, free] / scale, b) / scale
    return s


def fit_calibration(rows: Sequence[CalibrationRow]) -> Calibration:
    """See the module docstring. CalibrationError when the rows cannot determine the factors."""
    X = np.array([[row_components(r)[g] for g in GROUPS] for r in rows], float).reshape(len(rows), len(GROUPS))
    y = np.array([r.measured for r in rows], float)
    if len(rows) and (y <= 0).any():
        raise CalibrationError("a measured figure is not positive")
    share = (X / y[:, None]).max(axis=0) if len(rows) else np.zeros(len(GROUPS))
    free = [j for j, g in enumerate(GROUPS) if share[j] >= MIN_SHARE]
    if len(rows) < len(free) + 2:
        raise CalibrationError(f"{len(rows)} measured figure(s) cannot fit {len(free) or len(GROUPS)} per-machine "
                               f"constants with a leave-one-out error bar: at least {len(free) + 2} are needed "
                               "(profile more runs on the device: Phases 4-6 record one per switch set)")
    s = _solve(X, y, free)
    fixed = [g for j, g in enumerate(GROUPS) if j not in free]
    beyond = physics_problems(dict(zip(GROUPS, map(float, s))), [
        (r.label or f"row {i + 1}", float(X[i, GROUPS.index("npu")]), figure_floor(r.config, r.figure, r.seq))
        for i, r in enumerate(rows)], fixed)
    if beyond:
        raise CalibrationError(f"the fitted constants are beyond physics ({'; '.join(beyond)}): the measured figures "
                               "cannot separate the groups of time (profile more runs on the device: Phases 4-6 "
                               "record one per switch set)")
    loo_s, resid = [], []
    for i in range(len(rows)):
        keep = np.arange(len(rows)) != i
        si = _solve(X[keep], y[keep], free)
        loo_s.append(si)
        resid.append(float(X[i] @ si / y[i] - 1.0))
    loo = np.array(loo_s)
    n = len(rows)
    se = np.sqrt((n - 1) / n * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0))
    rms_all = math.sqrt(sum(r * r for r in resid) / n)
    bars = {}
    for f in FIGURES:
        rs = [r for r, row in zip(resid, rows) if row.figure == f]
        bars[f] = FIGURE_SIGMAS * (math.sqrt(sum(r * r for r in rs) / len(rs)) if rs else rms_all)
    data = [{"label": r.label, "figure": r.figure, "measured": r.measured, "seq": r.seq, "ctx": r.ctx,
             "switches": dict(r.switches), "published_components": dict(zip(GROUPS, map(float, X[i]))),
             "fitted": float(X[i] @ s), "loo_residual": round(resid[i], 6)} for i, r in enumerate(rows)]
    return Calibration(scales=dict(zip(GROUPS, map(float, s))),
                       scale_errors=dict(zip(GROUPS, (float(CONSTANT_SIGMAS * v) for v in se))),
                       fixed=fixed, error_bars=bars, rows=data)


def calibrated(p: Prediction, scales: Mapping[str, float], error_bars: Mapping[str, float], config: ModelConfig,
               switches: Mapping[str, bool]) -> dict[str, float]:
    """TTFT (s) and ms/token of prediction `p` on the calibrated machine, each with its error bar (same unit).
    CalibrationError, naming why, when the calibration's factors put either figure beyond physics
    (`physics_problems`: a recorded calibration is re-checked here, whatever wrote it)."""
    pre, dec = components(p, "ttft_s", config, switches), components(p, "ms_per_token", config, switches)
    floors = (figure_floor(config, "ttft_s", p.seq), figure_floor(config, "ms_per_token", p.seq))
    beyond = physics_problems(scales, [("TTFT", pre["npu"], floors[0]), ("ms/token", dec["npu"], floors[1])])
    if beyond:
        raise CalibrationError(f"its constants are beyond physics: {'; '.join(beyond)}")
    ttft = sum(scales[g] * v for g, v in pre.items())
    token = sum(scales[g] * v for g, v in dec.items())
    bars = [error_bars.get(f) for f in ("ttft_s", "ms_per_token")]
    if not all(isinstance(b, (int, float)) and math.isfinite(b) and b >= 0 for b in bars):
        raise CalibrationError(f"its error bars {bars} are not non-negative finite numbers")
    return {"ttft_s": round(ttft, 6), "ttft_error_s": round(ttft * error_bars["ttft_s"], 6),
            "ms_per_token": round(token, 4), "ms_per_token_error": round(token * error_bars["ms_per_token"], 4),
            "decode_tokens_per_s": round(1e3 / token, 4) if token > 0 else None}
