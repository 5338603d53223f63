"""What the workbench verbs return as JSON, one producer (`*_json`) and one JSON Schema (`SCHEMAS[verb]`) per
result, as `handlers.results` has them for the deployment verbs (its docstring says why: the CLI's `--json` and
the MCP tool's structured result are the same value): `quantize`, `scaffold`, `doctor`, `perf import-history` /
`export-history`, `log`, `head`, `graph`, `reverify`, `twin`, `run`, `optimise`, `registry import` / `build`. Producers are pure functions of what the handlers return.

Imports: handlers.results (the schema helpers).
"""

from __future__ import annotations

import json
from typing import Any

from handlers.results import ANY_OBJECT, BOOL, INT, NUM, STR, arr, maybe, obj


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


def twin_json(root) -> dict[str, Any]:
    """`ledger twin DIR --json`: the stand-in checkout written and the variable that points at it."""
    return {"dir": str(root), "export": f"MLIR_AIR_DIR={root}"}


def run_json(out: dict) -> dict[str, Any]:
    """`ledger run NAME --json`: the text generated and the run's figures (handlers.runs.generate)."""
    return {k: v for k, v in out.items() if k != "n_prompt_tokens"}


def optimise_json(out: dict) -> dict[str, Any]:
    """`ledger optimise NAME --json`: the OptimizationTried recorded (handlers.runs.optimise)."""
    return dict(out)


def registry_import_json(accounts) -> list[dict[str, Any]]:
    """`ledger registry import DIR --json`: one account per table read (rows read, imported, duplicate, skipped)."""
    return [a.as_json() for a in accounts]


def registry_build_json(result, check: bool) -> dict[str, Any]:
    """`ledger registry build [--check] --json`: the projected files written, or (check) those that differ."""
    return {"check": check, "clean": result.clean, "total": result.total, "written": list(result.written),
            "differing": list(result.differing), "missing": list(result.missing), "stray": list(result.stray),
            "clashes": [str(c) for c in result.clashes], "links": [str(x) for x in result.links]}


def registry_merge_json(added: dict[str, int]) -> dict[str, Any]:
    """`ledger registry build --into-mlir-air CHECKOUT --json`: rows added per file of the checkout."""
    return {"added": dict(sorted(added.items())), "rows": sum(added.values())}


_FINDING = obj({"file": STR, "what": STR, "kind": STR, "at": STR, "status": STR, "absent": arr(STR),
                "read": maybe(STR), "fails": BOOL, "twin_copy": maybe(STR), "since": maybe(STR)})
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
    "twin": obj({"dir": STR, "export": STR}),
    "run": obj({"text": STR, "source": STR, "tokens": arr(INT), "ttft_s": NUM, "tokens_per_s": NUM}),
    "optimise": obj({"name": STR, "phase": INT, "optimisation": STR, "outcome": STR, "gate_passed": BOOL}),
    "registry_import": arr(ANY_OBJECT),
    "registry_build": {"anyOf": [obj({"check": BOOL, "clean": BOOL, "total": INT, "written": arr(STR)}),
                                 obj({"added": ANY_OBJECT, "rows": INT})]},
    "reverify": arr(obj({"name": STR, "verdict": STR, "status": STR, "regressions": arr(STR)})),
}
