"""Fitting the kernel cost model's constants to the registry rows, and its leave-one-out accuracy.

`fit(rows)` solves non-negative least squares on relative error: each row contributes
`(sum_j amount_ij * c_j) / measured_i - 1`, so a 100 us row weighs as much as a 40 ms one, and no constant
can turn negative (a negative time per byte has no physical meaning). `loo(rows)` refits without each row
in turn and predicts it; `loo_table()` summarises median and worst |error| per kernel (GEMM's error is on
GFLOP/s, `measured/predicted - 1`; the others' on latency, `predicted/measured - 1`).

Deterministic (a fixed Lawson-Hanson active-set solver in numpy; no randomness).
"""

from __future__ import annotations

from statistics import median
from typing import Iterable

import numpy as np

from npu_kernels.numerics.kernels import piece
from npu_kernels.perf.anchors import kernel_rows
from npu_kernels.perf.constants import FLOORS
from npu_kernels.perf.kernel_model import kernel_features


def nnls(A: np.ndarray, b: np.ndarray, max_iter: int = 500) -> np.ndarray:
    """min ||A x - b|| subject to x >= 0 (Lawson & Hanson, 1974)."""
    n = A.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, bool)
    w = A.T @ (b - A @ x)
    for _ in range(max_iter):
        if passive.all() or w[~passive].max(initial=-np.inf) <= 1e-12 * max(1.0, np.abs(w).max()):
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > 1e-15
        w = A.T @ (b - A @ x)
    return x


def design(rows: Iterable[dict]) -> tuple[list[dict], list[str]]:
    feats = [kernel_features(r["kernel"], r["shape"], r.get("tile")) for r in rows]
    names = sorted({k for f in feats for k in f})
    return feats, names


def fit(rows: list[dict]) -> dict[str, float]:
    """Fitted constants (seconds per unit) for every feature the rows use. A constant with a physical
    lower bound (`constants.FLOORS`: no compute tile beats its MMA peak) is fitted as floor + c, c >= 0."""
    feats, names = design(rows)
    meas = np.array([r["latency_us"] * 1e-6 for r in rows])
    A = np.array([[f.get(n, 0.0) for n in names] for f in feats]) / meas[:, None]
    floor = np.array([FLOORS.get(n, 0.0) for n in names])
    b = np.ones(len(rows)) - A @ floor
    scale = A.max(axis=0)
    scale[scale == 0] = 1.0
    x = nnls(A / scale, b) / scale + floor
    return dict(zip(names, (float(v) for v in x)))


def row_error(row: dict, predicted_s: float) -> float:
    measured = row["latency_us"] * 1e-6
    if piece(row["kernel"], "fit_metric") == "GFLOP/s":  # on GFLOP/s
        return measured / predicted_s - 1.0
    return predicted_s / measured - 1.0


def loo(rows: list[dict] | None = None) -> list[dict]:
    """Refit without each row, predict it: one record per row with the error."""
    rows = kernel_rows() if rows is None else rows
    feats, _ = design(rows)
    out = []
    for i, r in enumerate(rows):
        c = fit(rows[:i] + rows[i + 1:])
        pred = sum(v * c.get(k, 0.0) for k, v in feats[i].items())
        out.append({"kernel": r["kernel"], "shape": r["shape"], "src": r["src"], "measured_us": r["latency_us"],
                    "predicted_us": round(pred * 1e6, 2), "error": round(row_error(r, pred), 4)})
    return out


def loo_table(records: list[dict] | None = None) -> dict[str, dict]:
    """Per kernel: rows, median |error|, worst |error| (and the worst row's source)."""
    records = loo() if records is None else records
    table: dict[str, dict] = {}
    for k in sorted({r["kernel"] for r in records}):
        rs = [r for r in records if r["kernel"] == k]
        worst = max(rs, key=lambda r: abs(r["error"]))
        table[k] = {"rows": len(rs), "median_abs_error": round(median(abs(r["error"]) for r in rs), 4),
                    "worst_abs_error": round(abs(worst["error"]), 4), "worst_src": worst["src"],
                    "metric": piece(k, "fit_metric")}
    return table
