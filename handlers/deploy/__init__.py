"""The deployment commands, one module per command: `intake` (init), `attempts` (advance, and its public steps
`open_attempt` / `judge_attempt`), `review` (resume, lesson), `queries` (status, history), `reaudit` (audit).

Each handler is short: load the stream, fold, check, run the work, append with `expected_version`. Callers
(the click commands in handlers.cli, the workers' coordinator, handlers.reverify) import the names below
from `handlers.deploy`; the modules import nothing of each other but `attempts`.
"""

from handlers.deploy.attempts import (
    AdvanceReport,
    ModelChanged,
    AdvanceRequest,
    advance,
    bind,
    judge_attempt,
    open_attempt,
    stop_if_model_changed,
)
from handlers.deploy.intake import OutOfScope, init
from handlers.deploy.queries import history, status
from handlers.deploy.reaudit import AuditReport, audit
from handlers.deploy.review import lesson, resume

__all__ = [
    "AdvanceReport", "AdvanceRequest", "AuditReport", "ModelChanged", "OutOfScope", "advance", "audit", "bind", "history", "init",
    "judge_attempt", "lesson", "open_attempt", "resume", "status", "stop_if_model_changed",
]
