"""The one wiring point: workspace, ledger URL, structlog, executors.

Click commands receive an `App` through the context; they never open databases or configure logging
themselves.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from ledger import Checkpoint, Ledger, default_url, open_ledger
from sqlalchemy.engine import make_url


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
    """What every command needs: where the workspace is and how to reach the ledger."""

    workspace: Path
    db_url: str
    verbosity: int = 0
    _ledger: Ledger | None = field(default=None, repr=False)

    @classmethod
    def create(cls, workspace: str | None = None, db: str | None = None, verbosity: int = 0) -> "App":
        ws = Path(workspace or os.environ.get("LEDGER_HOME") or os.getcwd()).resolve()
        return cls(workspace=ws, db_url=db or default_url(ws), verbosity=verbosity)

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = open_ledger(self.db_url)
        return self._ledger

    def open_ledger(self) -> Ledger:
        return self.ledger

    # --- the last checkpoint this workspace printed or wrote, per database (.ledger/checkpoints.json) ---

    @property
    def _checkpoints_file(self) -> Path:
        return self.workspace / ".ledger" / "checkpoints.json"

    def _db_key(self) -> str:
        try:
            return make_url(self.db_url).render_as_string(hide_password=True)
        except Exception:  # noqa: BLE001 - an unparsable URL fails when the ledger opens
            return self.db_url

    def remembered_checkpoint(self) -> Checkpoint | None:
        """The largest checkpoint this workspace has seen of its database (None: never any event)."""
        try:
            text = json.loads(self._checkpoints_file.read_text(encoding="utf-8")).get(self._db_key())
            return Checkpoint.parse(text) if text else None
        except (OSError, ValueError, AttributeError):
            return None

    def remember_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep `checkpoint` if it is larger than the one remembered (a ledger only grows)."""
        known = self.remembered_checkpoint()
        if checkpoint.size == 0 or (known is not None and known.size >= checkpoint.size):
            return
        try:
            data = json.loads(self._checkpoints_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        data[self._db_key()] = str(checkpoint)
        self._checkpoints_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._checkpoints_file.with_name(f".checkpoints.json.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            tmp.replace(self._checkpoints_file)
        finally:
            tmp.unlink(missing_ok=True)

    # helpers' commands read these keys from ctx.obj
    def __getitem__(self, key: str):
        return {"open_ledger": self.open_ledger, "workspace": self.workspace, "app": self}[key]

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None


log = structlog.get_logger("npu_ledger")
