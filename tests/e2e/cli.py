"""Run the real `ledger` CLI as the tests do (tests/prebuilt.py says how the suite shares its deployments).

`ledger(...)` is the command under test: a process of its own (forked from an interpreter that has imported the
tool, tests/preloaded.py; `fresh=True` starts a new interpreter), its exit status, stdout and stderr. `ledger_json`
reads back: a read command (`READS`: status, log, history, head, verify, predict, plan) goes through the same click
group and command code in this process (the house rule: the CLI through `CliRunner` or a process of its own); any
other command runs through `ledger(...)`. `spawn` starts a fresh interpreter whose pipes and signals a test drives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.preloaded import run_ledger

READS = ("status", "log", "history", "head", "verify", "predict", "plan")


def ledger(workspace: Path, *args: str, timeout: float = 900, db: str | None = None,
           env_extra: dict[str, str] | None = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """`ledger --workspace WORKSPACE [--db DB] *args` in a process of its own: forked from an interpreter that has
    imported the tool already (tests/preloaded.py), or with `fresh`, a new interpreter (`python -m handlers.cli`)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env_extra or {})}
    env.pop("LEDGER_DB", None)
    argv = ["--workspace", str(workspace), *(["--db", db] if db else []), *args]
    if not fresh:
        return run_ledger(argv, env, timeout)
    cmd = [sys.executable, "-m", "handlers.cli", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def read_in_process(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    """A read command through the click CLI in this process; the result has the shape `ledger` returns."""
    if args[0] not in READS:
        raise ValueError(f"`ledger {args[0]}` is not a read command: run it with `ledger(...)`, a subprocess")
    return in_process(workspace, *args)


def in_process(workspace: Path, *args: str, db: str | None = None) -> subprocess.CompletedProcess:
    """Any command through the click CLI in this process (for a command that needs no fresh interpreter: no
    crash, no lifeline, no model run); the result has the shape `ledger` returns."""
    from click.testing import CliRunner

    from handlers.bootstrap import configure_logging
    from handlers.cli import cli

    env = {"LEDGER_DB": None, "LEDGER_HOME": None, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    try:
        result = CliRunner().invoke(cli, ["--workspace", str(workspace), *(["--db", db] if db else []), *args],
                                    env=env, prog_name="ledger")
    finally:
        configure_logging(0)  # the command pointed structlog at the runner's stderr, which is closed now
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["ledger", *args], result.exit_code, result.stdout, result.stderr)


def ledger_json(workspace: Path, *args: str):
    """The JSON a command prints with --json (it must exit 0): a read command in this process, else a subprocess."""
    proc = read_in_process(workspace, *args, "--json") if args[0] in READS else ledger(workspace, *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def spawn(workspace: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "handlers.cli", "--workspace", str(workspace), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
