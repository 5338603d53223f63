"""The unit of work: load a deployment's stream, fold it, append with the version it was folded at.

Every command that changes a deployment goes through `DeploymentUnit`. `commit(events)` appends with
`expected_version` = the version this unit last saw; if someone else appended in between, nothing is
written and `SomeoneElseAdvanced` says so. After a commit the unit folds the new events in memory, as the
append stored them (`Ledger.append_recorded`: the rows it chained and checked before its commit; nothing is
read back), so a handler always decides on the state the ledger actually holds.

Each record the unit folds, read or appended, also grows the view its deployment's docs are rendered from
(`registry.model_fold.DeploymentFold`): `view()` hands that to the post-commit step (`handlers.verbs.post_commit`),
so the docs of the deployment a command changed are rendered without folding its stream a second time.
"""

from __future__ import annotations

from typing import Iterable

from ledger import ConcurrencyError, Ledger, NewEvent
from ledger.events import Event
from ledger.record import RecordedEvent
from statemachine.fold import apply
from statemachine.state import DeploymentState
from ledger.streams import DEPLOYMENT_PREFIX, deployment_stream, deployment_name
from registry.model_fold import DeploymentFold, DeploymentView
from registry.names import normalised


class DeploymentError(Exception):
    """Raised when a command cannot be applied to a deployment (unknown, rejected, blocked, ...)."""


class SomeoneElseAdvanced(DeploymentError):
    """Raised when another process appended to the deployment's stream since this unit read it."""


def stream_id(name: str) -> str:
    return deployment_stream(name)


def existing_name(ledger: Ledger, name: str) -> str:
    """The deployment `name` means: itself when a stream holds it (an older ledger may hold a name that is not
    NFC), else its NFC form, the form `init` records (registry.names.normalised)."""
    nfc = normalised(name)
    if nfc == name or ledger.stream_version(stream_id(name)):
        return name
    return nfc


class DeploymentUnit:
    def __init__(self, ledger: Ledger, name: str, *, must_exist: bool = True) -> None:
        self.ledger = ledger
        name = existing_name(ledger, name)
        self.name = name
        self.stream_id = stream_id(name)
        self.events = ledger.read_stream(self.stream_id)
        if must_exist and not self.events:
            known = [deployment_name(s) for s in ledger.streams(DEPLOYMENT_PREFIX)]
            hint = f" (known: {', '.join(known)})" if known else " (run `ledger init MODEL` first)"
            raise DeploymentError(f"no deployment named {name!r}{hint}")
        self.state: DeploymentState | None = None
        self.docs = DeploymentFold(name)  # the docs' view, grown with the state by the same records
        self._fold(self.events)  # the stream folded once, into both

    @property
    def version(self) -> int:
        return self.events[-1].version if self.events else 0

    def commit(self, events: Iterable[Event | NewEvent]) -> list[int]:
        """Append `events` atomically at this unit's version; return their seqs and fold them in."""
        batch = list(events)
        if not batch:
            return []
        try:
            seqs, new = self.ledger.append_recorded(self.stream_id, self.version, batch)
        except ConcurrencyError as e:
            raise SomeoneElseAdvanced(f"someone else advanced {self.name} meanwhile; nothing was written") from e
        if new is None:  # an idempotent retry: the batch was recorded earlier, so its records are read
            new = self.ledger.read_stream(self.stream_id, after_version=self.version)
        self._fold(new)
        self.events.extend(new)
        return seqs

    def _fold(self, records: list[RecordedEvent]) -> None:
        """Fold `records` (the stream's next ones) into the state and the docs' view, each record applied once to
        each; a record the state machine refuses (statemachine.fold.FoldError) leaves both as they were."""
        state = self.state
        for rec in records:
            state = apply(state, rec)
        for rec in records:
            self.docs.add(rec)
        self.state = state

    def view(self) -> DeploymentView:
        """The deployment's docs' view as of the unit's last record (what the post-commit step renders from)."""
        return self.docs.view()
