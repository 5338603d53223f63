"""CLI commands of team scale: `ledger worker` (an NPU host serving Phase 1 jobs); `ledger reverify` is a row of
handlers.verbs."""

from __future__ import annotations

import os
import platform

import click

from handlers.bootstrap import App
from npu_kernels.backends.kernel_runners import WORKER_EXECUTORS, worker_kind
from npu_kernels.mlir_air.lock import DEFAULT_LOCK_PATH
from npu_kernels.settings import env_get


@click.command("worker")
@click.option("--executor", type=click.Choice(list(WORKER_EXECUTORS)), default="emulated", show_default=True,
              help="this host's executor; `sleep` is the test/bench stand-in (emulated + NPU_LEDGER_STANDIN_SLEEP_S)")
@click.option("--lock", "lock_path", default=None, help="this host's NPU lock file (default /tmp/mlir-air-npu.lock)")
@click.option("--concurrency", type=click.IntRange(1, 64), default=1, show_default=True,
              help="rows at once (one NPU: keep 1)")
@click.option("--name", default=None, help="this worker's name in the rows' provenance (default: the host name)")
@click.option("--heartbeat", "heartbeat_s", type=click.FloatRange(min=0.2), default=None,
              help="seconds between heartbeats (default 5)")
@click.option("--stalled-after", "stalled_s", type=click.FloatRange(min=1), default=None,
              help="re-queue the jobs of workers silent this long (default 20 s)")
@click.option("--burst", is_flag=True, help="exit once the queue is empty")
@click.pass_obj
def worker_cmd(app: App, executor: str, lock_path: str | None, concurrency: int, name: str | None,
               heartbeat_s: float | None, stalled_s: float | None, burst: bool) -> None:
    """Serve Phase 1 row jobs of the shared PostgreSQL ledger on this NPU host (`advance --distribute` queues them)."""
    # here, not at the top: the workers need psycopg + procrastinate, which the CLI starts without
    from handlers.workers import runner
    from handlers.workers.job import WorkerHost
    from handlers.workers.queue import conninfo

    conninfo(app.ledger.url)  # a SQLite ledger: one clear line, before anything starts
    kind = worker_kind(executor)
    host = WorkerHost(ledger_url=app.ledger.url, serves=kind.serves, lock_path=lock_path or DEFAULT_LOCK_PATH,
                      name=name or f"{platform.node() or 'worker'}:{os.getpid()}", sleep_s=kind.sleep_s,
                      mlir_air_dir=env_get("MLIR_AIR_DIR"))
    click.echo(f"worker {host.name}: {executor} rows from queue phase1.{host.serves}, NPU lock {host.lock_path}",
               err=True)
    runner.run_worker(host, concurrency=concurrency, heartbeat_s=heartbeat_s or runner.HEARTBEAT_S,
                      stalled_s=stalled_s or runner.STALLED_S, burst=burst)


commands = [worker_cmd]  # reverify: a row of handlers.verbs
