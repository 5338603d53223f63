"""Comparators: measuring an output against its reference, and judging it, kept apart.

`measure(out, ref)` returns numbers only (`Metrics`); `judge(out, ref, rtol, atol)` returns a `Verdict`
that carries `passed` together with the numbers and the thresholds it used, so a reader can re-derive it.
The gate is mlir-air's: every element must satisfy `|out - ref| <= atol + rtol * |ref|` (the full output,
zero mismatches). A NaN in the output is a mismatch and is counted, never a crash. Nothing here gates on
cosine or correlation: a uniformly 2x output has cosine 1.0 and fails this gate.

The statistics follow mlir-air's XRTRunner `[precision]` line: mean_rel_L1 = mean|out-ref| / mean|ref|,
max_rel = max |out-ref| / (|ref| + 1e-30), max_abs = max |out-ref|. They are taken over the elements where
both sides are finite (NaN/inf elements are reported by count); pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

_TINY = 1e-30  # the harness's guard against a zero denominator


@dataclass(frozen=True)
class Metrics:
    """How far an output is from its reference (no judgement)."""

    mean_rel_L1: float
    max_abs: float
    max_rel: float
    nan_count: int  # NaN elements of the output
    n_elements: int
    nonfinite_count: int = 0  # NaN or inf elements of the output
    ref_max_abs: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """The element-wise gate's decision, with the thresholds and the numbers behind it."""

    passed: bool
    mismatches: int
    rtol: float
    atol: float
    worst_ratio: float  # max over elements of |out-ref| / (atol + rtol*|ref|); inf when a NaN/inf is present
    metrics: Metrics

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"

    def to_json(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict
        return d


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two arrays (flattened, float64); 0.0 when either is all zeros."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denom) if denom > 0 else 0.0


def _pair(out, ref) -> tuple[np.ndarray, np.ndarray]:
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        raise ValueError(f"output shape {out.shape} differs from reference shape {ref.shape}")
    return out.astype(np.float32, copy=False).ravel(), ref.astype(np.float32, copy=False).ravel()


def measure(out, ref) -> Metrics:
    """mean_rel_L1, max_abs, max_rel over the finite elements, plus NaN / non-finite counts."""
    o, r = _pair(out, ref)
    n = int(o.size)
    nan_count = int(np.count_nonzero(np.isnan(o)))
    finite = np.isfinite(o) & np.isfinite(r)
    nonfinite = int(n - np.count_nonzero(np.isfinite(o)))
    if not finite.all():
        o, r = o[finite], r[finite]
    if o.size == 0:
        nan = float("nan")
        return Metrics(nan, nan, nan, nan_count, n, nonfinite, nan)
    diff = np.abs(o - r)  # exact for bf16-valued pairs, correctly rounded otherwise
    aref = np.abs(r)
    mean_diff = float(np.sum(diff, dtype=np.float64)) / o.size
    mean_ref = float(np.sum(aref, dtype=np.float64)) / o.size
    max_rel = float(np.max(diff.astype(np.float64) / (aref.astype(np.float64) + _TINY)))
    return Metrics(
        mean_rel_L1=mean_diff / (mean_ref + _TINY),
        max_abs=float(diff.max()),
        max_rel=max_rel,
        nan_count=nan_count,
        n_elements=n,
        nonfinite_count=nonfinite,
        ref_max_abs=float(aref.max()),
    )


def judge(out, ref, rtol: float, atol: float) -> Verdict:
    """Every element must satisfy |out - ref| <= atol + rtol*|ref|; NaN (or inf) counts as a mismatch."""
    o, r = _pair(out, ref)
    diff = np.abs(o.astype(np.float64) - r.astype(np.float64))
    bound = atol + rtol * np.abs(r.astype(np.float64))
    with np.errstate(invalid="ignore"):
        ok = diff <= bound  # False for NaN
    mismatches = int(ok.size - np.count_nonzero(ok))
    finite = np.isfinite(diff)
    if finite.all():
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = float(np.max(diff / bound)) if diff.size else 0.0
    else:
        worst = math.inf
    metrics = measure(out, ref)
    return Verdict(
        passed=mismatches == 0 and metrics.nan_count == 0,
        mismatches=mismatches,
        rtol=float(rtol),
        atol=float(atol),
        worst_ratio=worst,
        metrics=metrics,
    )


def mismatch_extent(out, ref, rtol: float, atol: float) -> tuple[float | None, float | None]:
    """Over the elements that fail `|out-ref| <= atol + rtol*|ref|`: the largest |ref| and the largest
    |out-ref| (None, None when every element passes). Lets a reader tell a handful of atol-dominated
    near-zero elements from a real datapath error without the arrays."""
    o, r = _pair(out, ref)
    err = np.abs(o - r)
    bad = ~(err <= np.float32(atol) + np.float32(rtol) * np.abs(r))  # NaN counts as bad
    if not bad.any():
        return None, None
    return float(np.nanmax(np.abs(r[bad]))), float(np.nanmax(np.where(np.isfinite(err[bad]), err[bad], np.inf)))
