"""One Phase 1 row as a job: verify it on this host and record its KernelVerified once, whatever happens.

A job carries (deployment, attempt, kernel, shape) and nothing else: the worker folds the deployment's
stream, finds the row in the deployment's own plan (tile plan included) and runs exactly what the local
gate runs (`handlers.gates.kernel_rows.verify_row`) on this host's kernel runner (one per target, with the host's NPU
lock; npu_kernels.backends.kernel_runners). Recording is safe to repeat:

* each event's id is `row_event_id(deployment, attempt, kernel, shape, contract, try)`, a UUID5 of that
  tuple, and the ledger's UNIQUE(event_id) turns a re-append into a no-op returning the original seqs: a
  job re-run after its worker died between the append and procrastinate's "succeeded" records nothing new;
* before running and before each append the worker re-folds: a row already recorded (by an earlier run
  of this job, or a duplicate job) is not run again, and a closed attempt (judged meanwhile) takes nothing;
* appends that race another worker on the deployment stream retry on the version conflict
  (`SomeoneElseAdvanced`), re-folding each time.
A row that cannot be this plan's evidence (not in the plan, a tile rule violation, a refused transcript)
raises `RowRefused`, which is never retried; the coordinator then judges the attempt without that row.
"""

from __future__ import annotations

import logging
import platform
import random
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from handlers.deploy import bind
from handlers.gates import GateRun
from handlers.gates.kernel_rows import kernel_row, verify_row
from handlers.planning import deployment_weights, recorded_sources
from handlers.uow import DeploymentUnit, SomeoneElseAdvanced
from npu_kernels.backends.kernel_runners import make_runner
from npu_kernels.backends.runner_base import KernelRunner
from npu_kernels.perf.evidence import EvidenceError
from npu_kernels.mlir_air.lock import npu_lock
from npu_kernels.model.plan_record import replan
from npu_kernels.numerics.tiles import TileRuleViolation
from ledger import NewEvent, open_ledger
from ledger.events import KernelVerified
from statemachine.gate import kernel_key
from statemachine.phases import Phase

log = logging.getLogger("npu_ledger.workers")

ROW_ID_NAMESPACE = uuid.UUID("5b1e8f0e-6c1d-4b53-9a53-7f0e4c6a1d16")  # npu-ledger Phase 1 row keys
APPEND_RETRIES = 200


class RowRefused(Exception):
    """Raised when a job's row cannot be recorded as this plan's evidence (never retried)."""


def row_event_id(deployment: str, attempt: int, kernel: str, shape: dict[str, Any], contract: str, try_: int) -> str:
    """The idempotency key of one verification of a planned row (the KernelVerified's event_id)."""
    _, shape_key = kernel_key(kernel, shape)
    return str(uuid.uuid5(ROW_ID_NAMESPACE, f"{deployment}|{attempt}|{kernel}|{shape_key}|{contract}|{try_}"))


@dataclass
class WorkerHost:
    """What one `ledger worker` brings: its ledger, the deployment executor whose rows it serves (its
    `npu_kernels.backends.kernel_runners.worker_kind`), its NPU lock."""

    ledger_url: str
    serves: str  # emulated | torch | mlir-air (the sleep stand-in serves emulated rows)
    lock_path: str
    name: str = field(default_factory=lambda: platform.node() or "worker")
    sleep_s: float | None = None  # the sleep stand-in's seconds per row (npu_kernels.numerics.executors.standin)
    mlir_air_dir: str | None = None
    _ledger: Any = None
    _runners: dict = field(default_factory=dict)

    def ledger(self):
        if self._ledger is None:
            self._ledger = open_ledger(self.ledger_url)
        return self._ledger

    def runner_for(self, target: str) -> KernelRunner:
        """This host's kernel runner for `target` (one per target, kept: a harness runner holds this host's lock)."""
        if target not in self._runners:
            self._runners[target] = make_runner(self.serves, target, lock_path=self.lock_path)
        return self._runners[target]


def _open_attempt(unit: DeploymentUnit, attempt: int) -> bool:
    state = unit.state
    return state is not None and state.attempt_open(Phase.KERNELS) and state.open_attempt.number == attempt


def _recorded(unit: DeploymentUnit, kernel: str, shape: dict[str, Any]) -> bool:
    key = kernel_key(kernel, shape)
    return any(isinstance(e.event, KernelVerified) and kernel_key(e.event.kernel, e.event.shape) == key
               for e in unit.state.open_attempt.evidence)


def _planned_row(unit: DeploymentUnit, kernel: str, shape: dict[str, Any]):
    """The row as the open attempt planned it (its PhaseStarted's plan_sources, handlers.planning)."""
    state = unit.state
    key = kernel_key(kernel, shape)
    sources = recorded_sources(unit.events, state.open_attempt.number)
    for row in replan(GateRun(state=state, workspace=None).config, state.target, sources, deployment_weights(state)):
        if row.key == key:
            return row
    raise RowRefused(f"{kernel} {key[1]} is not in the plan of {state.name}")


def run_row_job(host: WorkerHost, deployment: str, attempt: int, kernel: str, shape: dict[str, Any]) -> str:
    """Verify and record one planned row; returns what happened (recorded / already recorded / stale)."""
    ledger = host.ledger()
    unit = DeploymentUnit(ledger, deployment)
    if not _open_attempt(unit, attempt):
        return "stale"  # the attempt was judged (or never opened): nothing to add to it
    if _recorded(unit, kernel, shape):
        return "already recorded"
    state = unit.state
    if state.executor != host.serves:
        raise RowRefused(f"{deployment} runs on {state.executor}; this worker serves {host.serves}")
    row = _planned_row(unit, kernel, shape)
    runner = host.runner_for(state.target)
    # a runner that takes the NPU lock itself (mlir-air's harness) holds it around the harness alone
    lock = nullcontext(0.0) if runner.takes_npu_lock else npu_lock(host.lock_path)
    t0 = time.monotonic()
    try:
        with lock as waited:
            tries, _ = verify_row(runner, kernel_row(state, row))
            if host.sleep_s:
                time.sleep(host.sleep_s)
    except (TileRuleViolation, EvidenceError) as e:
        raise RowRefused(f"{kernel} {kernel_key(kernel, shape)[1]}: {e}") from e
    extra = {"worker": host.name, "lock_path": host.lock_path, "lock_wait_s": round(waited or 0.0, 3),
             "job_seconds": round(time.monotonic() - t0, 3)}
    if host.sleep_s is not None:
        extra["standin_sleep_s"] = host.sleep_s
    events = [NewEvent(e, row_event_id(deployment, attempt, kernel, shape, e.contract, i))
              for i, e in enumerate(bind([t.model_copy(update={"provenance": {**t.provenance, **extra}})
                                          for t in tries], state.model_digest), start=1)]
    for _ in range(APPEND_RETRIES):
        if not _open_attempt(unit, attempt):
            return "stale"
        if _recorded(unit, kernel, shape):
            return "already recorded"
        try:
            unit.commit(events)
            log.info("recorded %s %s for %s attempt %d on %s", kernel, shape, deployment, attempt, host.name)
            return "recorded"
        except SomeoneElseAdvanced:  # another worker appended first: re-fold and try again
            time.sleep(random.uniform(0.005, 0.05))
            unit = DeploymentUnit(ledger, deployment)
    raise RuntimeError(f"could not append {kernel} {shape} to {deployment} after {APPEND_RETRIES} version races")
