"""End-to-end fixtures: `tiny_snapshots` and `tiny_at(phase)`, a test's own copy of the tiny deployment after a
phase. tests/prebuilt.py explains what is shared, who builds it and how a test uses it."""

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
