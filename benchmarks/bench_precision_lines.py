"""Benchmark: the emulator's `[precision]` line beside every published NPU2 line, digit by digit.

    python benchmarks/bench_precision_lines.py [--out bench-results/precision_lines.json] [--only ID-PREFIX]

For each line of tests/fixtures/precision_lines.json (mlir-air's published statistics with their source):
the harness's own inputs and reference (npu_kernels.numerics.harness_inputs), the emulated NPU2 kernel at the line's
shape, tile and method, XRTRunner's three statistics, and how many printed digits of each agree with
NPU2's. Lines whose inputs are not reproducible are listed with the reason. Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npu_kernels.numerics.catalog import get_spec  # noqa: E402
from npu_kernels.numerics.executors.emulated import EmulatedExecutor  # noqa: E402
from npu_kernels.numerics.harness_inputs import (  # noqa: E402
    HARNESS_KERNELS,
    digits_agreeing,
    harness_case,
    precision_stats,
    significant_digits,
)

LINES = ROOT / "tests" / "fixtures" / "precision_lines.json"
STATS = ("mean_rel_L1", "rel_err_max", "abs_err_max")


def load_lines(path: Path = LINES) -> list[dict]:
    return json.loads(path.read_text())["lines"]


def gemm_tile(line: dict) -> dict | None:
    """The line's tile as the emulated executor takes it (herd and method included)."""
    if "tile" not in line:
        return None
    t = {k: v for k, v in line["tile"].items() if k != "method"}
    if "herd" in line:
        t["herd_m"], t["herd_n"] = line["herd"]
    if line.get("contract") == "bf16-out-high":
        t["method"] = line.get("method", "auto")
    return t


def reproducible(line: dict) -> str:
    """'' when the emulator can reproduce this line's inputs, else why not."""
    if line.get("inputs_known") is False:
        return line.get("note", "inputs not known")
    if line["kernel"] not in HARNESS_KERNELS:
        return f"{line['kernel']} harness inputs not transcribed"
    if line.get("target", "npu2") != "npu2":
        return f"measured on {line['target']}"
    return ""


def emulate_line(line: dict, ex: EmulatedExecutor) -> dict:
    """Our three statistics for one published line, and the digits of each that agree with NPU2's."""
    spec = get_spec(line["kernel"])
    shape = spec.normalize_shape(line["shape"])
    case = harness_case(line["kernel"], shape, line["contract"])
    tile = gemm_tile(line) if line["kernel"] == "gemm" else None
    out = spec.call(ex, case.inputs, shape, line["contract"], tile)
    ours = precision_stats(out, case.reference, case.out_dtype)
    row = {"id": line["id"], "kernel": line["kernel"], "ours": {}, "npu2": {}, "digits": {}, "printed_digits": {}}
    for stat in STATS:
        mine = getattr(ours, stat)
        row["ours"][stat] = mine
        if stat in line:
            row["npu2"][stat] = line[stat]
            row["digits"][stat] = digits_agreeing(mine, line[stat])
            row["printed_digits"][stat] = significant_digits(line[stat])
    row["exact"] = all(row["digits"][s] == row["printed_digits"][s] for s in row["digits"])
    return row


def _cell(row: dict, stat: str) -> str:
    mine = f"{row['ours'][stat]:.3e}"
    if stat not in row["npu2"]:
        return f"{mine} / {'-':>9} {'':3}"
    return f"{mine} / {row['npu2'][stat]:>9} {row['digits'][stat]}/{row['printed_digits'][stat]}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", default="", help="only lines whose id starts with this")
    args = ap.parse_args(argv)
    ex = EmulatedExecutor("npu2")
    rows, skipped = [], []
    t0 = time.perf_counter()
    for line in load_lines():
        if not line["id"].startswith(args.only):
            continue
        why = reproducible(line)
        if why:
            skipped.append({"id": line["id"], "why": why})
            continue
        rows.append(emulate_line(line, ex))
    print(f"{'line':<30} {'mean_rel_L1 ours / NPU2 digits':<32} {'rel_err max':<32} {'abs_err max':<32}")
    for r in rows:
        print(f"{r['id']:<30} " + " ".join(f"{_cell(r, s):<32}" for s in STATS) + ("  exact" if r["exact"] else ""))
    for s in skipped:
        print(f"{s['id']:<30} not emulated: {s['why']}")
    by_kernel: dict[str, list[dict]] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], []).append(r)
    print("\n" + "  ".join(f"{k} {sum(x['exact'] for x in v)}/{len(v)}" for k, v in by_kernel.items()))
    exact = sum(r["exact"] for r in rows)
    print(f"\n{exact} of {len(rows)} emulated lines agree in every printed digit ({len(skipped)} not emulated)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        result = {"benchmark": "precision_lines", "seconds": time.perf_counter() - t0, "rows": rows,
                  "skipped": skipped, "exact": exact}
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
