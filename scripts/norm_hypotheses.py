"""Issue #17: parameter-free RMSNorm / LayerNorm datapath hypotheses, each on every published line at once.

    PYTHONPATH=$PWD python scripts/norm_hypotheses.py [rmsnorm|layernorm]

A hypothesis picks, for each step of the kernel (mlir-air weighted_rms_norm.py / layer_norm.py), what
happens to its result: `floor` (bf16, the AIE reset rounding), `rne` (bf16, nearest even), `trunc` (bf16,
toward zero) or `none` (kept in FP32). Prints ours vs NPU2 for the three statistics on every line, and how
many lines agree in every printed digit. npu_kernels.numerics.executors.emulated implements the winner.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npu_kernels.numerics.bf16 import floor_bf16, rne_bf16_  # noqa: E402
from npu_kernels.numerics.harness_inputs import digits_agreeing, harness_case, precision_stats, significant_digits  # noqa: E402

LINES = json.loads((ROOT / "tests" / "fixtures" / "precision_lines.json").read_text())["lines"]
STATS = ("mean_rel_L1", "rel_err_max", "abs_err_max")
EPS = np.float32(1e-5)


def rnd(x, mode: str) -> np.ndarray:
    x = np.array(x, dtype=np.float32, copy=True)
    if mode == "floor":
        return floor_bf16(x, out=x)
    if mode == "rne":
        return rne_bf16_(x)
    if mode == "trunc":
        x.view(np.uint32)[...] &= np.uint32(0xFFFF0000)
        return x
    assert mode == "none"
    return x


def lane_sum(v: np.ndarray, lanes: int) -> np.ndarray:
    """FP32 sum over the last axis: numpy's (lanes 0), or `lanes` accumulators in order + a halving tree."""
    if lanes == 0:
        return v.sum(axis=-1, keepdims=True, dtype=np.float32)
    acc = np.zeros((v.shape[0], lanes), np.float32)
    for j in range(0, v.shape[1], lanes):
        acc += v[:, j : j + lanes]
    while acc.shape[1] > 1:
        acc = acc[:, : acc.shape[1] // 2] + acc[:, acc.shape[1] // 2 :]
    return acc


def rmsnorm(c, h) -> np.ndarray:
    x, w = c.inputs["x"], c.inputs["w"]
    ms = lane_sum(rnd(x * x, h["sq"]), h.get("lanes", 0)) / np.float32(x.shape[-1])
    r = rnd(np.float32(1.0) / np.sqrt(ms + EPS), h["rstd"])
    if h.get("fused"):
        return rnd(x * r * w, h["out"])
    return rnd(rnd(x * r, h["xr"]) * w, h["out"])


def layernorm(c, h) -> np.ndarray:
    x, w, b = c.inputs["x"], c.inputs["w"], c.inputs["b"]
    n = np.float32(x.shape[-1])
    mean = rnd(x.sum(axis=-1, keepdims=True, dtype=np.float32) / n, h["mean"])
    d1 = rnd(x - mean, h["d1"])  # the variance pass's x - mean
    var = rnd(d1 * d1, h["sq"]).sum(axis=-1, keepdims=True, dtype=np.float32) / n
    r = rnd(np.float32(1.0) / np.sqrt(var + EPS), h["rstd"])
    y = rnd(rnd(rnd(x - mean, "floor") * r, h["xr"]) * w, h["yw"])
    return rnd(y + b, "floor")


def table(kernel: str, fn, hyps: list[tuple[str, dict]]) -> None:
    cases = [(ln, harness_case(kernel, ln["shape"], "bf16-out")) for ln in LINES if ln["kernel"] == kernel]
    print(" | ".join(f"{ln['id']}: " + "/".join(ln.get(s, "-") for s in STATS) for ln, _ in cases))
    for name, h in hyps:
        cells, exact = [], 0
        for ln, c in cases:
            st = precision_stats(fn(c, h), c.reference, "bf16")
            ok = all(digits_agreeing(getattr(st, s), ln[s]) == significant_digits(ln[s]) for s in STATS if s in ln)
            exact += ok
            cells.append(f"{st.mean_rel_L1:.3e}/{st.rel_err_max:.2e}/{st.abs_err_max:.3g}{'*' if ok else ' '}")
        print(f"{exact}/{len(cases)} {name:44s} " + " ".join(cells), flush=True)


def rms_hypotheses() -> list[tuple[str, dict]]:
    hyps = []
    for sq, rstd, xr, out in itertools.product(["none", "floor", "rne", "trunc"], ["floor", "rne", "none"], ["floor", "rne"], ["floor", "rne"]):
        hyps.append((f"sq={sq} rstd={rstd} xr={xr} out={out}", dict(sq=sq, rstd=rstd, xr=xr, out=out)))
    for sq, rstd, out in itertools.product(["none", "floor", "rne"], ["floor", "rne", "none"], ["floor", "rne"]):
        hyps.append((f"sq={sq} rstd={rstd} x*rstd*w fused out={out}", dict(sq=sq, rstd=rstd, out=out, fused=True)))
    for lanes in (16, 32):
        hyps.append((f"sq=none rstd=floor xr=floor out=floor lanes={lanes}", dict(sq="none", rstd="floor", xr="floor", out="floor", lanes=lanes)))
    return hyps


def ln_hypotheses() -> list[tuple[str, dict]]:
    hyps = []
    for mean, d1, sq, rstd, xr, yw in itertools.product(["floor", "rne"], ["floor", "rne"], ["none", "floor", "rne"], ["floor", "rne"], ["floor", "none"], ["floor", "none"]):
        h = dict(mean=mean, d1=d1, sq=sq, rstd=rstd, xr=xr, yw=yw)
        hyps.append((" ".join(f"{k}={v}" for k, v in h.items()), h))
    return hyps


if __name__ == "__main__":
    which = sys.argv[1:] or ["rmsnorm", "layernorm"]
    if "rmsnorm" in which:
        table("rmsnorm", rmsnorm, rms_hypotheses())
    if "layernorm" in which:
        table("layernorm", layernorm, ln_hypotheses())
