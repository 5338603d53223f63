"""Session fixtures paid once per test run, whatever the number of pytest-xdist workers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from filelock import FileLock


def shared_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `name`, built by `build(folder)` once per test run: under pytest-xdist every worker of the run
    gets the same folder (the first to take the lock builds it, the others wait for it), so a session fixture
    that costs minutes is paid once, not once per worker. Without xdist: once per session, as before. A build
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
