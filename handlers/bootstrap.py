"""The one wiring point: workspace, ledger URL, structlog, executors.

Click commands receive an `App` through the context; they never open databases or configure logging
themselves.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from sqlalchemy.engine import make_url

from handlers.registry_ops import build_projections, link_message
from handlers.scaffold_sync import sync_scaffolds
from ledger import Checkpoint, Ledger, default_url, open_ledger
from ledger.checkpoints import RECORD, CheckpointRecord
from npu_kernels.settings import env_get
from registry.model_fold import DeploymentView

STALE_MARK = ".ledger/projections-stale"  # relative to the workspace: a refresh failed since the last full one


def configure_logging(verbosity: int = 0) -> None:
    """Logs go to stderr through structlog; -v shows info, -vv debug. Results go to stdout."""
    level = logging.WARNING - 10 * min(verbosity, 2)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


@dataclass
class App:
    """What every command needs: where the workspace is and how to reach the ledger.

    Read commands set `read_only` before they touch `ledger`: a SQLite ledger is then opened so that nothing
    can write to it (an auditor's read-only copy works). A SQLite ledger whose file or folder cannot be
    written is opened that way for every command; a command that appends then fails with one line."""

    workspace: Path
    db_url: str
    verbosity: int = 0
    read_only: bool = False
    _ledger: Ledger | None = field(default=None, repr=False)

    @classmethod
    def create(cls, workspace: str | None = None, db: str | None = None, verbosity: int = 0) -> "App":
        ws = Path(workspace or env_get("LEDGER_HOME") or os.getcwd()).resolve()
        return cls(workspace=ws, db_url=db or default_url(ws), verbosity=verbosity)

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = open_ledger(self.db_url, read_only=self.read_only or _unwritable_sqlite(self.db_url))
        return self._ledger

    def open_ledger(self) -> Ledger:
        return self.ledger

    @property
    def opened_read_only(self) -> bool:
        """Whether the ledger this command opened is read-only (False when none was opened)."""
        return self._ledger is not None and self._ledger.read_only

    # --- the checkpoints this workspace has seen, by ledger identity (.ledger/checkpoints.json) ----------

    @property
    def checkpoint_record(self) -> CheckpointRecord:
        return CheckpointRecord.for_workspace(self.workspace, self.db_url)

    def remember_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep `checkpoint` of this ledger if it is larger than any recorded (OSError: it could not be kept)."""
        if checkpoint.size:
            self.checkpoint_record.remember(self.ledger.identity(), checkpoint)

    def keep_checkpoint(self, checkpoint: Checkpoint) -> str | None:
        """`remember_checkpoint` for read commands: None, or the one-line warning to print when the record
        cannot be written (a full disk, a read-only copy); the command's own result stands."""
        try:
            self.remember_checkpoint(checkpoint)
        except OSError as e:
            return (f"warning: the checkpoint {checkpoint.size}:{checkpoint.hash[:12]}... was not kept in {RECORD} "
                    f"({e.strerror or type(e).__name__}); `ledger verify` cannot compare the ledger with it later")
        return None

    def refresh_projections(self, only: Collection[str] | None = None,
                            folded: Iterable[DeploymentView] = ()) -> list[str]:
        """Rebuild the registry and model docs after a change (with `only`: the registry and those deployments'
        docs, what a command that appended to their streams alone changed; with `folded`: the views its units of
        work folded, which those docs are rendered from, registry.projections.project_all) and remember the
        ledger's new checkpoint; returns the warning lines to show (none when all went well).

        The command's events are committed already: a refresh that fails (a full disk, a path in the way) is a
        warning, not a failure, and leaves STALE_MARK in the workspace: the next command's refresh rebuilds every
        deployment's docs from the ledger's events alone, whichever deployment it is about (or `ledger registry
        build`), and removes the mark. No temporary file is left behind."""
        warnings = []
        stale = Path(self.workspace) / STALE_MARK
        if only is not None and stale.exists():  # an earlier refresh failed: its deployments' docs may be behind
            only, folded = None, ()
        try:
            events = self.ledger.all_events()
            result = build_projections(events, self.workspace, only=only, folded=folded)
            # a projected folder that is a symbolic link is neither written nor followed
            warnings += [f"warning: recorded, but {link_message(self.workspace, rel)}" for rel in result.links]
            sync_scaffolds(events)  # a scaffolded ARCHITECTURE.md states the switches the ledger records now
            if events:
                self.remember_checkpoint(Checkpoint(events[-1].seq, events[-1].hash))
            if only is None:
                stale.unlink(missing_ok=True)
        except Exception as e:  # noqa: BLE001 - the commit stands; say what failed and move on
            _mark_stale(stale)
            line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            warnings.append(f"warning: recorded, but refreshing the projections failed ({line}); they are rebuilt on "
                            "the next command or by `ledger registry build`")
        return warnings

    # helpers' commands read these keys from ctx.obj
    def __getitem__(self, key: str):
        return {"open_ledger": self.open_ledger, "workspace": self.workspace, "app": self}[key]

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None


def _mark_stale(stale: Path) -> None:
    """Leave the mark that makes the next refresh a full one; where even that cannot be written, the warning stands."""
    try:
        stale.parent.mkdir(parents=True, exist_ok=True)
        stale.write_text("a projection refresh failed; the next command's refresh rebuilds every deployment's docs\n")
    except OSError:
        pass


def _unwritable_sqlite(url: str) -> bool:
    """A SQLite file that exists but that this process cannot write, or whose folder it cannot (the WAL)."""
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - an unparsable URL fails when the ledger opens
        return False
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return False
    path = Path(parsed.database)
    return path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


log = structlog.get_logger("npu_ledger")
