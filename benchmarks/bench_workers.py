"""Distributed Phase 1: a 12-row sweep on 1 and on 3 workers, and the speed-up.

Each worker is a real `ledger worker --executor sleep` process with its own NPU lock file (a host): it runs
the emulated kernel, then sleeps NPU_LEDGER_STANDIN_SLEEP_S seconds, as a compile + NPU run keeps a host
busy. The sweep is the first 12 rows of the tiny Llama's Phase 1 plan, queued for an open attempt (the same
jobs `ledger advance --distribute` queues); the clock runs from the first job queued to the twelfth
KernelVerified in the ledger, with the workers already started (hosts are long-running). PostgreSQL at
127.0.0.1:5432 (database `test`), in a schema of its own, dropped afterwards. Target (issue #16): 3 workers
finish at >= 2.5x the rate of one.

usage: python benchmarks/bench_workers.py [--out bench-results/workers.json] [--sleep 2.0]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg  # noqa: E402

PG_DSN = os.environ.get("NPU_LEDGER_TEST_PG", "host=127.0.0.1 port=5432 dbname=test user=postgres")
N_ROWS = 12
TARGET = 2.5


def _url(schema: str) -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"


def _sweep(model: Path, n_workers: int, sleep_s: float, work: Path) -> dict:
    from handlers import deploy
    from handlers.uow import DeploymentUnit
    from handlers.workers.coordinator import landed_rows, open_kernel_attempt
    from handlers.workers.queue import TASK_NAME, conninfo, ensure_schema, job_lock, make_app, queue_name
    from ledger import open_ledger

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    procs: list[subprocess.Popen] = []
    try:
        url = _url(schema)
        led = open_ledger(url)
        deploy.init(led, str(model), name="bench")
        deploy.advance(led, deploy.AdvanceRequest("bench", work, until=0))
        dsn = conninfo(url)
        ensure_schema(dsn)
        env = {**os.environ, "NPU_LEDGER_STANDIN_SLEEP_S": str(sleep_s), "HF_HUB_OFFLINE": "1"}
        env.pop("LEDGER_DB", None)
        for i in range(n_workers):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "handlers.cli", "--workspace", str(work), "--db", url, "worker", "--executor",
                 "sleep", "--lock", str(work / f"{schema}-npu{i}.lock"), "--name", f"host{i}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        _wait_registered(schema, n_workers)
        unit = DeploymentUnit(led, "bench")
        attempt = open_kernel_attempt(unit)
        rows = list(unit.state.open_attempt.plan)[:N_ROWS]
        app = make_app(dsn)
        with app.open():
            t0 = time.perf_counter()
            for kernel, shape in rows:
                app.configure_task(TASK_NAME, queue=queue_name("emulated"),
                                   queueing_lock=job_lock("bench", attempt, kernel, shape)).defer(
                    deployment="bench", attempt=attempt, kernel=kernel, shape=dict(shape))
            while len(landed_rows(DeploymentUnit(led, "bench"))) < N_ROWS:
                time.sleep(0.05)
            seconds = time.perf_counter() - t0
        hosts = sorted({ev.event.provenance.get("worker") for evs in landed_rows(DeploymentUnit(led, "bench")).values()
                        for ev in evs})
        led.close()
        return {"workers": n_workers, "rows": N_ROWS, "seconds": round(seconds, 3),
                "rows_per_s": round(N_ROWS / seconds, 4), "hosts_used": hosts}
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _wait_registered(schema: str, n: int, timeout_s: float = 120.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f"SET search_path TO {schema}")
                if conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()[0] >= n:
                    return
        except psycopg.Error:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{n} workers did not register within {timeout_s:g} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--sleep", type=float, default=2.0, help="the stand-in's seconds per row")
    args = parser.parse_args()
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.Error as e:
        print(f"bench_workers: skipped, no PostgreSQL at {PG_DSN}: {str(e).strip().splitlines()[0]}")
        return 0
    from tests.models import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        work = Path(tmp)
        model = build_tiny_model("llama", work / "tiny-llama")
        one = _sweep(model, 1, args.sleep, work)
        three = _sweep(model, 3, args.sleep, work)
    speedup = one["seconds"] / three["seconds"]
    result = {"sleep_s_per_row": args.sleep, "one": one, "three": three, "speedup": round(speedup, 3),
              "target": TARGET, "met": speedup >= TARGET}
    print(f"{N_ROWS}-row sleep-stand-in sweep ({args.sleep:g} s/row): 1 worker {one['seconds']:.2f} s, "
          f"3 workers {three['seconds']:.2f} s -> speed-up {speedup:.2f}x (target >= {TARGET}x: "
          f"{'met' if speedup >= TARGET else 'NOT met'})")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
