"""Workspaces for the end-to-end tests: copied whole, their ledger opened, a deployment stream cloned.

`copy_workspace` copies a workspace (ledger, checkpoints, projections): how a test gets its own copy of a
session snapshot (tests/e2e/conftest.py). `clone_stream` re-appends a stream's events as a new deployment, properly chained and in order, passing each
through a `change`: the tamper tests use it to fabricate one change, the others to record a deployment that
requested something else (a test fault, a forced tile, another model folder) on top of evidence its phases
would have recorded identically.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from ledger import Ledger, open_ledger
from ledger.events import parse_event
from tests.e2e.cli import ledger

Change = Callable[[str, dict, int], "dict | list[tuple[str, dict]] | None"]


def deployed_workspace(factory, model: Path, name: str) -> Path:
    """A fresh workspace in which `model` was taken through `ledger init` and `ledger advance` (to deployed), by the
    real CLI in subprocesses; the advance's failure is the assertion's message."""
    ws = factory.mktemp(f"{name}-ws")
    for args in (("init", str(model), "--name", name), ("advance", name)):
        proc = ledger(ws, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return ws


def copy_workspace(src: Path, dst: Path) -> Path:
    """A workspace copied whole (ledger, checkpoints, projections) to `dst`."""
    shutil.copytree(src, dst)
    return dst


def workspace_ledger(ws: Path) -> Ledger:
    """The workspace's SQLite ledger (`<ws>/.ledger/ledger.db`)."""
    return open_ledger(f"sqlite:///{ws / '.ledger' / 'ledger.db'}")


def clone_stream(ws: Path, src: str, dst: str, change: Change = lambda t, p, s: p) -> dict[Any, Any]:
    """Re-append `src`'s events as stream `dst` (properly chained), passing each through `change`
    (type, payload, seq) -> payload | None (None drops it) | [(type, payload), ...] (extra events after it,
    which the PhasePassed does not cite). Returns old seq -> new seq, and -1 -> the extra events' seqs."""
    led = workspace_ledger(ws)
    mapping: dict[Any, Any] = {}
    version = 0
    for rec in led.read_stream(f"deployment:{src}"):
        result = change(rec.type, dict(rec.payload), rec.seq)
        if result is None:
            continue
        items = [(rec.type, result)] if isinstance(result, dict) else result
        for i, (kind, payload) in enumerate(items):
            if kind == "DeploymentRequested":
                payload["name"] = dst
            if kind == "PhasePassed":
                payload["evidence_seqs"] = [mapping[s] for s in payload["evidence_seqs"] if s in mapping]
            [seq] = led.append(f"deployment:{dst}", version, [parse_event(kind, payload)])
            if i == 0:
                mapping[rec.seq] = seq
            else:
                mapping.setdefault(-1, []).append(seq)
            version += 1
    led.close()
    return mapping


def requesting(**fields: Any) -> Change:
    """A `change` that records the deployment as having requested `fields` (e.g. pipeline=..., model_path=...)."""

    def change(kind: str, payload: dict, seq: int) -> dict:
        return {**payload, **fields} if kind == "DeploymentRequested" else payload

    return change
