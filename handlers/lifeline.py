"""A child process that must not outlive the process that started it (the independent evaluator).

The parent passes its pid in LIFELINE_ENV. The child asks Linux to SIGKILL it when its parent dies
(`prctl(PR_SET_PDEATHSIG)`, which also reaches a stopped process) and, where prctl is not available, watches
its parent pid from a daemon thread. Either way a parent that died before the child got this far is noticed
at once (its parent pid is no longer the one passed). The evaluator writes nothing, so a kill loses nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from npu_kernels.settings import env_get, env_copy

LIFELINE_ENV = "NPU_LEDGER_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with this process named as the child's parent."""
    return {**(env_copy() if env is None else env), LIFELINE_ENV: str(os.getpid())}


def die_with_parent() -> None:
    """Exit when the parent named in LIFELINE_ENV exits (no-op when it is not set)."""
    expected = env_get(LIFELINE_ENV)
    if not expected or not expected.isdigit():
        return
    parent = int(expected)
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent:  # the parent died before the lifeline was armed
        os._exit(1)
    if not armed:
        threading.Thread(target=_watch, args=(parent,), name="lifeline", daemon=True).start()


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)
