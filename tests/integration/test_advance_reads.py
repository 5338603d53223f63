"""What one `ledger advance` costs in ledger work, on the in-memory ledger (ledger.memory), through the CLI in
this process, with a second deployment in the ledger: appends, stream and whole-ledger reads, folds (whole
streams folded, events applied), and which deployments' projections are rebuilt afterwards."""

from __future__ import annotations

import collections
import importlib
import uuid

import handlers.deploy.queries
import handlers.scaffold_sync
import handlers.uow
import registry.model_docs
import registry.projections
from ledger.memory import MemoryLedger, forget_store, memory_store
from statemachine.predicates import CONDITIONS
from tests.e2e.cli import in_process

FOLD = importlib.import_module("statemachine.fold")  # the package's `fold` names the function


def counting(monkeypatch, counts: collections.Counter) -> None:
    """Count every append, read, fold and projection on the way (the functions themselves still run)."""

    def wrap(owner, attr: str, key):
        original = getattr(owner, attr)

        def counted(*args, **kwargs):
            counts[key(*args, **kwargs) if callable(key) else key] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, attr, counted)

    wrap(MemoryLedger, "_append", "appends")  # append and append_recorded
    wrap(MemoryLedger, "read_stream",
         lambda self, stream_id, after_version=0: "stream, whole" if after_version == 0 else "stream, tail")
    wrap(MemoryLedger, "read_all", lambda self, after=0, limit=None: "ledger, whole" if after == 0 else "ledger, tail")
    for module in (FOLD, handlers.uow, handlers.deploy.queries, handlers.scaffold_sync):
        wrap(module, "fold", "folds (whole stream)")
    for module in (FOLD, handlers.uow):
        wrap(module, "apply", "events applied")
    for name, predicate in list(CONDITIONS.items()):  # the lifecycle's guards, looked up by name when judged
        counted_predicate = (lambda p, n: lambda *a: (counts.update([f"judged {n}"]), p(*a))[1])(predicate, name)
        monkeypatch.setitem(CONDITIONS, name, counted_predicate)
    read_all = MemoryLedger.read_all

    def tail_rows(self, after=0, limit=None):
        rows = read_all(self, after, limit)
        counts["ledger, tail rows"] += len(rows) if after else 0
        return rows

    monkeypatch.setattr(MemoryLedger, "read_all", tail_rows)
    wrap(registry.projections, "project_model_docs", lambda events, name: f"docs of {name}")
    wrap(registry.projections, "project_registry", "registry projected")
    wrap(registry.model_docs, "fold_deployment", "deployments folded for docs")


def test_one_advance_folds_once_reads_the_ledger_once_and_projects_only_what_it_changed(tiny_llama, tmp_path,
                                                                                         monkeypatch):
    db = f"memory://{uuid.uuid4().hex}"
    assert in_process(tmp_path, "init", str(tiny_llama), "--name", "t", db=db).returncode == 0
    assert in_process(tmp_path, "init", str(tiny_llama), "--name", "u", db=db).returncode == 0
    counts: collections.Counter = collections.Counter()
    counting(monkeypatch, counts)
    done = in_process(tmp_path, "advance", "t", "--until", "2", db=db)
    stream = [row for row in memory_store(db).rows if row[1] == "deployment:t"]
    forget_store(db)
    assert done.returncode == 0, done.stderr
    assert "phase 2 PASSED" in done.stdout
    print(dict(sorted(counts.items())))
    assert counts["appends"] == 6, counts  # per phase: PhaseStarted with its evidence, then the verdict
    assert counts["stream, whole"] == 1, counts  # one fold of the stream ...
    assert counts["stream, tail"] == 0, counts  # ... extended in memory by each append: nothing read back
    assert counts["ledger, whole"] == 1, counts  # the plan's registry, triage and the projections share it ...
    assert counts["ledger, tail"] == 1 and counts["ledger, tail rows"] == 0, counts  # ... the appends extend it
    assert counts["folds (whole stream)"] == 1, counts  # the stream folded once, then each event applied once:
    assert counts["events applied"] == len(stream), (counts, len(stream))
    judged = {k: n for k, n in counts.items() if k.startswith("judged ")}  # each phase's predicate once
    assert judged == {"judged gate_0_reference_ok": 1, "judged gate_1_all_kernels_pass": 1,
                      "judged gate_2_block_ok": 1}, judged
    assert counts["registry projected"] == 1, counts
    assert counts["docs of t"] == 1 and counts["docs of u"] == 0, counts  # only the advanced deployment's docs
