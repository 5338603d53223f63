"""What one `ledger advance` costs in ledger work, on the in-memory ledger (ledger.memory), through the CLI or the
MCP tool in this process, with a second deployment in the ledger: appends, stream and whole-ledger reads, folds (whole
streams folded: the state machine's, the unit of work's, the docs' view and toolchain rows from the events; events
applied to the state and added to the docs' view), and which deployments' projections are rebuilt afterwards. And
that the docs rendered from the view the advance folded are the bytes a refresh from scratch writes."""

from __future__ import annotations

import collections
import importlib
import uuid

import pytest

import handlers.deploy.queries
import handlers.scaffold_sync
import handlers.uow
import registry.model_docs
import registry.perf_history
import registry.projections
from handlers.mcp.server import LedgerServer
from handlers.registry_ops import build_projections
from handlers.uow import DeploymentUnit
from ledger import open_ledger
from ledger.memory import MemoryLedger, forget_store, memory_store
from registry.model_fold import DeploymentFold
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
    for module in (FOLD, handlers.deploy.queries, handlers.scaffold_sync):  # the state machine's fold from nothing
        wrap(module, "fold", "folds (whole stream)")
    # a unit of work's fold: from nothing when it loads the stream, else the records an append returned
    wrap(DeploymentUnit, "_fold",
         lambda self, records: "folds (whole stream)" if self.state is None else "folds (an append's records)")
    wrap(registry.model_docs, "fold_deployment", "folds (whole stream): docs' view from the events")
    wrap(registry.perf_history, "fold_history", "folds (whole stream): toolchain rows from the events")
    for module in (FOLD, handlers.uow):
        wrap(module, "apply", "events applied")
    wrap(DeploymentFold, "add", "events added to the docs' view")
    for name, predicate in list(CONDITIONS.items()):  # the lifecycle's guards, looked up by name when judged
        counted_predicate = (lambda p, n: lambda *a: (counts.update([f"judged {n}"]), p(*a))[1])(predicate, name)
        monkeypatch.setitem(CONDITIONS, name, counted_predicate)
    read_all = MemoryLedger.read_all

    def tail_rows(self, after=0, limit=None):
        rows = read_all(self, after, limit)
        counts["ledger, tail rows"] += len(rows) if after else 0
        return rows

    monkeypatch.setattr(MemoryLedger, "read_all", tail_rows)
    wrap(registry.projections, "project_model_docs",
         lambda events, name, folded=None: f"docs of {name}" + (", from a view folded already" if folded else ""))
    wrap(registry.projections, "project_registry", "registry projected")


def _advance(face: str, workspace, db: str) -> None:
    """`advance t --until 2` through the click command or the MCP tool (the same post-commit step), in this process."""
    if face == "cli":
        done = in_process(workspace, "advance", "t", "--until", "2", db=db)
        assert done.returncode == 0 and "phase 2 PASSED" in done.stdout, done.stderr
    else:
        done = LedgerServer(workspace, db).call("advance", {"name": "t", "until": 2})
        assert not done.is_error and done.structured_content["ran"][-1]["passed"], done.content


@pytest.mark.parametrize("face", ["cli", "mcp"])
def test_one_advance_folds_once_reads_the_ledger_once_and_projects_only_what_it_changed(tiny_llama, tmp_path,
                                                                                         monkeypatch, face):
    db = f"memory://{uuid.uuid4().hex}"
    assert in_process(tmp_path, "init", str(tiny_llama), "--name", "t", db=db).returncode == 0
    assert in_process(tmp_path, "init", str(tiny_llama), "--name", "u", db=db).returncode == 0
    counts: collections.Counter = collections.Counter()
    counting(monkeypatch, counts)
    try:
        _advance(face, tmp_path, db)
        stream = [row for row in memory_store(db).rows if row[1] == "deployment:t"]
    finally:
        forget_store(db)
    print(dict(sorted(counts.items())))
    assert counts["appends"] == 6, counts  # per phase: PhaseStarted with its evidence, then the verdict
    assert counts["stream, whole"] == 1, counts  # one fold of the stream ...
    assert counts["stream, tail"] == 0, counts  # ... extended in memory by each append: nothing read back
    assert counts["ledger, whole"] == 1, counts  # the plan's registry, triage and the projections share it ...
    assert counts["ledger, tail"] == 1 and counts["ledger, tail rows"] == 0, counts  # ... the appends extend it
    # the stream folded once (the unit's load), then each append's records folded in: each event applied once to
    # the state and added once to the docs' view, which the docs are rendered from (no fold of their own)
    assert counts["folds (whole stream)"] == 1, counts
    assert counts["folds (an append's records)"] == counts["appends"], counts
    assert counts["folds (whole stream): docs' view from the events"] == 0, counts
    assert counts["folds (whole stream): toolchain rows from the events"] == 0, counts
    assert counts["events applied"] == len(stream), (counts, len(stream))
    assert counts["events added to the docs' view"] == len(stream), (counts, len(stream))
    judged = {k: n for k, n in counts.items() if k.startswith("judged ")}  # each phase's predicate once
    assert judged == {"judged gate_0_reference_ok": 1, "judged gate_1_all_kernels_pass": 1,
                      "judged gate_2_block_ok": 1}, judged
    assert counts["registry projected"] == 1, counts
    assert counts["docs of t, from a view folded already"] == 1, counts  # only the advanced deployment's docs ...
    assert counts["docs of t"] == 0 and counts["docs of u"] == 0, counts  # ... from the view the advance folded


def test_the_docs_rendered_from_the_advances_view_are_the_bytes_a_refresh_from_scratch_writes(tiny_llama, tmp_path,
                                                                                              monkeypatch):
    """The advance's docs (rendered from its unit's view, no fold of their own) against a fresh ledger's: a new
    connection to the SQLite file, its events read whole, every projection built from them as `ledger registry
    build` does; and the view a fresh unit folds against the one folded from the events."""
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert in_process(tmp_path, "init", str(tiny_llama), "--name", "t", db=db).returncode == 0
    assert in_process(tmp_path, "init", str(tiny_llama), "--name", "u", db=db).returncode == 0
    counts: collections.Counter = collections.Counter()
    counting(monkeypatch, counts)
    done = in_process(tmp_path, "advance", "t", "--until", "2", db=db)
    monkeypatch.undo()
    assert done.returncode == 0, done.stderr
    assert counts["docs of t, from a view folded already"] == 1, counts  # what is on disk came from the view
    assert counts["folds (whole stream): docs' view from the events"] == 0, counts
    fresh = open_ledger(db)
    try:
        events = fresh.all_events()
        check = build_projections(events, tmp_path, check=True)  # `ledger registry check`: every byte compared
        assert check.total and not check.differing and not check.missing, check
        written = {p.relative_to(tmp_path).as_posix() for p in (tmp_path / "llms" / "t").rglob("*") if p.is_file()}
        assert written == {rel for rel in registry.projections.project_all(events, ["t"]) if rel.startswith("llms/t/")}
        from_scratch = registry.model_docs.project_model_docs(events, "t")
        assert registry.model_docs.project_model_docs(events, "t", DeploymentUnit(fresh, "t").view()) == from_scratch
    finally:
        fresh.close()
