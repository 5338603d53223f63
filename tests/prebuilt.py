"""The suite's costly shared folders, each built once per test run (`tests.once.shared_once`): the tiny HF models,
the tiny deployment's phase snapshots and the tiny Q4NX bundle and deployment. The session fixtures
(tests/conftest.py, tests/e2e/conftest.py, tests/e2e/test_deploy_q4nx.py) ask for them here.

Under pytest-xdist the controller starts building them on a background thread while the workers start on the tests
that need none of them (tests/conftest.py orders those first): a worker that asks for a folder still being built
waits on its lock, as before, but no worker idles at the start of the run waiting for a snapshot another worker
builds (that was 45 s of one core for the tiny snapshot and 30 s for the Q4NX one)."""

from __future__ import annotations

from pathlib import Path

from tests.once import shared_once

SNAPSHOT_PHASES = (0, 3, 7)  # after Phase 0, after Phase 3, deployed (Phase 7 passed)


def tiny_model(factory, kind: str) -> Path:
    """A tiny random-init HF model folder of `kind` (tests.models)."""
    from tests.models import build_tiny_model

    return shared_once(factory, f"tiny-{kind}", lambda folder: build_tiny_model(kind, folder))


def tiny_snapshots(factory) -> dict[int, Path]:
    """Phase -> a snapshot of the workspace in which `tiny` (the tiny Llama, emulated, SQLite) has just passed it:
    `ledger init`, `ledger advance --until 0`, `--until 3`, then `ledger advance` to deployed, through the real CLI."""
    from tests.e2e.cli import ledger
    from tests.e2e.workspaces import copy_workspace

    llama = tiny_model(factory, "llama")

    def build(root: Path) -> None:
        live = root / "live"
        proc = ledger(live, "init", str(llama), "--name", "tiny")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for phase in SNAPSHOT_PHASES:
            proc = ledger(live, "advance", "tiny", *(["--until", str(phase)] if phase < 7 else []))
            assert proc.returncode == 0, proc.stdout + proc.stderr
            copy_workspace(live, root / f"phase{phase}")

    root = shared_once(factory, "tiny-snapshots", build)
    return {phase: root / f"phase{phase}" for phase in SNAPSHOT_PHASES}


def q4nx_bundle(factory) -> Path:
    """The tiny Llama quantised by `ledger quantize --to q4nx`."""
    from tests.e2e.cli import ledger

    llama = tiny_model(factory, "llama")

    def build(root: Path) -> None:
        proc = ledger(root, "quantize", str(llama), "--to", "q4nx", str(root / "model.q4nx"))
        assert proc.returncode == 0, proc.stdout + proc.stderr

    return shared_once(factory, "q4nx-bundle", build) / "model.q4nx"


def q4nx_snapshot(factory) -> Path:
    """A workspace where `tq` (the tiny Llama's Q4NX bundle on its bf16 base) is deployed (never hand it out)."""
    from tests.e2e.cli import ledger

    llama, bundle = tiny_model(factory, "llama"), q4nx_bundle(factory)

    def build(root: Path) -> None:
        live = root / "live"
        proc = ledger(live, "init", str(bundle), "--base", str(llama), "--name", "tq")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        proc = ledger(live, "advance", "tq")
        assert proc.returncode == 0, proc.stdout + proc.stderr

    return shared_once(factory, "q4nx-snapshot", build) / "live"


def q4nx_device_snapshot(factory) -> Path:
    """A workspace where `tqd` (the same bundle in the on-device 4-bit style, `--q4nx-style device`) is deployed."""
    from tests.e2e.cli import ledger

    llama, bundle = tiny_model(factory, "llama"), q4nx_bundle(factory)

    def build(root: Path) -> None:
        live = root / "live"
        proc = ledger(live, "init", str(bundle), "--base", str(llama), "--name", "tqd", "--q4nx-style", "device")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        proc = ledger(live, "advance", "tqd")
        assert proc.returncode == 0, proc.stdout + proc.stderr

    return shared_once(factory, "q4nx-device-snapshot", build) / "live"


def build_all(factory) -> None:
    """Everything above, in the order the suite first needs it (the xdist controller's background build)."""
    for kind in ("llama", "qwen2", "qwen3"):
        tiny_model(factory, kind)
    tiny_snapshots(factory)
    q4nx_snapshot(factory)
    q4nx_device_snapshot(factory)
