"""Accuracy of the NPU2 performance model: LOO per kernel, Llama-3.2-1B vs its profile, the held-out table.

    python benchmarks/bench_perf_model.py [--out FILE.json]

Prints (1) the leave-one-out table over the registry rows, (2) predict() for Llama-3.2-1B beside the
profile.md figures it was calibrated on (the deployment as profiled: an eight-launch o_gemv_ffn), and the
e972f29 deployment (three-launch o_gemv_ffn, mlir-air #1631) beside the README's Llama-3.2-1B row, (3) the
held-out check: predict() for every other bf16 model of mlir-air's llms/README.md performance table beside its
measured TTFT and tokens/s. The held-out figures are copied here only to compare - nothing is fitted to them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npu_kernels.model.architecture import load_raw_config, resolve  # noqa: E402
from npu_kernels.perf.anchors import profile  # noqa: E402
from npu_kernels.perf.fit import loo, loo_table  # noqa: E402
from npu_kernels.perf.predict import predict  # noqa: E402

CONFIGS = ROOT / "tests" / "fixtures" / "configs"
# programming_examples/llms/README.md "Performance (NPU2, seq_len=2048, bf16)", the bf16 rows other than
# Llama-3.2-1B: (config fixture, TTFT s, decode tok/s, ELF/layer prefill, decode). HELD OUT - never fitted.
HELD_OUT_SRC = "programming_examples/llms/README.md:62-69"
# the README's Llama-3.2-1B row (same campaign as the held-out rows, 2026-06, after #1631): TTFT s, tok/s
LLAMA_README = (1.21, 12.2, "programming_examples/llms/README.md:61")
TOLERANCE = 0.15  # issue #24: decode and TTFT within ±15% for every held-out model (reported, never fitted to)
HELD_OUT = {
    "SmolLM2-1.7B": ("smollm2-1.7b.json", 2.02, 8.0, 3, 2),
    "Qwen2.5-0.5B": ("qwen2.5-0.5b.json", 0.99, 11.9, 4, 5),
    "Qwen3-0.6B": ("qwen3-0.6b.json", 1.52, 11.7, 3, 2),
    "Qwen3-1.7B": ("qwen3-1.7b.json", 2.08, 7.4, 3, 2),
    "Qwen2.5-1.5B": ("qwen2.5-1.5b.json", 2.43, 6.6, 5, 5),
    "Llama-3.2-3B": ("llama-3.2-3b.json", 3.70, 4.7, 3, 5),
    "Qwen2.5-3B": ("qwen2.5-3b.json", 4.24, 3.5, 6, 5),
    "Qwen3-4B": ("qwen3-4b.json", 5.45, 3.5, 7, 5),
}


def config(name: str):
    return resolve(load_raw_config(CONFIGS / name))


def llama_comparison() -> dict:
    p = predict(config("llama-3.2-1b.json"), profiled=True)
    prof = profile()
    rows = {"ttft_s": (p.ttft_s, prof["ttft_s"]["value"]), "ms_per_token": (p.ms_per_token, prof["ms_per_token"]["value"])}
    for elf, v in prof["prefill_per_call_ms"].items():
        if elf != "src":
            rows[f"prefill:{elf} ms/call"] = (p.per_elf[f"prefill:{elf}"]["per_call_ms"], v)
    for elf, v in prof["decode_per_call_ms"].items():
        if elf != "src":
            rows[f"decode:{elf} ms/call"] = (p.per_elf[f"decode:{elf}"]["per_call_ms"], v)
    return {k: {"modelled": round(m, 4), "measured": ms, "error": round(m / ms - 1, 4)} for k, (m, ms) in rows.items()}


def llama_e972f29() -> dict:
    """Llama-3.2-1B as deployed at e972f29 beside the README's row (not fitted: the profile is the calibration)."""
    p, (ttft, tps, src) = predict(config("llama-3.2-1b.json")), LLAMA_README
    return {"ttft_s": p.ttft_s, "measured_ttft_s": ttft, "ttft_error": round(p.ttft_s / ttft - 1, 4),
            "tokens_per_s": p.decode_tokens_per_s, "measured_tokens_per_s": tps,
            "tps_error": round(p.decode_tokens_per_s / tps - 1, 4), "src": src}


def held_out() -> dict:
    out = {}
    for model, (cfg, ttft, tps, pe, de) in HELD_OUT.items():
        p = predict(config(cfg))
        out[model] = {"ttft_s": p.ttft_s, "measured_ttft_s": ttft, "ttft_error": round(p.ttft_s / ttft - 1, 4),
                      "tokens_per_s": p.decode_tokens_per_s, "measured_tokens_per_s": tps,
                      "tps_error": round(p.decode_tokens_per_s / tps - 1, 4),
                      "elf_per_layer": f"{p.prefill_calls_per_layer}/{p.decode_calls_per_layer}",
                      "measured_elf_per_layer": f"{pe}/{de}"}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the three tables as JSON here")
    args = ap.parse_args(argv)
    table = loo_table(loo())
    print("Leave-one-out over the registry rows (refit without the row, predict it)")
    print(f"{'kernel':16s} {'rows':>4s} {'metric':8s} {'median|err|':>11s} {'worst|err|':>10s}  worst row")
    for k, t in table.items():
        print(f"{k:16s} {t['rows']:4d} {t['metric']:8s} {t['median_abs_error']:11.1%} {t['worst_abs_error']:10.1%}  "
              f"{t['worst_src'].split('/')[-1]}")
    llama = llama_comparison()
    print("\nLlama-3.2-1B: modelled vs profile.md (calibration target)")
    for k, r in llama.items():
        print(f"{k:34s} {r['modelled']:10.3f} {r['measured']:10.3f} {r['error']:+8.1%}")
    tps_err = 92.0 / llama["ms_per_token"]["modelled"] - 1  # profile.md:10, as tokens/s
    print(f"{'decode tokens/s (as profiled)':34s} {1e3 / llama['ms_per_token']['modelled']:10.3f} {1e3 / 92.0:10.3f} "
          f"{tps_err:+8.1%}")
    now = llama_e972f29()
    print(f"\nLlama-3.2-1B at e972f29 (three-launch o_gemv_ffn) vs the README row ({now['src']}; not fitted): "
          f"TTFT {now['ttft_s']:.2f} s vs {now['measured_ttft_s']:.2f} ({now['ttft_error']:+.1%}), "
          f"{now['tokens_per_s']:.2f} vs {now['measured_tokens_per_s']:.1f} tok/s ({now['tps_error']:+.1%})")
    held = held_out()
    print(f"\nHeld-out ({HELD_OUT_SRC}; never fitted)")
    print(f"{'model':14s} {'TTFT s':>7s} {'meas':>6s} {'err':>7s} {'tok/s':>6s} {'meas':>5s} {'err':>7s} {'ELF/layer':>9s} {'meas':>5s}")
    for m, r in held.items():
        print(f"{m:14s} {r['ttft_s']:7.2f} {r['measured_ttft_s']:6.2f} {r['ttft_error']:+7.1%} {r['tokens_per_s']:6.2f} "
              f"{r['measured_tokens_per_s']:5.1f} {r['tps_error']:+7.1%} {r['elf_per_layer']:>9s} {r['measured_elf_per_layer']:>5s}")
    within = {m: abs(r["tps_error"]) <= TOLERANCE and abs(r["ttft_error"]) <= TOLERANCE for m, r in held.items()}
    off = [f"{m} tok/s {r['tps_error']:+.1%}, TTFT {r['ttft_error']:+.1%}" for m, r in held.items() if not within[m]]
    print(f"\nwithin ±{TOLERANCE:.0%} (TTFT and tok/s): {sum(within.values())}/{len(held)} held-out models"
          + (f"; outside: {'; '.join(off)}" if off else ""))
    llama_ok = abs(tps_err) <= TOLERANCE and abs(llama["ttft_s"]["error"]) <= TOLERANCE
    print(f"all nine (the eight + Llama-3.2-1B against its profile): {sum(within.values()) + llama_ok}/9; "
          f"Llama-3.2-1B at e972f29 against the README row: tok/s {now['tps_error']:+.1%}, TTFT {now['ttft_error']:+.1%}")
    print("ELF/layer 'meas' is the README's count; for Qwen2.5-1.5B / -3B it reads swiglu+down_add as one dispatch, "
          "while their ARCHITECTURE.md diagrams and prefill code run them as two (tests/unit/test_dispatch_architectures.py)")
    if args.out:
        Path(args.out).write_text(json.dumps({"loo": table, "llama32_1b": llama, "llama32_1b_e972f29": now,
                                              "held_out": held,
                                              "held_out_src": HELD_OUT_SRC}, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
