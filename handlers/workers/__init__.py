"""Distributed Phase 1: the rows of a plan run as procrastinate jobs on several NPU hosts.

  queue        procrastinate wiring: the job table in the ledger's PostgreSQL database, the row task, queues
  job          one row as a job: verify on this host, record once (idempotency keys, version-race retries)
  runner       `ledger worker`: a procrastinate worker with this host's executor and NPU lock, plus
               stalled-job recovery (a killed host's job is re-queued)
  coordinator  `ledger advance NAME --distribute`: PhaseStarted with the plan, enqueue the missing rows,
               a progress bar as rows land, then the normal gate predicate judges the attempt
"""
