"""The suite's shared deployments and folders, explained in this one place.

What is shared. The tiny HF models (one folder per family, tests/models.py), the tiny Llama's deployment `tiny`
(emulated executor, SQLite ledger) snapshotted after Phases 0, 3 and 7, and the tiny Q4NX bundle with its two
deployed workspaces. Each is built once per test run by `shared_once`, whatever the number of pytest-xdist workers:
the workers share the run's temporary root, the first to take a folder's lock builds it, the others wait, and a
build that raised leaves no mark, so the next asker builds again and fails the same way.

Who builds it. Under xdist the controller (which only deals tests out) starts `build_all` on a thread once the
workers are up (tests/conftest.py, `pytest_sessionstart`), while the workers run the tests that need none of it:
tests/conftest.py deals the twin's end-to-end test first, then unit, integration, and the end-to-end tests last.
Files whose module fixtures cost more than their tests (a second deployed model, a verify walk, the pipelines) go
to one worker whole (`GROUPED` there).

How a test uses it. A snapshot is never handed out: `tiny_at(phase)` (tests/e2e/conftest.py) copies the workspace
where `tiny` has just passed that phase into the test's own tmp_path, and the test mutates its copy (tampers,
appends, advances). Nothing in a workspace depends on where it lies (`.ledger/checkpoints.json` is keyed by the
ledger's identity), so a copy keeps its checkpoints; every recorded `model_path` points at the shared, read-only
tiny model folder. A test whose deployment must differ from `tiny` (test faults, forced tiles, another folder)
clones `tiny`'s stream at the phase where the difference starts (`tests.e2e.workspaces.clone_stream`).

How commands run. `tests.e2e.cli.ledger` runs each `ledger` command in a process of its own, forked from an
interpreter that imported the tool once per test process (tests/preloaded.py); the read commands a test uses to
look at the result run through click in the test's own process. HF reference walks are kept in one store per
run (tests/conftest.py, `reference_store`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from filelock import FileLock

SNAPSHOT_PHASES = (0, 3, 7)  # after Phase 0, after Phase 3, deployed (Phase 7 passed)


def shared_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `name`, built by `build(folder)` once per test run: under pytest-xdist every worker of the run
    gets the same folder (the first to take the lock builds it, the others wait for it), so a session fixture
    that costs minutes is paid once, not once per worker. Without xdist: once per session. A build
    that raised leaves no `<name>.built` mark, so the next asker builds again (and fails the same way)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's root, shared by the workers' popen-gwN folders
    folder, built = base / name, base / f"{name}.built"  # the mark beside the folder: nothing extra inside it
    with FileLock(str(base / f"{name}.lock")):
        if not built.exists():
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            build(folder)
            built.touch()
    return folder


def tiny_model(factory, kind: str) -> Path:
    """A tiny random-init HF model folder of `kind` (tests.models)."""
    from tests.models import build_tiny_model

    return shared_once(factory, f"tiny-{kind}", lambda folder: build_tiny_model(kind, folder))


def tiny_drafter(factory) -> Path:
    """The tiny Llama's drafter for speculative decoding: its first layer, embeddings, final norm, LM head and
    tokenizer (tests.models.build_tiny_drafter)."""
    from tests.models import build_tiny_drafter

    llama = tiny_model(factory, "llama")
    return shared_once(factory, "tiny-llama-drafter", lambda folder: build_tiny_drafter(llama, folder))


def tiny_snapshots(factory) -> dict[int, Path]:
    """Phase -> a snapshot of the workspace in which `tiny` (the tiny Llama, emulated, SQLite) has just passed it:
    `ledger init` with a drafter (`--drafter`, block 2: Phase 5 judges speculative decoding), `ledger advance
    --until 0`, `--until 3`, then `ledger advance` to deployed, through the real CLI."""
    from tests.e2e.cli import ledger
    from tests.e2e.workspaces import copy_workspace

    llama = tiny_model(factory, "llama")
    drafter = tiny_drafter(factory)

    def build(root: Path) -> None:
        live = root / "live"
        proc = ledger(live, "init", str(llama), "--name", "tiny", "--drafter", str(drafter), "--draft-block", "2")
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
