"""The 4-bit (Q4NX) performance model beside every 4-bit README of mlir-air that states a figure.

    python benchmarks/bench_perf_q4nx.py [--out FILE.json] [--png FILE.png]

Prints `ledger predict --weights q4nx-device` (npu_kernels.perf.q4nx.predict_weights) for each model of
npu_kernels/perf/anchors_q4nx.toml beside its README's measured TTFT and decode tokens/s. One row is the
calibration anchor (llama32_1b_q4nx: its decode rate fits the one stream-rate constant); every other row is
held out - copied only to compare, nothing is fitted to it. Also the decode weight bytes the model streams
beside the sizes the READMEs state, and the stated figures of models outside the tool's scope.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npu_kernels.perf.q4nx import anchors, calibration, held_out_table  # noqa: E402


def rows() -> list[dict]:
    out = []
    for r in held_out_table():
        (tt, mt), (tp, mp), (wg, mw) = r["ttft_s"], r["decode_tok_s"], r["decode_weights_gib"]
        out.append({"model": r["model"], "role": r["role"], "src": r["src"],
                    "ttft_s": tt, "measured_ttft_s": mt, "ttft_error": round(tt / mt - 1, 4) if mt else None,
                    "tokens_per_s": tp, "measured_tokens_per_s": mp, "tps_error": round(tp / mp - 1, 4),
                    "decode_weights_gib": wg, "stated_decode_weights_gib": mw,
                    "measured_nightly_tokens_per_s": r["nightly_decode_tok_s"][1],
                    "nightly_tps_error": (round(tp / r["nightly_decode_tok_s"][1] - 1, 4)
                                          if r["nightly_decode_tok_s"][1] else None)})
    return out


def write_png(table: list[dict], path: str) -> str:
    import matplotlib  # here, not at the top: only the chart needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    names = [r["model"] + (" (cal.)" if r["role"] == "calibration" else "") for r in table]
    x = range(len(table))
    for ax, key, label in ((axes[0], "ttft_s", "TTFT at 2048 (s)"), (axes[1], "tokens_per_s", "decode (tok/s)")):
        ax.bar([i - 0.2 for i in x], [r[key] for r in table], 0.4, label="modelled NPU2")
        ax.bar([i + 0.2 for i in x], [r["measured_" + key] or 0 for r in table], 0.4, label="measured NPU2 (README)")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_title(label)
    axes[0].legend(fontsize=8)
    fig.suptitle("4-bit on-device deployments: modelled vs mlir-air's READMEs (one calibration row, rest held out)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the table as JSON here")
    ap.add_argument("--png", help="write a bar chart of modelled vs measured here")
    args = ap.parse_args(argv)
    table = rows()
    cal = calibration()
    print(f"4-bit decode stream rate {cal['stream_bps'] / 1e9:.2f} GB/s, calibrated on {cal['src']} only\n")
    print(f"{'model':14s} {'role':11s} {'TTFT s':>7s} {'meas':>6s} {'err':>7s} {'tok/s':>6s} {'meas':>6s} {'err':>7s} "
          f"{'W GiB':>6s} {'stated':>6s}")
    for r in table:
        stated = f"{r['stated_decode_weights_gib']:6.3f}" if r["stated_decode_weights_gib"] else f"{'-':>6s}"
        meas = (f"{r['measured_ttft_s']:6.2f} {r['ttft_error']:+7.1%}" if r["measured_ttft_s"]
                else f"{'-':>6s} {'-':>7s}")
        print(f"{r['model']:14s} {r['role']:11s} {r['ttft_s']:7.2f} {meas} "
              f"{r['tokens_per_s']:6.2f} {r['measured_tokens_per_s']:6.2f} {r['tps_error']:+7.1%} "
              f"{r['decode_weights_gib']:6.3f} {stated}")
    for r in table:
        if r["measured_nightly_tokens_per_s"]:
            print(f"{r['model']:14s} nightly decode sweep at 2048: {r['tokens_per_s']:.2f} vs "
                  f"{r['measured_nightly_tokens_per_s']:.2f} tok/s ({r['nightly_tps_error']:+.1%})")
    print("\nsources:")
    for r in table:
        print(f"  {r['model']}: {r['src']}")
    print("\nstated, not predicted (outside the tool's scope):")
    for r in anchors().get("out_of_scope", []):
        print(f"  {r['name']}: TTFT {r['ttft_s']} s, {r['decode_tok_s']} tok/s ({r['why']}; {r['src']})")
    print("no end-to-end figure stated:")
    for r in anchors().get("silent", []):
        print(f"  {r['name']}: {r['src']}")
    if args.png:
        print(f"\nchart: {write_png(table, args.png)}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": table, "calibration": cal}, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
