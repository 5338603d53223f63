"""Ledger throughput beside a raw sqlite3 baseline measured in the same run.

Durable appends/s for single-event and 100-event transactions (validation, canonical JSON and hashing
included), and verify rows/s. The baseline does the same inserts into the same table shape with the same
pragmas (WAL, synchronous=FULL, BEGIN IMMEDIATE). Targets (issue #2): single >= 80% of raw, batch >= 50%,
verify >= 200,000 rows/s.

usage: python benchmarks/bench_ledger.py [--out bench-results/ledger.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from ledger import NewEvent, open_ledger
from ledger.canonical import dumps
from ledger.events import KernelVerified

ROW_SQL = (
    "CREATE TABLE events (seq INTEGER PRIMARY KEY, stream_id TEXT NOT NULL, version INTEGER NOT NULL, "
    "event_id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, payload TEXT NOT NULL, recorded_at TEXT NOT NULL, "
    "prev_hash TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE(stream_id, version))"
)


def _event(i: int) -> KernelVerified:
    return KernelVerified(
        kernel="gemm", shape={"M": 2048, "K": 2048, "N": 2048}, contract="bf16-out-high", executor="emulated",
        verdict="PASS", rtol=1.6e-2, atol=1.5e-3, mean_rel_L1=9.3e-3 + i * 1e-9, max_abs=6e-4, max_rel=0.39,
        mismatches=0, n_elements=4194304, tile={"tile_m": 64, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 128},
        herd=[8, 4], tiles_in_flight=32, tiles_target=32, seconds=0.01, role="Q/O proj", stage="prefill",
    )


def raw_sqlite(path: Path, n_tx: int, batch: int) -> float:
    """Same inserts, same pragmas, plain sqlite3: returns events/s."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute(ROW_SQL)
    payload = dumps(_event(0).to_payload())
    seq = 0
    t0 = time.perf_counter()
    for _ in range(n_tx):
        conn.execute("BEGIN IMMEDIATE")
        rows = []
        for _ in range(batch):
            seq += 1
            rows.append((seq, "deployment:bench", seq, str(uuid.uuid4()), "KernelVerified", payload,
                         "2026-11-29T00:00:00.000000Z", "0" * 64, "f" * 64))
        conn.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?)", rows)
        conn.execute("COMMIT")
    dt = time.perf_counter() - t0
    conn.close()
    return n_tx * batch / dt


def ours(path: Path, n_tx: int, batch: int) -> float:
    ledger = open_ledger(f"sqlite:///{path}")
    version = 0
    t0 = time.perf_counter()
    for _ in range(n_tx):
        ledger.append("deployment:bench", version, [NewEvent(event=_event(version + i)) for i in range(batch)])
        version += batch
    dt = time.perf_counter() - t0
    ledger.close()
    return n_tx * batch / dt


def verify_rate(path: Path, n: int) -> tuple[float, int]:
    ledger = open_ledger(f"sqlite:///{path}")
    version = 0
    while version < n:
        ledger.append("deployment:v", version, [NewEvent(event=_event(version + i)) for i in range(1000)])
        version += 1000
    t0 = time.perf_counter()
    result = ledger.verify()
    dt = time.perf_counter() - t0
    assert result.ok, result
    return result.checked / dt, result.checked


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-results/ledger.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n_single, n_batch, n_verify = (100, 20, 20000) if args.quick else (300, 50, 100000)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for label, n_tx, batch in (("single-event tx", n_single, 1), ("100-event tx", n_batch, 100)):
            raw_rates, our_rates = [], []
            for r in range(args.repeats):  # interleave so both see the same machine noise
                raw_rates.append(raw_sqlite(d / f"raw-{label[:3]}-{r}.db", n_tx, batch))
                our_rates.append(ours(d / f"ours-{label[:3]}-{r}.db", n_tx, batch))
            raw, our = statistics.median(raw_rates), statistics.median(our_rates)
            target = 0.8 if batch == 1 else 0.5
            rows.append({"case": label, "raw_sqlite3_events_per_s": raw, "ledger_events_per_s": our,
                         "ratio": our / raw, "target_ratio": target, "meets_target": our / raw >= target})
        rate, n = verify_rate(d / "verify.db", n_verify)
        rows.append({"case": f"verify {n} rows", "ledger_rows_per_s": rate, "target_rows_per_s": 200000,
                     "meets_target": rate >= 200000})
    print(f"{'case':<22} {'raw sqlite3/s':>14} {'ledger/s':>12} {'ratio':>7} {'target':>8}  ok")
    for r in rows:
        if "ratio" in r:
            print(f"{r['case']:<22} {r['raw_sqlite3_events_per_s']:>14.0f} {r['ledger_events_per_s']:>12.0f} "
                  f"{r['ratio']:>7.2f} {r['target_ratio']:>8.2f}  {'yes' if r['meets_target'] else 'NO'}")
        else:
            print(f"{r['case']:<22} {'':>14} {r['ledger_rows_per_s']:>12.0f} {'':>7} {r['target_rows_per_s']:>8}  "
                  f"{'yes' if r['meets_target'] else 'NO'}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "ledger", "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
