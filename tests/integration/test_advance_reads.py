"""One `ledger advance` reads the deployment's stream once and the whole ledger once, on the in-memory ledger
(ledger.memory), through the CLI in this process."""

from __future__ import annotations

import collections
import uuid

from ledger.memory import MemoryLedger, forget_store
from tests.e2e.cli import in_process


def test_one_advance_folds_the_stream_once_and_reads_the_ledger_once(tiny_llama, tmp_path, monkeypatch):
    db = f"memory://{uuid.uuid4().hex}"
    assert in_process(tmp_path, "init", str(tiny_llama), "--name", "t", db=db).returncode == 0
    reads: collections.Counter = collections.Counter()
    read_stream, read_all = MemoryLedger.read_stream, MemoryLedger.read_all

    def counted_stream(self, stream_id, after_version=0):
        reads["stream, whole" if after_version == 0 else "stream, tail"] += 1
        return read_stream(self, stream_id, after_version)

    def counted_all(self, after=0, limit=None):
        reads["ledger, whole" if after == 0 else "ledger, tail"] += 1
        return read_all(self, after, limit)

    monkeypatch.setattr(MemoryLedger, "read_stream", counted_stream)
    monkeypatch.setattr(MemoryLedger, "read_all", counted_all)
    done = in_process(tmp_path, "advance", "t", "--until", "2", db=db)
    forget_store(db)
    assert done.returncode == 0, done.stderr
    assert "phase 2 PASSED" in done.stdout
    assert reads["stream, whole"] == 1, reads  # one fold; each append reads back only its own tail
    assert reads["ledger, whole"] == 1, reads  # the plan's registry, triage and the projections share it
