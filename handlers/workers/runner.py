"""`ledger worker`: one procrastinate worker per NPU host, serving the queue of its executor.

Beside procrastinate's own loop the worker re-queues stalled jobs every `heartbeat_s`: a job still `doing`
whose worker has sent no heartbeat for `stalled_s` seconds (its host was killed, lost power or network)
goes back to `todo`, and some live worker runs it again; the job's idempotency keys make that safe.
"""

from __future__ import annotations

import asyncio
import logging

from handlers.workers.job import WorkerHost
from handlers.workers.queue import TASK_NAME, conninfo, ensure_schema, make_app, queue_name

log = logging.getLogger("npu_ledger.workers")

HEARTBEAT_S = 5.0  # procrastinate's default is 10 s; a shorter beat finds a dead host sooner
STALLED_S = 20.0  # a worker silent this long is dead; must exceed HEARTBEAT_S by a margin


def run_worker(host: WorkerHost, *, concurrency: int = 1, heartbeat_s: float = HEARTBEAT_S,
               stalled_s: float = STALLED_S, burst: bool = False) -> None:
    """Serve `host`'s queue until interrupted (`burst`: until the queue is empty, for tests and scripts)."""
    if stalled_s <= 2 * heartbeat_s:
        raise ValueError(f"--stalled-after {stalled_s:g} s must exceed twice the heartbeat {heartbeat_s:g} s")
    dsn = conninfo(host.ledger_url)
    ensure_schema(dsn)
    app = make_app(dsn, worker=host)
    asyncio.run(_serve(app, host, concurrency, heartbeat_s, stalled_s, burst))


async def _serve(app, host: WorkerHost, concurrency: int, heartbeat_s: float, stalled_s: float, burst: bool) -> None:
    async with app.open_async():
        recover = asyncio.create_task(_recover_stalled(app, heartbeat_s, stalled_s))
        try:
            await app.run_worker_async(
                queues=[queue_name(host.serves)], name=host.name, concurrency=concurrency, wait=not burst,
                update_heartbeat_interval=heartbeat_s, stalled_worker_timeout=stalled_s,
                fetch_job_polling_interval=min(1.0, heartbeat_s), delete_jobs="never")
        finally:
            recover.cancel()


async def _recover_stalled(app, every_s: float, stalled_s: float) -> None:
    while True:
        try:
            for job in await app.job_manager.get_stalled_jobs(task_name=TASK_NAME, seconds_since_heartbeat=stalled_s):
                log.warning("re-queueing job %s (%s): its worker %s stopped sending heartbeats", job.id,
                            job.task_kwargs, job.worker_id if hasattr(job, "worker_id") else "?")
                await app.job_manager.retry_job(job)
        except Exception as e:  # noqa: BLE001 - recovery is best effort; the next round tries again
            log.warning("stalled-job recovery failed this round: %s", e)
        await asyncio.sleep(every_s)
