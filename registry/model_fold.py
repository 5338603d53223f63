"""The per-deployment fold behind the model docs: one stream's events, grouped for rendering.

`fold_deployment(events, name)` keeps the events of stream `deployment:<name>` (seq order) and derives:

* per phase 0-7 a status from the latest PhaseStarted / PhasePassed / PhaseFailed / PhaseInconclusive (`passed`,
  `failed`, `inconclusive` (no verdict: its device run timed out on every try), `in progress`, `pending`) with every attempt's start (PhaseStarted.started_at: when the work began),
  end (the closing event's `recorded_at`) and wall time;
* blockers: each `BlockerRaised`, resolved by the first later `DeploymentResumed` of the same phase;
* the latest `FailureTriaged` per subject seq (a PhaseFailed or a KernelVerified);
* the evidence events by type, in seq order;
* the per-toolchain rows of docs/perf_history.md (registry.perf_history.HistoryFold).

It reads the typed events (`RecordedEvent.event`); it never looks at the clock. `DeploymentFold` is the same view
grown one record at a time: what a unit of work that already folds the stream (handlers.uow) hands to the
projections, so the docs of the deployment it changed need no second fold; `fold_deployment` runs it over a stream
read whole, which is what a refresh from scratch does, and both give the same view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Sequence

from ledger.record import RecordedEvent
from registry.perf_history import HistoryFold, ToolchainRow
from registry.text import shown
from ledger.streams import deployment_stream

PHASE_TITLES = {
    0: "Build CPU Reference",
    1: "Kernel Validation",
    2: "Single-Block Validation",
    3: "Full-Model Validation",
    4: "Prefill Optimization",
    5: "Decode Optimization",
    6: "Finalize & Learn",
    7: "Independent Evaluation",
}


def parse_time(text: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def show_time(text: str) -> str:
    t = parse_time(text)
    return t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ") if t else text


@dataclass(frozen=True)
class AttemptSummary:
    phase: int
    attempt: int
    started: RecordedEvent | None
    ended: RecordedEvent | None  # PhasePassed, PhaseFailed or PhaseInconclusive

    @property
    def outcome(self) -> str:
        if self.ended is None:
            return "in progress"
        return _OUTCOME[self.ended.type]

    @property
    def start_recorded(self) -> bool:
        """True when PhaseStarted says when the work began (`started_at`); older ledgers do not."""
        return self.started is not None and bool(self.started.payload.get("started_at"))

    @property
    def start_time(self) -> datetime | None:
        """When the attempt's work began: PhaseStarted.started_at, else its recorded_at (older ledgers,
        where PhaseStarted was written with the finished evidence)."""
        if self.started is None:
            return None
        return parse_time(self.started.payload.get("started_at") or self.started.recorded_at)

    @property
    def end_time(self) -> datetime | None:
        return parse_time(self.ended.recorded_at) if self.ended is not None else None

    @property
    def wall_minutes(self) -> float | None:
        a, b = self.start_time, self.end_time
        return None if a is None or b is None else (b - a).total_seconds() / 60.0


@dataclass(frozen=True)
class PhaseView:
    phase: int
    status: str  # passed | failed | in progress | pending
    latest: RecordedEvent | None
    attempts: tuple[AttemptSummary, ...]

    @property
    def title(self) -> str:
        return PHASE_TITLES[self.phase]


@dataclass(frozen=True)
class BlockerView:
    raised: RecordedEvent
    resolved_by: RecordedEvent | None


@dataclass(frozen=True)
class DeploymentView:
    name: str
    stream_id: str
    events: tuple[RecordedEvent, ...]
    phases: tuple[PhaseView, ...]
    blockers: tuple[BlockerView, ...]
    triage_by_subject: dict[int, RecordedEvent]
    toolchains: tuple[ToolchainRow, ...] = ()  # docs/perf_history.md's rows (registry.perf_history.HistoryFold)

    def of(self, *types: str) -> list[RecordedEvent]:
        return [e for e in self.events if e.type in types]

    def latest(self, type_: str) -> RecordedEvent | None:
        found = self.of(type_)
        return found[-1] if found else None

    @property
    def active_blockers(self) -> list[BlockerView]:
        return [b for b in self.blockers if b.resolved_by is None]

    def failed_phases(self) -> list[PhaseView]:
        return [p for p in self.phases if p.status == "failed"]

    def triage_for_phase(self, phase: int) -> RecordedEvent | None:
        """The latest FailureTriaged whose subject is one of this phase's PhaseFailed events."""
        fails = {e.seq for e in self.of("PhaseFailed") if e.event.phase == phase}
        found = [t for s, t in self.triage_by_subject.items() if s in fails]
        return max(found, key=lambda t: t.seq) if found else None


_OUTCOME = {"PhasePassed": "passed", "PhaseFailed": "failed", "PhaseInconclusive": "inconclusive"}


class DeploymentFold:
    """The view of one deployment's stream grown a record at a time: `add(rec)` for each record in seq order (the
    stream's own only), `view()` the DeploymentView of what was added so far. `fold_deployment` is this over a
    stream read whole; a unit of work (handlers.uow.DeploymentUnit) adds the records it folds into its state, read
    or appended, so the docs of the deployment it changed are rendered without folding the stream again.

    Each record is looked at once: its PhaseStarted / outcome goes to its attempt's slot, a BlockerRaised or
    DeploymentResumed to its list (matched in `view()`: the blockers and resumes, not the stream), a
    FailureTriaged to its subject (a later triage of the same subject wins)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stream_id = deployment_stream(name)
        self._events: list[RecordedEvent] = []
        self._attempts: dict[tuple[int, int], list[RecordedEvent | None]] = {}
        self._latest: dict[int, RecordedEvent] = {}
        self._raised: list[RecordedEvent] = []
        self._resumes: list[RecordedEvent] = []
        self._triage: dict[int, RecordedEvent] = {}
        self._history = HistoryFold()

    def add(self, rec: RecordedEvent) -> None:
        """One more record of the stream, after every one added before it."""
        if rec.stream_id != self.stream_id:
            raise ValueError(f"seq {rec.seq} belongs to stream {rec.stream_id!r}, not {self.stream_id!r}")
        if self._events and rec.seq <= self._events[-1].seq:
            raise ValueError(f"seq {rec.seq} does not follow seq {self._events[-1].seq} of {self.stream_id!r}")
        self._events.append(rec)
        self._history.add(rec)
        if rec.type == "PhaseStarted" or rec.type in _OUTCOME:
            e = rec.event
            slot = self._attempts.setdefault((e.phase, e.attempt), [None, None])
            if rec.type == "PhaseStarted":
                slot[0] = slot[0] or rec
            elif slot[1] is None:
                slot[1] = rec
            self._latest[e.phase] = rec
        elif rec.type == "BlockerRaised":
            self._raised.append(rec)
        elif rec.type == "DeploymentResumed":
            self._resumes.append(rec)
        elif rec.type == "FailureTriaged" and rec.event.subject_seq is not None:
            self._triage[rec.event.subject_seq] = rec

    def view(self) -> DeploymentView:
        """The DeploymentView of the records added so far (a snapshot: later `add`s do not change it)."""
        return DeploymentView(  # name: as pages show it (escaped when not printable: an older ledger may hold one)
            name=shown(self.name), stream_id=self.stream_id, events=tuple(self._events),
            phases=_phases(self._attempts, self._latest), blockers=_blockers(self._raised, self._resumes),
            triage_by_subject=dict(sorted(self._triage.items())), toolchains=tuple(self._history.rows()),
        )


def _phases(attempts: dict[tuple[int, int], list[RecordedEvent | None]],
            latest: dict[int, RecordedEvent]) -> tuple[PhaseView, ...]:
    views = []
    for phase in range(8):
        mine = sorted((k, v) for k, v in attempts.items() if k[0] == phase)
        rec = latest.get(phase)
        if rec is None:
            status = "pending"
        elif rec.type == "PhaseStarted":
            status = "in progress"
        else:
            status = _OUTCOME[rec.type]
        views.append(PhaseView(phase, status, rec, tuple(AttemptSummary(p, a, s, d) for (p, a), (s, d) in mine)))
    return tuple(views)


def _blockers(raised: list[RecordedEvent], resumes: list[RecordedEvent]) -> tuple[BlockerView, ...]:
    out = []
    used: set[int] = set()
    for rec in raised:
        fix = next(
            (r for r in resumes if r.seq > rec.seq and r.event.phase == rec.event.phase and r.seq not in used), None
        )
        if fix is not None:
            used.add(fix.seq)
        out.append(BlockerView(rec, fix))
    return tuple(out)


def current(view: DeploymentView, events: Sequence[RecordedEvent]) -> bool:
    """Whether `view` is its stream as `events` (seq order, read whole) hold it: they hold its last record and none of
    its stream after that (another writer's append since the view was folded). Only the tail past the view's last
    record is looked at."""
    if not view.events:
        return False
    last = view.events[-1]
    for rec in reversed(events):
        if rec.seq < last.seq:
            return False
        if rec.seq == last.seq:
            return rec.stream_id == view.stream_id and rec.hash == last.hash
        if rec.stream_id == view.stream_id:
            return False
    return False


def fold_deployment(events: Iterable[RecordedEvent], name: str) -> DeploymentView:
    """The view of deployment `name` from events read whole (any streams, any order): its stream's records in seq
    order through `DeploymentFold`."""
    fold = DeploymentFold(name)
    for rec in sorted((e for e in events if e.stream_id == fold.stream_id), key=lambda e: e.seq):
        fold.add(rec)
    return fold.view()
