"""The checkpoints a workspace has seen of its ledgers, and the one chain check `ledger verify` and the
evaluator (`ledger audit`) share.

The record, `<workspace>/.ledger/checkpoints.json`, is keyed by the ledger's identity (`Identity`: its first
event's id and chain hash), not by where the database is, so moving or copying a workspace keeps it:

    {"format": 2,
     "ledgers":   {"<genesis hash>": {"first_event_id": "<uuid>", "checkpoints": ["3:<hash>", "80:<hash>", ...]}},
     "locations": {".ledger/ledger.db": "<genesis hash>"}}

Every checkpoint the workspace saw is kept (ascending; past `KEEP` the older half is thinned), and all of
them are checked: a rewrite cannot hide behind a later, larger checkpoint taken of the rewritten ledger.
`locations` maps where the workspace's ledger lives (a path relative to the workspace for a SQLite file
inside it, else the URL without its password) to the identity seen there first, so a ledger replaced by
another one, or rewritten from seq 1 (which changes its identity), is reported, and so is an emptied one.

Migration: records written before identities (format 1: {"<database URL>": "SIZE:HASH"}) are read as the
checkpoint of the ledger at that URL and moved under its identity by the next write; so is the entry of a
workspace's own ledger (`sqlite:///<old place>/.ledger/ledger.db`, no longer there) after the workspace was
moved. Ledgers need no migration: every ledger that has an event has an identity already.

`check_chain(ledger, against, record)` walks the chain (`Ledger.verify`), checks the immutability triggers,
then checks the `--against` checkpoint and every recorded one. A checkpoint whose event differs is reported
with the range it bounds: the events after the last checkpoint that still matches, up to it (history
rewritten there, or this is a copy of the ledger that diverged from the original after that seq).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from ledger.guards import Deviation
from ledger.postgres import lift_warnings
from ledger.record import Checkpoint, Identity

if TYPE_CHECKING:
    from ledger.recorder import Ledger

RECORD = ".ledger/checkpoints.json"  # relative to the workspace
DEFAULT_LOCATION = ".ledger/ledger.db"  # the workspace's own SQLite ledger (ledger.default_url)
FORMAT = 2
KEEP = 512  # checkpoints kept per ledger before the older half is thinned (every other one dropped)
AGAINST = "--against"
RECORDED = "this workspace's checkpoint"


@dataclass(frozen=True)
class ChainProblem:
    """One way the ledger is not what it should be: `seq` is the first event concerned (None: the database)."""

    seq: int | None
    reason: str
    checkpoint: Checkpoint | None = None  # the checkpoint it fails
    source: str = ""  # AGAINST or RECORDED
    last_seq: int | None = None  # the end of the range concerned, when it is one

    def describe_checkpoint(self) -> str:
        if self.checkpoint is None:
            return ""
        where = f", in {RECORD}" if self.source == RECORDED else ""
        return f"{self.source} {self.checkpoint.size}:{self.checkpoint.hash[:12]}...{where}"

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "last_seq": self.last_seq, "reason": self.reason, "source": self.source,
                "checkpoint": str(self.checkpoint) if self.checkpoint else None}


@dataclass
class ChainReport:
    checked: int
    head: Checkpoint
    identity: Identity | None
    problems: list[ChainProblem] = field(default_factory=list)
    missing_triggers: tuple[str, ...] = ()
    disabled_triggers: tuple[str, ...] = ()
    altered_triggers: tuple[str, ...] = ()
    extra_triggers: tuple[str, ...] = ()
    schema_deviations: tuple[Deviation, ...] = ()  # the events table's definition where it is not the tool's
    warnings: list[str] = field(default_factory=list)  # not failures: e.g. roles that could lift immutability
    trigger_reason: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems and not (self.missing_triggers or self.disabled_triggers or self.altered_triggers
                                          or self.extra_triggers or self.schema_deviations)

    @property
    def first_bad_seq(self) -> int | None:
        seqs = [p.seq for p in self.problems if p.seq is not None]
        return min(seqs) if seqs else None

    @property
    def reason(self) -> str:
        return self.problems[0].reason if self.problems else (self.trigger_reason or "intact")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "first_bad_seq": self.first_bad_seq, "reason": self.reason, "checked": self.checked,
                "missing_triggers": list(self.missing_triggers), "disabled_triggers": list(self.disabled_triggers),
                "altered_triggers": list(self.altered_triggers), "extra_triggers": list(self.extra_triggers),
                "schema_deviations": [d.to_json() for d in self.schema_deviations],
                "problems": [p.to_json() for p in self.problems], "warnings": list(self.warnings),
                "head": str(self.head), "identity": self.identity.to_json() if self.identity else None}


class CheckpointRecord:
    """`<workspace>/.ledger/checkpoints.json` as seen from one database location."""

    def __init__(self, path: Path, location: str, legacy_key: str) -> None:
        self.path, self.location, self.legacy_key = path, location, legacy_key

    @classmethod
    def for_workspace(cls, workspace: str | os.PathLike, url: str) -> "CheckpointRecord":
        ws = Path(workspace).resolve()
        try:
            parsed = make_url(url)
            legacy_key = parsed.render_as_string(hide_password=True)
        except Exception:  # noqa: BLE001 - an unparsable URL fails when the ledger opens
            return cls(ws / RECORD, url, url)
        location = legacy_key
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            try:
                location = Path(parsed.database).resolve().relative_to(ws).as_posix()
            except ValueError:
                pass  # a file outside the workspace: its URL
        return cls(ws / RECORD, location, legacy_key)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        if data.get("format") != FORMAT:  # format 1: {url: "SIZE:HASH"}
            legacy = {k: v for k, v in data.items() if isinstance(v, str)}
            data = {"format": FORMAT, "ledgers": {}, "locations": {}, "legacy": legacy}
        for key in ("ledgers", "locations", "legacy"):
            data.setdefault(key, {})
        return data

    def checkpoints(self, identity: Identity | None) -> tuple[list[Checkpoint], str | None, list[Checkpoint]]:
        """(this ledger's recorded checkpoints, ascending; the identity recorded at this location when it is not
        `identity`, or None; that other ledger's checkpoints)."""
        data = self._load()
        own = _parse(data["ledgers"].get(identity.genesis, {}).get("checkpoints", [])) if identity else []
        own += _parse([data["legacy"][k] for k in self._adoptable(data["legacy"])])
        there = data["locations"].get(self.location)
        if there and (identity is None or there != identity.genesis):
            return _sorted(own), there, _sorted(_parse(data["ledgers"].get(there, {}).get("checkpoints", [])))
        return _sorted(own), None, []

    def remember(self, identity: Identity | None, checkpoint: Checkpoint) -> bool:
        """Add `checkpoint` of the ledger `identity` if it is larger than every one recorded (a ledger only
        grows); True when the file was written. OSError when it cannot be (a full disk, a read-only copy)."""
        if identity is None or checkpoint.size == 0:
            return False
        data = self._load()
        entry = data["ledgers"].setdefault(identity.genesis, {"first_event_id": identity.event_id, "checkpoints": []})
        adopted = [data["legacy"].pop(k) for k in self._adoptable(data["legacy"])]  # format 1, of this ledger
        known = _sorted(_parse(entry["checkpoints"]) + _parse(adopted))
        changed = bool(adopted) or self.location not in data["locations"]
        data["locations"].setdefault(self.location, identity.genesis)  # the first ledger seen here stays
        if not known or known[-1].size < checkpoint.size:
            known.append(checkpoint)
            changed = True
        if not changed:
            return False
        if len(known) > KEEP:
            half = len(known) // 2
            known = known[:half:2] + known[half:]
        entry["checkpoints"] = [str(c) for c in known]
        if not data["legacy"]:
            data.pop("legacy")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            tmp.replace(self.path)
        finally:
            tmp.unlink(missing_ok=True)
        return True


    def _adoptable(self, legacy: dict[str, Any]) -> list[str]:
        """Format-1 keys that name this ledger: its URL, or, for the workspace's own ledger, the URL of the
        place the workspace was moved from (a `.ledger/ledger.db` file that is no longer there)."""
        keys = [self.legacy_key] if isinstance(legacy.get(self.legacy_key), str) else []
        if self.location == DEFAULT_LOCATION:
            for key, value in legacy.items():
                if key != self.legacy_key and isinstance(value, str) and key.startswith("sqlite:///") \
                        and key.endswith("/" + DEFAULT_LOCATION) and not Path(key[len("sqlite:///"):]).exists():
                    keys.append(key)
        return keys


def _parse(texts) -> list[Checkpoint]:
    out = []
    for text in texts if isinstance(texts, list) else []:
        try:
            out.append(Checkpoint.parse(text))
        except (ValueError, AttributeError):
            continue  # a damaged entry checks nothing
    return out


def _sorted(cps: list[Checkpoint]) -> list[Checkpoint]:
    return sorted(set(cps), key=lambda c: (c.size, c.hash))


def check_chain(ledger: "Ledger", against: Checkpoint | None = None,
                record: CheckpointRecord | None = None) -> ChainReport:
    """The chain walk, the immutability triggers, the `--against` checkpoint and every recorded one."""
    walk = ledger.verify()
    n = walk.checked
    identity = ledger.identity()
    report = ChainReport(checked=n, head=ledger.head(), identity=identity, missing_triggers=walk.missing_triggers,
                         disabled_triggers=walk.disabled_triggers, altered_triggers=walk.altered_triggers,
                         extra_triggers=walk.extra_triggers, schema_deviations=walk.schema_deviations)
    if (walk.missing_triggers or walk.disabled_triggers or walk.altered_triggers or walk.extra_triggers
            or walk.schema_deviations):
        report.trigger_reason = walk.reason
    if ledger.dialect == "postgresql":
        report.warnings += lift_warnings(ledger.engine)
    if walk.first_bad_seq is not None:  # the chain itself is broken there: nothing past it can be compared
        report.problems.append(ChainProblem(walk.first_bad_seq, walk.reason))
        return report
    own, other_genesis, other = record.checkpoints(identity) if record else ([], None, [])
    if other_genesis is not None and identity is not None:
        report.problems.append(ChainProblem(
            1, f"this is not the ledger this workspace recorded at {record.location} (its first event's hash is "
               f"{identity.genesis[:12]}..., the recorded ledger's {other_genesis[:12]}...): replaced, or rewritten "
               "from seq 1", other[-1] if other else None, RECORDED))
    elif other_genesis is not None:
        own = _sorted(own + other)  # an emptied ledger where this workspace recorded events
    checks = [(cp, RECORDED) for cp in own] + ([(against, AGAINST)] if against is not None and against.size else [])
    hashes = ledger.hashes_at(cp.size for cp, _ in checks if cp.size <= n)
    matching = sorted(cp.size for cp, _ in checks if cp.size <= n and hashes.get(cp.size) == cp.hash)
    for source in (RECORDED, AGAINST):
        for cp, _ in sorted((c for c in checks if c[1] == source), key=lambda c: c[0].size):
            if cp.size > n:
                report.problems.append(ChainProblem(
                    n + 1, f"ledger holds {n} events, checkpoint says {cp.size}: truncated", cp, source, cp.size))
                break
            if hashes.get(cp.size) != cp.hash:
                k = max((s for s in matching if s < cp.size), default=0)
                copy = f", or this is a copy of the ledger that diverged from the original after seq {k}" if k else ""
                report.problems.append(ChainProblem(
                    k + 1, f"event {cp.size} differs from the checkpoint: history rewritten in seq {k + 1}..{cp.size}"
                           f"{copy}", cp, source, cp.size))
                break
    return report
