"""Registry rebuild time beside the time to read the same events from a real SQLite ledger.

50,000 synthetic-but-realistic `KernelVerified` events (8 architectures x 4 deployments each, every
kernel x shape x contract those models need, 70% emulated / 20% mlir-air harness / 10% torch, 5% FAIL)
are appended to a fresh SQLite ledger. Then, best of `--repeat` runs each:

    read         ledger.read_all()
    project      project_registry(events)          (the rebuild: fold + markdown + GEMM JSON)
    read+project ledger.read_all() then project_registry

Target (issue #7): project <= 3 x read. Prints a table and writes JSON to `--out`.

usage: python benchmarks/bench_registry.py [--events 50000] [--repeat 3] [--out bench-results/registry.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger import NewEvent, open_ledger  # noqa: E402
from registry.fold import fold_registry  # noqa: E402
from registry.projections import project_registry  # noqa: E402
from registry.synthetic import synthetic_kernel_events  # noqa: E402

TARGET_RATIO = 3.0


def fill(ledger, n: int, batch: int = 1000) -> float:
    """Append `n` synthetic events, batched per stream; returns seconds taken."""
    versions: dict[str, int] = {}
    pending: dict[str, list[NewEvent]] = {}
    t0 = time.perf_counter()

    def flush(stream: str) -> None:
        events = pending.pop(stream, [])
        if events:
            ledger.append(stream, versions.get(stream, 0), events)
            versions[stream] = versions.get(stream, 0) + len(events)

    for stream, event in synthetic_kernel_events(n):
        pending.setdefault(stream, []).append(NewEvent(event=event))
        if len(pending[stream]) >= batch:
            flush(stream)
    for stream in sorted(pending):
        flush(stream)
    return time.perf_counter() - t0


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="bench-results/registry.json")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        ledger = open_ledger(f"sqlite:///{Path(tmp) / 'ledger.db'}")
        try:
            fill_s = fill(ledger, args.events)
            read_s, events = best_of(args.repeat, ledger.read_all)
            fold_s, data = best_of(args.repeat, lambda: fold_registry(events))
            project_s, files = best_of(args.repeat, lambda: project_registry(events))
            both_s, _ = best_of(args.repeat, lambda: project_registry(ledger.read_all()))
        finally:
            ledger.close()

    ratio = project_s / read_s
    rows = sum(len(p.rows) for p in data.pages)
    result = {
        "events": len(events),
        "registry_rows": rows,
        "files": len(files),
        "bytes": sum(len(b) for b in files.values()),
        "fill_s": round(fill_s, 4),
        "read_s": round(read_s, 4),
        "fold_s": round(fold_s, 4),
        "project_s": round(project_s, 4),
        "read_plus_project_s": round(both_s, 4),
        "project_over_read": round(ratio, 3),
        "target_project_over_read": TARGET_RATIO,
        "meets_target": ratio <= TARGET_RATIO,
        "repeat": args.repeat,
        "python": platform.python_version(),
    }
    print(f"{'measure':<26}{'seconds':>10}{'events/s':>14}")
    for label, key in (("append (fill)", "fill_s"), ("read_all", "read_s"), ("fold only", "fold_s"),
                       ("project_registry", "project_s"), ("read_all + project", "read_plus_project_s")):
        secs = result[key]
        print(f"{label:<26}{secs:>10.3f}{len(events) / secs:>14,.0f}")
    print(f"\n{len(events)} events -> {rows} registry rows, {len(files)} files; project/read = {ratio:.2f}x "
          f"(target <= {TARGET_RATIO:.0f}x): {'OK' if result['meets_target'] else 'MISSED'}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
