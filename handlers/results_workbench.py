"""What the workbench verbs return as JSON, one producer (`*_json`) and one JSON Schema (`SCHEMAS[verb]`) per
result, as `handlers.results` has them for the deployment verbs (its docstring says why: the CLI's `--json` and
the MCP tool's structured result are the same value): `quantize`, `scaffold`, `doctor`, `perf import-history` /
`export-history`, `log`, `head`, `graph`, `reverify`. Producers are pure functions of what the handlers return.

Imports: handlers.results (the schema helpers).
"""

from __future__ import annotations

import json
from typing import Any

from handlers.results import ANY_OBJECT, BOOL, INT, STR, arr, maybe, obj


def quantize_json(written: dict) -> dict[str, Any]:
    """`ledger quantize FOLDER --to q4nx OUT --json`: the bundle written (handlers.workbench.quantize_folder)."""
    return dict(written)


def scaffold_json(out: dict) -> dict[str, Any]:
    """`ledger scaffold NAME --json`: the model directory and the files written / kept (the engineer's)."""
    return {"dir": str(out["dir"]), "written": list(out["written"]), "kept": list(out["kept"])}


def doctor_json(report: dict) -> dict[str, Any]:
    """`ledger doctor [DIR] --json`: handlers.workbench.doctor_report."""
    return dict(report)


def import_history_json(out: dict) -> dict[str, Any]:
    """`ledger perf import-history FILE --json`: lines read, events added, lines per series."""
    return dict(out)


def export_history_json(lines: list[str]) -> list[dict[str, Any]]:
    """`ledger perf export-history --json`: the nightly lines as one array of rows."""
    return [json.loads(x) for x in lines]


def log_json(events) -> list[dict[str, Any]]:
    """`ledger log --json`: the events in global order."""
    return [e.to_json() for e in events]


def head_json(checkpoint, identity) -> dict[str, Any]:
    """`ledger head --json`: the checkpoint SIZE:HASH and the ledger's identity."""
    return {"size": checkpoint.size, "hash": checkpoint.hash, "identity": identity.to_json() if identity else None}


def graph_json(mermaid: str) -> dict[str, Any]:
    """`ledger graph --json`: the lifecycle as Mermaid text."""
    return {"mermaid": mermaid}


def reverify_json(results) -> list[dict[str, Any]]:
    """`ledger reverify --all --json`: one row per deployed model (handlers.reverify.Reverified)."""
    return [r.to_json() for r in results]


_FINDING = obj({"file": STR, "what": STR, "kind": STR, "at": STR, "status": STR, "absent": arr(STR),
                "read": maybe(STR), "fails": BOOL, "twin_copy": maybe(STR)})
_EVENT = obj({"seq": INT, "stream_id": STR, "type": STR, "payload": ANY_OBJECT})
SCHEMAS: dict[str, dict] = {
    "quantize": obj({"path": STR, "format": STR, "layout": STR, "sha256": STR, "padded": arr(STR)}),
    "scaffold": obj({"dir": STR, "written": arr(STR), "kept": arr(STR)}),
    "doctor": obj({"checkout": STR, "commit": maybe(STR), "contract_version": INT, "contract_commit": STR,
                   "twin": BOOL, "clean": BOOL, "toolchain": ANY_OBJECT, "toolchain_refusal": maybe(STR),
                   "toolchain_warning": maybe(STR), "findings": arr(_FINDING)}),
    "perf_import_history": obj({"file": STR, "read": INT, "added": INT, "series": ANY_OBJECT}),
    "perf_export_history": arr(ANY_OBJECT),
    "log": arr(_EVENT),
    "head": obj({"size": INT, "hash": STR, "identity": maybe(ANY_OBJECT)}),
    "graph": obj({"mermaid": STR}),
    "reverify": arr(obj({"name": STR, "verdict": STR, "status": STR, "regressions": arr(STR)})),
}
