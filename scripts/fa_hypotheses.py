"""Issue #17: which FlashAttention datapath detail moves the emulator onto NPU2's `[precision]` lines.

    PYTHONPATH=. python scripts/fa_hypotheses.py

Every FlashAttention line of tests/fixtures/precision_lines.json (mlir-air kernel_registry/details/FlashAttention_bf16.md:151-156,
attn_npu2.py's own seed-42 inputs) under each candidate datapath at once: the two printed statistics and
how many digits of each agree with NPU2's. Each candidate changes one step of the emulator's flash attention
(npu_kernels.numerics.executors.emulated_flash) and has no free parameter:

  baseline       1/l = the exactly rounded bf16 reciprocal, sum_g as one FP32 numpy sum
  inv-aie_api    the emulator now (npu_kernels.numerics.executors.emulated_nlf.inv_bf16): 1/l as aie_api's aie2p
                 `aie::inv` for a bf16 vector computes it (detail/aie2p/elementary.hpp:196-273: magic 0x7eb5
                 seed, one polynomial step, one Newton step, every intermediate rounded to bf16), called
                 by div_gp_sp (attn_npu2.cc:613)
  divide         O / l in FP32, one rounding (no reciprocal)
  inv-f32        1/l in FP32, not rounded to bf16, then O * (1/l) rounded once
  sum_g-lanes    sum_g's order (attn_npu2.cc:516-534): 8 FP32 lanes over the 8 column blocks, then
                 aie_api's reduce_add halving tree of the 8 lanes (detail/aie2/add_reduce.hpp:318-326)
  inv+lanes      inv-aie_api and sum_g-lanes together
  inv+exp2-floor11  inv-aie_api, and VEXP2 floors its input to 11 fractional bits (not toward zero)
  inv+exp2-round7   inv-aie_api, and VEXP2 rounds its 11-bit fraction to the 7 mantissa bits
                 (both exp2 variants would move tanh too: SiLU / GELU lines not checked here)
  pv-no-bfp16    contrast: P enters P.V as bf16 (no BFP16 block step on P)
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from benchmarks.bench_precision_lines import load_lines
from npu_kernels.numerics.bf16 import rne_bf16_, to_bf16
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.executors import emulated_flash as emulated  # the module whose steps the hypotheses patch
from npu_kernels.numerics.executors import emulated_nlf
from npu_kernels.numerics.executors.emulated import EmulatedExecutor
from npu_kernels.numerics.harness_inputs import digits_agreeing, harness_case, precision_stats, significant_digits

STATS = ("mean_rel_L1", "abs_err_max")


def exact_recip(s: np.ndarray) -> np.ndarray:
    """The model before: the exactly rounded bf16 reciprocal."""
    return to_bf16(np.float32(1.0) / s)


def rowsum_lanes(p: np.ndarray) -> np.ndarray:
    """sum_g: lane c sums p[cb*8 + c] over cb = 0..7 in FP32, then the 8 lanes reduce as a halving tree."""
    w = p.shape[-1]
    pad = (-w) % 64
    if pad:
        p = np.concatenate([p, np.zeros(p.shape[:-1] + (pad,), np.float32)], axis=-1)
    blocks = p.reshape(p.shape[:-1] + (p.shape[-1] // 8, 8))  # (..., column block, column in block)
    acc = np.zeros(blocks.shape[:-2] + (8,), np.float32)
    for cb in range(blocks.shape[-2]):
        acc = acc + blocks[..., cb, :]
    acc = acc[..., :4] + acc[..., 4:]
    acc = acc[..., :2] + acc[..., 2:]
    return to_bf16(acc[..., 0] + acc[..., 1])


@contextmanager
def patched(**names):
    old = {k: getattr(emulated, k) for k in names}
    for k, v in names.items():
        setattr(emulated, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(emulated, k, v)


@contextmanager
def divide():
    orig = emulated._FlashState.merge
    seen = {}

    def capture(s):
        seen["s"] = s
        return np.ones_like(s)

    def merge(self, stages):
        with patched(_fa_inv=capture):
            o = orig(self, stages)  # o_c * 1: the bf16 O before the normalisation
        return rne_bf16_(np.divide(o, seen["s"][..., None], dtype=np.float32))

    emulated._FlashState.merge = merge
    try:
        yield
    finally:
        emulated._FlashState.merge = orig


def _exp2_variant(fix: str):
    """exp2_nlf with another fixed-point step: 'floor11' floors (not truncates) z to 11 fractional bits,
    'round7' rounds the 11-bit fraction to the 7 mantissa bits (nearest, ties up) instead of flooring."""

    def exp2(z, nonpositive: bool = False):
        z = np.maximum(np.asarray(z, np.float32), -emulated_nlf._EXP2_ARG_LIMIT)
        t = z * np.float32(2**11)
        with np.errstate(invalid="ignore"):
            fixed = (np.floor(t) if fix == "floor11" else t).astype(np.int32)
        fixed = (fixed + 8) >> 4 if fix == "round7" else fixed >> 4
        fixed += 127 << 7
        np.copyto(fixed, 0, where=fixed < (1 << 7))
        out = (fixed << 16).view(np.float32)
        out[np.isnan(z)] = np.nan
        return out

    return exp2


def _no_bfp16_on_p(x, axis=-1, block=8, nonneg=False, _q=emulated.bfp16_quantize):
    return np.asarray(x, np.float32) if nonneg else _q(x, axis=axis, block=block, nonneg=nonneg)


HYPOTHESES = {
    "baseline": lambda: patched(_fa_inv=exact_recip),
    "inv-aie_api": lambda: patched(),  # the emulator now (npu_kernels.numerics.executors.emulated_nlf.inv_bf16)
    "divide": divide,
    "inv-f32": lambda: patched(_fa_inv=lambda s: np.float32(1.0) / s),
    "sum_g-lanes": lambda: patched(_fa_inv=exact_recip, _fa_rowsum=rowsum_lanes),
    "inv+lanes": lambda: patched(_fa_rowsum=rowsum_lanes),
    "inv+exp2-floor11": lambda: patched(exp2_nlf=_exp2_variant("floor11")),
    "inv+exp2-round7": lambda: patched(exp2_nlf=_exp2_variant("round7")),
    "pv-no-bfp16": lambda: patched(_fa_inv=exact_recip, bfp16_quantize=_no_bfp16_on_p),
}


def run_line(line: dict, ex: EmulatedExecutor) -> dict:
    spec = get_spec(line["kernel"])
    shape = spec.normalize_shape(line["shape"])
    case = harness_case(line["kernel"], shape, line["contract"])
    out = spec.call(ex, case.inputs, shape, line["contract"], None)
    st = precision_stats(out, case.reference, case.out_dtype)
    return {s: (getattr(st, s), digits_agreeing(getattr(st, s), line[s]), significant_digits(line[s])) for s in STATS}


def main() -> int:
    lines = [ln for ln in load_lines() if ln["kernel"] == "flash_attention"]
    for dk in (64, 128):  # attn_npu2.cc:178,381: (bfloat16)(1.44269504089 / sqrt(dk_full)), a double
        exact = np.float64(1.44269504089 / math.sqrt(dk))
        via_f32 = to_bf16(np.float32(exact))
        print(f"log2e/sqrt({dk}) = {exact:.9f}: bf16 via float32 {via_f32:.9f}, emulator "
              f"{to_bf16(np.float32(emulated.LOG2E / math.sqrt(dk))):.9f}")
    ex = EmulatedExecutor("npu2")
    print(f"\n{'hypothesis':<17} " + " ".join(f"{ln['id']:>24}" for ln in lines) + "   exact lines / digits")
    for name, make in HYPOTHESES.items():
        cells, exact, digits = [], 0, 0
        for ln in lines:
            with make():
                r = run_line(ln, ex)
            exact += all(r[s][1] == r[s][2] for s in STATS)
            digits += sum(r[s][1] for s in STATS)
            cells.append(" ".join(f"{r[s][0]:.3e}({r[s][1]})" for s in STATS))
        print(f"{name:<17} " + " ".join(f"{c:>24}" for c in cells) + f"   {exact}/{len(lines)} {digits}")
    print(f"{'NPU2':<17} " + " ".join(f"{ln['mean_rel_L1'] + ' ' + ln['abs_err_max']:>24}" for ln in lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
