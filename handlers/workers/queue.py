"""The job queue of distributed Phase 1: procrastinate on the ledger's own PostgreSQL database.

procrastinate keeps its jobs in its own tables (`procrastinate_jobs`, `procrastinate_workers`, ...) in the
schema the ledger's connection uses; `ensure_schema` applies procrastinate's schema once, under an advisory
lock, so concurrent first workers and coordinators never race. Workers fetch with `SELECT ... FOR UPDATE
SKIP LOCKED`, send heartbeats, and every worker re-queues the jobs of workers whose heartbeat stopped
(`retry_stalled_jobs`): a SIGKILLed host's job runs again elsewhere. One queue per executor
(`phase1.emulated`, `phase1.torch`, `phase1.mlir-air`): a worker serves only deployments its host can run.
"""

from __future__ import annotations

import logging
from typing import Any

import procrastinate
import psycopg
from procrastinate import RetryStrategy
from procrastinate.schema import SchemaManager
from sqlalchemy.engine import make_url

from handlers.workers.job import RowRefused, run_row_job
from statemachine.gate import kernel_key

TASK_NAME = "npu_ledger.phase1_row"
QUEUE_PREFIX = "phase1."
SCHEMA_LOCK = 7345902  # pg_advisory_xact_lock key of procrastinate's schema (the ledger's own is 7345901)
FINAL_STATUSES = ("succeeded", "failed", "cancelled", "aborted")
MAX_JOB_ATTEMPTS = 5  # a job whose worker raised a transient error (database gone, lock timeout) runs again

log = logging.getLogger("npu_ledger.workers")


class QueueUnavailable(Exception):
    """Raised when distributed Phase 1 is asked of a ledger that cannot hold a job queue (SQLite)."""


def queue_name(executor: str) -> str:
    return QUEUE_PREFIX + executor


def conninfo(ledger_url: str) -> str:
    """The libpq connection string of a `postgresql+psycopg://` ledger URL (search_path options kept)."""
    url = make_url(ledger_url)
    if url.get_backend_name() != "postgresql":
        raise QueueUnavailable(
            "distributed Phase 1 needs the shared PostgreSQL ledger (--db postgresql+psycopg://...); this ledger is "
            f"{url.get_backend_name()}: run `ledger advance` without --distribute")
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def ensure_schema(dsn: str) -> None:
    """Apply procrastinate's schema to the ledger's database unless it is there (idempotent, race-safe)."""
    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        if conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()[0] is None:
            conn.execute(SchemaManager.get_schema())
        conn.commit()


def make_app(dsn: str, *, worker=None):
    """A procrastinate App on `dsn` with the Phase 1 row task registered (`worker`: the serving worker's
    handlers.workers.job.WorkerHost; None for a coordinator that only defers and watches)."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    # every exception but a refusal (a row that cannot be this plan's evidence) is worth another run
    class _Retry(RetryStrategy):
        def get_retry_decision(self, *, exception: BaseException, job):  # type: ignore[override]
            if isinstance(exception, RowRefused):
                return None
            return super().get_retry_decision(exception=exception, job=job)

    @app.task(name=TASK_NAME, retry=_Retry(max_attempts=MAX_JOB_ATTEMPTS, wait=1))
    def phase1_row(deployment: str, attempt: int, kernel: str, shape: dict[str, Any]) -> None:
        if worker is None:
            raise RuntimeError("this app only defers jobs")
        run_row_job(worker, deployment, attempt, kernel, shape)

    return app


def job_lock(deployment: str, attempt: int, kernel: str, shape: dict[str, Any]) -> str:
    """The queueing lock of a row's job: a second `advance --distribute` does not queue the row twice."""
    return f"{deployment}|{attempt}|{'|'.join(kernel_key(kernel, shape))}"


def jobs_of(dsn: str, deployment: str, attempt: int) -> list[dict[str, Any]]:
    """The Phase 1 row jobs of one attempt, newest last: {id, status, kernel, shape, attempts, worker_id}."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, status::text, args, attempts, worker_id FROM procrastinate_jobs WHERE task_name = %s "
            "AND args->>'deployment' = %s AND (args->>'attempt')::int = %s ORDER BY id",
            (TASK_NAME, deployment, attempt)).fetchall()
    return [{"id": r[0], "status": r[1], "kernel": r[2]["kernel"], "shape": r[2]["shape"], "attempts": r[3],
             "worker_id": r[4]} for r in rows]
