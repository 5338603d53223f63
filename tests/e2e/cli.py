"""Run the real `ledger` CLI in a subprocess (a fresh interpreter, as a person or agent would)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def ledger(workspace: Path, *args: str, timeout: float = 900, db: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("LEDGER_DB", None)
    cmd = [sys.executable, "-m", "handlers.cli", "--workspace", str(workspace), *(["--db", db] if db else []), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def ledger_json(workspace: Path, *args: str):
    proc = ledger(workspace, *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def spawn(workspace: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "handlers.cli", "--workspace", str(workspace), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
