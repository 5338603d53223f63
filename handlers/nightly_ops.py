"""`ledger perf import-history FILE` / `export-history`: mlir-air's nightly perf history into and out of the ledger.

`import_history(ledger, path)` reads every line of one of the nightly's ndjson files (registry.nightly_history's
schemas), refuses the whole file at its first line that is not a row, claims to be this tool's own figure, carries an
implausible figure, or gives a second figure for a (run id, model, context) of the file or the ledger (`BadLine`:
nothing appended), and appends
one `NightlyPerfImported` per line new to the ledger (UUID5 ids of series and row: a second import adds nothing).
`export_history(events, series)` gives the ndjson text of one series: imported rows verbatim and the ledger's own
Phase 6 / reverify figures measured on NPU2, each line as append_history.py writes it; with `modelled`, also the
modelled / emulator / rehearsal figures, each line's model naming its class.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Sequence

from handlers.inputs import InputError, read_input
from ledger.events import NewEvent, NightlyPerfImported
from ledger.record import RecordedEvent
from registry.model_docs import model_dir_name
from registry.nightly_history import (FILES, NIGHTLY_STREAM, BadLine, export_rows, figure_key, figures_of, line_text,
                                      parse_lines)

_NAMESPACE = uuid.UUID("6f0d4f5e-7a51-4b0e-9d55-2a1c3b7e9a10")  # npu-ledger's nightly-row ids

__all__ = ["BadLine", "FILES", "export_history", "import_history"]


def _event_id(series: str, row: dict) -> str:
    return str(uuid.uuid5(_NAMESPACE, series + "\n" + json.dumps(row, sort_keys=True)))


def import_history(ledger, path: str | Path) -> dict:
    """{"file", "read", "added", "series": {series: lines}}; `BadLine` (nothing appended) on a line that is not a row."""
    path = Path(path)
    try:
        data = read_input(path, "history")  # a regular file under its cap (handlers.inputs)
        text = data.decode("utf-8")
    except InputError as e:
        raise BadLine(str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadLine(f"{path.name}: cannot be read ({e.__class__.__name__}: {e})") from None
    held = ledger.read_stream(NIGHTLY_STREAM)
    known = {figure_key(e.payload["series"], e.payload["row"]): (f"seq {e.seq}", figures_of(e.payload["row"]))
             for e in held if isinstance(e.payload.get("row"), dict)}
    rows = parse_lines(text, path.name, known)
    sha = hashlib.sha256(data).hexdigest()
    existing = {e.event_id for e in held}
    new, counts = [], {}
    for line, series, row in rows:
        counts[series] = counts.get(series, 0) + 1
        event_id = _event_id(series, row)
        if event_id not in existing:
            existing.add(event_id)
            new.append(NewEvent(NightlyPerfImported(series=series, row=row, file=path.name, line=line,
                                                    file_sha256=sha), event_id=event_id))
    if new:
        ledger.append(NIGHTLY_STREAM, ledger.stream_version(NIGHTLY_STREAM), new)
    return {"file": path.name, "read": len(rows), "added": len(new), "series": counts}


def export_history(events: Sequence[RecordedEvent], series: str, model: str | None = None,
                   modelled: bool = False, skipped: list[str] | None = None) -> list[str]:
    """The ndjson lines of `series` (history, sweep, prefill_sweep), optionally of one mlir-air model name only
    (a modelled line's name carries its class: `model` matches the name before it); the ledger's own figures only
    where measured on NPU2 unless `modelled`, and then each other figure's model says what it is
    (registry.nightly_history.model_label). A record whose figures cannot be lines is left out, and why appended
    to `skipped` when given."""
    return [line_text(s, row) for _, s, row in export_rows(events, model_dir_name, modelled, skipped)
            if s == series and (model is None or row.get("model") == model
                                or str(row.get("model", "")).startswith(model + " ("))]
