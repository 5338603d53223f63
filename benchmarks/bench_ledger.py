"""Ledger throughput beside a raw sqlite3 baseline measured in the same run.

Durable appends/s for single-event and 100-event transactions (event construction with validation,
canonical JSON and hashing included), and verify rows/s; each transaction of the two writers is timed
alternately and the medians compared. The baseline does the same inserts into the same table shape with the same
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


class RawSqlite:
    """Same inserts, same pragmas, plain sqlite3 (precomputed payload and hashes: no work but the insert)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA busy_timeout=30000")
        self.conn.execute(ROW_SQL)
        self.payload = dumps(_event(0).to_payload())
        self.seq = 0

    def tx(self, batch: int) -> float:
        t0 = time.perf_counter()
        self.conn.execute("BEGIN IMMEDIATE")
        rows = []
        for _ in range(batch):
            self.seq += 1
            rows.append((self.seq, "deployment:bench", self.seq, str(uuid.uuid4()), "KernelVerified", self.payload,
                         "2026-11-29T00:00:00.000000Z", "0" * 64, "f" * 64))
        self.conn.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?)", rows)
        self.conn.execute("COMMIT")
        return time.perf_counter() - t0


class Ours:
    """The ledger: typed events built (validated), canonical JSON, hash chain, expected-version append."""

    def __init__(self, path: Path) -> None:
        self.ledger = open_ledger(f"sqlite:///{path}")
        self.version = 0

    def tx(self, batch: int) -> float:
        t0 = time.perf_counter()
        self.ledger.append("deployment:bench", self.version, [_event(self.version + i) for i in range(batch)])
        self.version += batch
        return time.perf_counter() - t0


def compare(d: Path, label: str, n_tx: int, batch: int) -> dict:
    """Both writers measured transaction by transaction, interleaved, so load spikes hit them alike."""
    raw, ours = RawSqlite(d / f"raw-{batch}.db"), Ours(d / f"ours-{batch}.db")
    for _ in range(5):  # warm-up
        raw.tx(batch)
        ours.tx(batch)
    raw_t, our_t = [], []
    for _ in range(n_tx):
        raw_t.append(raw.tx(batch))
        our_t.append(ours.tx(batch))
    raw_rate = batch / statistics.median(raw_t)
    our_rate = batch / statistics.median(our_t)
    target = 0.8 if batch == 1 else 0.5
    return {"case": label, "raw_sqlite3_events_per_s": raw_rate, "ledger_events_per_s": our_rate,
            "ratio": our_rate / raw_rate, "target_ratio": target, "meets_target": our_rate / raw_rate >= target,
            "transactions": n_tx}


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
    args = ap.parse_args()
    n_single, n_batch, n_verify = (200, 40, 20000) if args.quick else (1000, 200, 100000)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        rows.append(compare(d, "single-event tx", n_single, 1))
        rows.append(compare(d, "100-event tx", n_batch, 100))
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
