"""End-to-end fixtures: one tiny deployment per session, snapshotted after the phases tests start from.

`tiny_snapshots` takes the tiny Llama (deployment `tiny`, emulated executor, SQLite ledger) through the real
CLI once per test run (shared by the pytest-xdist workers) - `ledger init`, `ledger advance --until 0`, `--until 3`, then `ledger advance` to
`deployed` - and copies the whole workspace after each step (`.ledger/ledger.db` with its WAL if any,
`.ledger/checkpoints.json`, the projections). A test that needs "a model at Phase N" asks `tiny_at(N)` for
its own copy under its tmp_path: tests mutate their workspace (tamper with the ledger, append streams,
advance), never a snapshot. Nothing in a workspace depends on where it lies: `.ledger/checkpoints.json` is
keyed by the ledger's identity (issue #22), so a copy keeps the checkpoints of the snapshot it came from, as a
moved workspace does. Every recorded `model_path` points at the session's tiny Llama folder (read only).

A test whose deployment must differ from `tiny` in what it requested (test faults, forced tiles, another
model folder) clones `tiny`'s stream at the phase where the difference starts to matter
(`tests.e2e.workspaces.clone_stream`), exactly as the ledger would have recorded it, and runs the rest itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import prebuilt
from tests.e2e.workspaces import copy_workspace

SNAPSHOT_PHASES = prebuilt.SNAPSHOT_PHASES  # after Phase 0, after Phase 3, deployed (Phase 7 passed)


@pytest.fixture(scope="session")
def tiny_snapshots(tmp_path_factory, tiny_llama) -> dict[int, Path]:
    """Phase -> a snapshot of the workspace in which `tiny` has just passed that phase (never hand one out).
    Built once per test run (tests.prebuilt: the xdist workers share it)."""
    return prebuilt.tiny_snapshots(tmp_path_factory)


@pytest.fixture
def tiny_at(tiny_snapshots, tmp_path):
    """`tiny_at(phase)`: this test's own copy of the workspace where `tiny` has passed `phase` (0, 3 or 7)."""

    def at(phase: int, name: str = "ws") -> Path:
        return copy_workspace(tiny_snapshots[phase], tmp_path / name)

    return at
