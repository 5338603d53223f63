"""Distributed Phase 1 on the PostgreSQL server at 127.0.0.1:5432: real worker processes, one SIGKILLed mid-job.

Each test gets its own schema (ledger events and procrastinate's tables both live there, as on a team's
shared database). Workers run the sleep stand-in (the emulated kernel, then NPU_LEDGER_STANDIN_SLEEP_S
seconds, as an NPU run keeps a host busy), each with its own NPU lock file standing for a host. Skipped,
with the reason shown, only when no server answers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from handlers import deploy
from ledger import open_ledger
from statemachine.gate import kernel_key
from tests.postgres import execute, needs_pg, schema_url

pytestmark = [pytest.mark.postgres, needs_pg]

SLEEP_S = "2"


def _cli(ws, url, *args, env_extra=None, **popen):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env_extra or {})}
    env.pop("LEDGER_DB", None)
    cmd = [sys.executable, "-m", "handlers.cli", "--workspace", str(ws), "--db", url, *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **popen)


def _query(schema: str, sql: str, params=()):
    return execute(sql, params, schema=schema)


def _wait_for(what, predicate, timeout_s: float = 120.0, poll_s: float = 0.1):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


def _workers_registered(schema: str) -> int:
    try:
        return _query(schema, "SELECT count(*) FROM procrastinate_workers")[0][0]
    except psycopg.Error:  # the first worker has not applied procrastinate's schema yet
        return 0


def test_three_workers_drain_a_plan_and_a_job_of_a_worker_killed_mid_run_completes_on_another(
        pg_schema, tmp_path, tiny_llama):
    url = schema_url(pg_schema)
    led = open_ledger(url)
    deploy.init(led, str(tiny_llama), name="tl")
    deploy.advance(led, deploy.AdvanceRequest("tl", tmp_path, until=0))
    workers = []
    try:
        for i in range(3):  # started one by one: procrastinate's worker ids follow the start order
            workers.append(_cli(tmp_path, url, "worker", "--executor", "sleep", "--lock", str(tmp_path / f"npu{i}.lock"),
                                "--name", f"host{i}", "--heartbeat", "0.5", "--stalled-after", "2",
                                env_extra={"NPU_LEDGER_STANDIN_SLEEP_S": SLEEP_S}))
            _wait_for(f"worker {i} to register", lambda: _workers_registered(pg_schema) == i + 1)
        worker_ids = [r[0] for r in _query(pg_schema, "SELECT id FROM procrastinate_workers ORDER BY id")]
        coordinator = _cli(tmp_path, url, "advance", "tl", "--until", "1", "--distribute")
        victim_id = worker_ids[1]
        job = _wait_for("host1 to be mid-job", lambda: _query(
            pg_schema, "SELECT id, args FROM procrastinate_jobs WHERE status = 'doing' AND worker_id = %s", (victim_id,)))
        time.sleep(0.5)  # inside the row: computing or in the stand-in's sleep, lock held
        workers[1].send_signal(signal.SIGKILL)
        workers[1].wait(timeout=10)
        killed_job, killed_args = job[0]
        out, err = coordinator.communicate(timeout=240)
        assert coordinator.returncode == 0, err[-3000:]
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
    assert "phase 1 PASSED" in out, out + err
    events = led.read_stream("deployment:tl")
    started = [e for e in events if e.type == "PhaseStarted" and e.payload["phase"] == 1]
    assert len(started) == 1
    plan = [kernel_key(r["kernel"], r["shape"]) for r in started[0].payload["plan"]]
    rows = [e for e in events if e.type == "KernelVerified"]
    # exactly one row per planned shape, all inside the one attempt (after its PhaseStarted)
    assert sorted(kernel_key(e.payload["kernel"], e.payload["shape"]) for e in rows) == sorted(plan)
    assert all(e.seq > started[0].seq for e in rows)
    # the killed host's job was re-queued (a second run) and its row came from another host
    status, attempts = _query(pg_schema, "SELECT status::text, attempts FROM procrastinate_jobs WHERE id = %s",
                              (killed_job,))[0]
    assert status == "succeeded" and attempts >= 2
    key = kernel_key(killed_args["kernel"], killed_args["shape"])
    row = next(e for e in rows if kernel_key(e.payload["kernel"], e.payload["shape"]) == key)
    assert row.payload["provenance"]["worker"] in ("host0", "host2")
    assert row.payload["provenance"]["standin_sleep_s"] == float(SLEEP_S)
    assert row.payload["provenance"]["toolchain"]["emulated_numerics"]
    passed = next(e for e in events if e.type == "PhasePassed" and e.payload["phase"] == 1)
    assert passed.payload["evidence_seqs"] == sorted(e.seq for e in rows)
    assert led.verify().ok
    # the local path records the same Phase 1 events in the same order: PhaseStarted with the same plan, one
    # KernelVerified per planned row, PhasePassed citing them (it commits PhaseStarted with the evidence, after the
    # work, so that no attempt is ever open without it; the coordinator commits it first, for the workers' rows)
    local = open_ledger(f"memory://{pg_schema}-local")
    deploy.init(local, str(tiny_llama), name="tl")
    deploy.advance(local, deploy.AdvanceRequest("tl", tmp_path / "local", until=1))
    assert _phase1_shape(local.read_stream("deployment:tl")) == _phase1_shape(events)


def _phase1_shape(events) -> tuple:
    """Phase 1's events as the stream holds them: their types in order, the plan, the rows' (kernel, shape) keys."""
    first = next(i for i, e in enumerate(events) if e.type == "PhaseStarted" and e.payload["phase"] == 1)
    last = next(i for i, e in enumerate(events) if e.type == "PhasePassed" and e.payload["phase"] == 1)
    phase1 = events[first:last + 1]
    types = [e.type for e in phase1]
    keys = sorted(kernel_key(e.payload["kernel"], e.payload["shape"]) for e in phase1 if e.type == "KernelVerified")
    plan = sorted(kernel_key(r["kernel"], r["shape"]) for r in phase1[0].payload["plan"])
    return types, plan, keys


def test_distribute_on_a_sqlite_ledger_is_one_clear_line_and_records_nothing(tmp_path, tiny_llama):
    led = open_ledger(f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}")
    deploy.init(led, str(tiny_llama), name="tl")
    before = led.head()
    proc = subprocess.run([sys.executable, "-m", "handlers.cli", "--workspace", str(tmp_path), "advance", "tl",
                           "--distribute"], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "LEDGER_DB"})
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: distributed Phase 1 needs the shared PostgreSQL ledger"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert led.head() == before


def test_the_sleep_stand_in_refuses_to_start_without_its_declared_seconds(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("LEDGER_DB", "NPU_LEDGER_STANDIN_SLEEP_S")}
    proc = subprocess.run([sys.executable, "-m", "handlers.cli", "--workspace", str(tmp_path), "--db",
                           schema_url("public"), "worker", "--executor", "sleep"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 1 and "error: the sleep stand-in needs NPU_LEDGER_STANDIN_SLEEP_S" in proc.stderr
