"""The deployment verbs' handlers on the in-memory ledger (ledger.memory): no database, no subprocess."""

from __future__ import annotations

import uuid

import pytest

from handlers.deploy import history, lesson, resume, status
from handlers.uow import DeploymentError
from ledger import open_ledger
from ledger.memory import forget_store
from registry.synthetic import realistic_deployment


@pytest.fixture
def ledger():
    url = f"memory://{uuid.uuid4().hex}"
    led = open_ledger(url)
    for stream, event, *_ in realistic_deployment("smol"):
        led.append(stream, led.stream_version(stream), [event])
    yield led
    forget_store(url)


def test_status_and_history_read_the_folded_deployment(ledger):
    [row] = status(ledger)
    assert row["name"] == "smol" and row["status"] == "needs_human_review"
    assert "phase 4 failed twice" in row["last_verdict"]
    assert len(history(ledger, "smol")) == len(ledger.read_stream("deployment:smol"))
    with pytest.raises(DeploymentError, match="no deployment named 'nope' \\(known: smol\\)"):
        status(ledger, "nope")


def test_a_lesson_and_a_resume_are_appended_and_fold(ledger):
    before = ledger.head().size
    seq = lesson(ledger, "smol", "tile_n 64 for N=576")
    assert seq == before + 1 and ledger.read_all(after=before)[0].type == "LessonRecorded"
    resume(ledger, "smol", "fixed the decode GEMV tile")
    assert status(ledger, "smol")[0]["status"] != "needs_human_review"
    assert ledger.verify().ok
    with pytest.raises(DeploymentError):
        resume(ledger, "smol", "again")  # nothing to resume any more
