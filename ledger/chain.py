"""The check of a hash chain (promise 5 of `ledger.recorder`): pure functions over stored rows.

`walk_chain` walks rows in seq order and names the first whose position, link or hash is wrong (the hash is
`ledger.canonical.chain_hash`); `judge_chain` judges a whole walk against a checkpoint and the immutability
triggers. `Ledger.verify` is their one caller; `ledger.checkpoints.check_chain` builds on `verify`.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ledger.canonical import GENESIS_HASH, chain_hash, utc_timestamp
from ledger.guards import TriggerState
from ledger.record import Checkpoint, VerifyResult


def walk_chain(chunks: Iterable[Sequence[tuple]],
               checkpoint_seq: int = -1) -> tuple[VerifyResult | None, int, str | None]:
    """(the first failure or None, the number of rows walked, the hash of the row at `checkpoint_seq`).

    `chunks` yields rows of (seq, stream_id, version, event_id, type, payload, recorded_at, prev_hash, hash)
    in seq order; the walk stops at the first row that is out of place, does not link to the one before, or
    whose contents do not hash to its hash."""
    prev, expect_seq = GENESIS_HASH, 1
    checkpoint_hash = None
    link = chain_hash
    for rows in chunks:
        for seq, stream_id, version, event_id, type_, payload, recorded_at, prev_hash, digest in rows:
            if seq != expect_seq:
                return (VerifyResult(False, expect_seq, f"seq {expect_seq} is missing (found {seq} next)",
                                     expect_seq - 1), expect_seq - 1, checkpoint_hash)
            if prev_hash != prev:
                return (VerifyResult(False, seq, "prev_hash does not link to the previous event", seq - 1),
                        seq - 1, checkpoint_hash)
            if link(prev, seq, stream_id, version, event_id, type_, payload, recorded_at) != digest:
                return (VerifyResult(False, seq, "hash does not match the row's contents (row edited)", seq - 1),
                        seq - 1, checkpoint_hash)
            if seq == checkpoint_seq:
                checkpoint_hash = digest
            prev = digest
            expect_seq += 1
    return None, expect_seq - 1, checkpoint_hash


def judge_chain(n: int, checkpoint_hash: str | None, against: Checkpoint | None, guards: TriggerState) -> VerifyResult:
    """The verdict on an intact walk of `n` rows: truncated or rewritten since `against` (whose row hashed to
    `checkpoint_hash`), or an immutability trigger missing, disabled, altered or extra, or the events table's
    definition not the tool's (`guards`); else intact."""
    named = dict(missing_triggers=guards.missing, disabled_triggers=guards.disabled,
                 altered_triggers=guards.altered, extra_triggers=guards.extra, schema_deviations=guards.definition)
    if against is not None and against.size > 0:
        if n < against.size:
            return VerifyResult(False, n + 1, f"ledger holds {n} events, checkpoint says {against.size}: truncated",
                                n, **named)
        if checkpoint_hash != against.hash:
            return VerifyResult(
                False, against.size, f"event {against.size} differs from the checkpoint: history rewritten", n, **named)
    if not guards.ok:
        return VerifyResult(False, None, guards.reason(), n, **named)
    return VerifyResult(True, None, "intact", n)


def chain_batch(stream_id: str, expected_version: int, last_seq: int, last_hash: str,
                encoded: Sequence[tuple[str, str, str]]) -> list[tuple]:
    """The rows (in ledger.schema.COLS order) that append `encoded` ((event_id, type, payload) from
    `ledger.record.encode_batch`) to `stream_id` at `expected_version`, after the row `last_seq` whose hash is
    `last_hash`: consecutive seqs and versions, one timestamp, each row's hash linked to the one before."""
    now = utc_timestamp()
    rows, seq, prev = [], last_seq, last_hash
    for version, (eid, type_, payload) in enumerate(encoded, start=expected_version + 1):
        seq += 1
        digest = chain_hash(prev, seq, stream_id, version, eid, type_, payload, now)
        rows.append((seq, stream_id, version, eid, type_, payload, now, prev, digest))
        prev = digest
    return rows
