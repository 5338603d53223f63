"""The per-deployment fold behind the model docs: one stream's events, grouped for rendering.

`fold_deployment(events, name)` keeps the events of stream `deployment:<name>` (seq order) and derives:

* per phase 0-7 a status from the latest PhaseStarted / PhasePassed / PhaseFailed / PhaseInconclusive (`passed`,
  `failed`, `inconclusive` (no verdict: its device run timed out on every try), `in progress`, `pending`) with every attempt's start (PhaseStarted.started_at: when the work began),
  end (the closing event's `recorded_at`) and wall time;
* blockers: each `BlockerRaised`, resolved by the first later `DeploymentResumed` of the same phase;
* the latest `FailureTriaged` per subject seq (a PhaseFailed or a KernelVerified);
* the evidence events by type, in seq order.

It reads the typed events (`RecordedEvent.event`); it never looks at the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from ledger.record import RecordedEvent
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


def _phases(events: list[RecordedEvent]) -> tuple[PhaseView, ...]:
    attempts: dict[tuple[int, int], list[RecordedEvent | None]] = {}
    latest: dict[int, RecordedEvent] = {}
    for rec in events:
        if rec.type not in ("PhaseStarted", *_OUTCOME):
            continue
        e = rec.event
        slot = attempts.setdefault((e.phase, e.attempt), [None, None])
        if rec.type == "PhaseStarted":
            slot[0] = slot[0] or rec
        elif slot[1] is None:
            slot[1] = rec
        latest[e.phase] = rec
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


def _blockers(events: list[RecordedEvent]) -> tuple[BlockerView, ...]:
    out = []
    resumes = [e for e in events if e.type == "DeploymentResumed"]
    used: set[int] = set()
    for rec in events:
        if rec.type != "BlockerRaised":
            continue
        fix = next(
            (r for r in resumes if r.seq > rec.seq and r.event.phase == rec.event.phase and r.seq not in used), None
        )
        if fix is not None:
            used.add(fix.seq)
        out.append(BlockerView(rec, fix))
    return tuple(out)


def fold_deployment(events: Iterable[RecordedEvent], name: str) -> DeploymentView:
    stream_id = deployment_stream(name)
    mine = sorted((e for e in events if e.stream_id == stream_id), key=lambda e: e.seq)
    triage: dict[int, RecordedEvent] = {}
    for rec in mine:
        if rec.type == "FailureTriaged" and rec.event.subject_seq is not None:
            triage[rec.event.subject_seq] = rec  # later triage of the same subject wins
    return DeploymentView(  # name: as pages show it (escaped when not printable: an older ledger may hold one)
        name=shown(name), stream_id=stream_id, events=tuple(mine), phases=_phases(mine), blockers=_blockers(mine),
        triage_by_subject=dict(sorted(triage.items())),
    )
