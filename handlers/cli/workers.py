"""CLI commands of team scale: `ledger worker` (an NPU host serving Phase 1 jobs) and `ledger reverify`."""

from __future__ import annotations

import json
import os
import platform
import sys

import click

from handlers.bootstrap import App
from handlers.cli.common import refresh_projections
from handlers.narrate import TerminalProgress, reporting
from handlers.results_workbench import reverify_json
from handlers.reverify import render_table, reverify_all
from npu_kernels.backends.kernel_runners import DEPLOYMENT_EXECUTORS, WORKER_EXECUTORS, worker_kind
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


@click.command("reverify")
@click.option("--all", "all_", is_flag=True, required=True, help="every deployed model (the only mode today)")
@click.option("--executor", type=click.Choice(list(DEPLOYMENT_EXECUTORS)), default=None,
              help="re-run on this executor (default: each deployment's own)")
@click.option("--standin-fault", default=None, hidden=True, metavar="KERNEL[:k=v,...]",
              help="test seam: the emulated stand-in harness of the matching rows fails (npu_kernels.numerics.executors.standin)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def reverify_cmd(app: App, all_: bool, executor: str | None, standin_fault: str | None, as_json: bool) -> None:
    """Re-run every deployed model's token gate and its Phase 1 rows whose toolchain changed; block regressions."""
    try:
        with reporting(None if as_json else TerminalProgress()):
            results = reverify_all(app.ledger, workspace=app.workspace, executor=executor, standin_fault=standin_fault)
    finally:
        refresh_projections(app)
    if as_json:
        click.echo(json.dumps(reverify_json(results), indent=1))
    else:
        click.echo(render_table(results))
    if any(r.regressions for r in results):
        sys.exit(1)


commands = [worker_cmd, reverify_cmd]
