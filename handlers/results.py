"""What each verb returns as JSON: one producer (`*_json`) and one JSON Schema (`SCHEMAS[verb]`) per result.

The CLI's `--json` prints what the producer returns; the MCP server (`handlers.mcp`) returns the same value
as a tool's structured result and advertises `SCHEMAS[verb]` as its output schema (wrapped, where the value is
a JSON array, by `handlers.mcp.schemas.output_schema`: MCP results are objects). So the two cannot drift: a
field added here appears in both, and `tests/e2e/test_mcp_server.py` has the SDK's client validate every
result against its schema. Producers are pure functions of what the handlers return; they read nothing.

Numbers are typed `number` or `null`: JSON has no NaN or infinity (a kernel with NaN outputs reports
`mean_rel_L1` NaN); the CLI prints Python's `NaN`, MCP carries `null` (`json_safe`).

Imports: the handlers' result types, `ledger`, `npu_kernels`, `registry` (never `handlers.cli` or `handlers.mcp`).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import TypeAdapter

from handlers.triage import Match
from npu_kernels.numerics.run import KernelResult
from npu_kernels.backends.kernel_runners import figure_class
from npu_kernels.provenance import IMPORTED_NIGHTLY, IMPORTED_README, MODELLED_NPU2
from ledger.events import KernelVerified, LayerDiagnosed, TokenGateChecked

STR: dict = {"type": "string"}
INT: dict = {"type": "integer"}
NUM: dict = {"type": ["number", "null"]}
BOOL: dict = {"type": "boolean"}
ANY_OBJECT: dict = {"type": "object"}


def obj(properties: dict[str, dict], optional: tuple[str, ...] = ()) -> dict:
    """An object schema: every property required except `optional`; other keys allowed."""
    return {"type": "object", "properties": properties, "required": [k for k in properties if k not in optional]}


def arr(items: dict) -> dict:
    return {"type": "array", "items": items}


def maybe(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


def lenient_numbers(schema: Any) -> Any:
    """`schema` with every `"type": "number"` widened to number-or-null (see the module docstring)."""
    if isinstance(schema, dict):
        out = {k: lenient_numbers(v) for k, v in schema.items()}
        if out.get("type") == "number":
            out["type"] = ["number", "null"]
        return out
    if isinstance(schema, list):
        return [lenient_numbers(v) for v in schema]
    return schema


def model_schema(model) -> dict:
    """The JSON Schema of a pydantic model or dataclass (what its payload / `asdict` holds)."""
    return lenient_numbers(TypeAdapter(model).json_schema())


def json_safe(value: Any) -> Any:
    """`value` as strict JSON can carry it: non-finite floats become None, tuples lists, other objects text
    (what the CLI's `json.dumps(..., default=str)` prints for them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


# --- deployments: status, history, init, advance, resume, lesson, audit ------------------------------------

STATUS_ROW = obj({
    "name": STR, "status": STR, "next_phase": maybe(INT), "phases_passed": arr(INT), "executor": STR,
    "target": STR, "last_verdict": STR,
    "blockers": arr(obj({"seq": INT, "phase": INT, "reason": STR})),
    "triage": maybe(obj({"subject_seq": INT, "summary": STR, "matches": arr(ANY_OBJECT)})),
    "evaluation": maybe(STR), "version": maybe(INT),
    # the last attempt that gave no verdict (PhaseInconclusive): its phase, attempt, tries and reasons, and how many
    # of its phase's attempts in a row were inconclusive; absent when none was
    "inconclusive": obj({"seq": INT, "phase": INT, "attempt": INT, "tries": INT, "in_a_row": INT, "limit": INT,
                         "reasons": arr(STR)}),
    "error": STR,  # only on an unreplayable stream
}, optional=("error", "inconclusive"))


def status_json(rows: list[dict[str, Any]], name: str | None) -> dict[str, Any] | list[dict[str, Any]]:
    """`ledger status [NAME] --json`: every deployment's row (`handlers.deploy.status`), or NAME's alone."""
    return rows if name is None else rows[0]


HISTORY = arr(obj({"seq": INT, "version": INT, "at": STR, "type": STR, "payload": ANY_OBJECT}))


def history_json(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`ledger history NAME --json`: the stream's events (`handlers.deploy.history`), oldest first."""
    return rows


INIT = obj({"name": STR, "executor": STR, "target": STR, "dtype": STR})


def init_json(name: str, executor: str, target: str, dtype: str) -> dict[str, Any]:
    """`ledger init MODEL --json`: the deployment recorded (its next step is `advance`)."""
    return {"name": name, "executor": executor, "target": target, "dtype": dtype}


RAN = obj({"phase": INT, "attempt": INT, "passed": BOOL, "summary": STR, "reasons": arr(STR), "blocked": BOOL,
           "inconclusive": BOOL, "tries": INT},
          optional=("summary", "reasons", "blocked", "inconclusive", "tries"))
ADVANCE = obj({"name": STR, "ran": arr(RAN), "stopped": STR, "status": STR})


def advance_json(report) -> dict[str, Any]:
    """`ledger advance NAME --json`: each gate run (`handlers.deploy.AdvanceReport`) and where it stopped."""
    return {"name": report.name, "ran": report.ran, "stopped": report.stopped, "status": report.status}


RESUME = obj({"name": STR, "status": STR})


def resume_json(name: str, status: str) -> dict[str, Any]:
    """`ledger resume NAME --note ... --json`: the status the deployment resumed to."""
    return {"name": name, "status": status}


LESSON = obj({"name": STR, "seq": INT})


def lesson_json(name: str, seq: int) -> dict[str, Any]:
    """`ledger lesson NAME TEXT --json`: where the lesson was recorded."""
    return {"name": name, "seq": seq}


FINDING = obj({"severity": STR, "seq": maybe(INT), "check": STR, "message": STR})
AUDIT = obj({"name": STR, "verdict": STR, "findings": arr(FINDING), "remeasured": ANY_OBJECT, "status": STR,
             "recorded": BOOL})


def audit_json(name: str, report) -> dict[str, Any]:
    """`ledger audit NAME --json`: the independent evaluation (`handlers.deploy.AuditReport`)."""
    return {"name": name, "verdict": report.verdict, "findings": report.findings, "remeasured": report.remeasured,
            "status": report.status, "recorded": report.recorded}


# --- measurements: plan, predict, kernel run, verify-model, diagnose, record harness ------------------------

PLAN = arr(obj({"kernel": STR, "shape": ANY_OBJECT, "role": STR, "phase": STR, "contract": STR, "method": STR,
                "tier": STR, "tile": ANY_OBJECT, "warnings": arr(STR), "workarounds": ANY_OBJECT,
                "source": STR}))


def plan_json(rows) -> list[dict[str, Any]]:
    """`ledger plan NAME|CONFIG --json`: the (kernel, shape, role) rows with their tiles and contracts."""
    return [r.to_json() for r in rows]


_FIGURES = {"type": "object", "additionalProperties": {"type": "object"}}
PREDICT = obj({
    "ttft_s": NUM, "decode_tokens_per_s": NUM, "ms_per_token": NUM, "prefill_calls_per_layer": INT,
    "decode_calls_per_layer": INT, "seq": INT, "ctx": INT, "switches": {"type": "object"}, "modelled": BOOL,
    "notes": arr(STR), "memory": ANY_OBJECT, "source": STR, "provenance": STR,
    "breakdown": obj({"per_elf": _FIGURES, "per_kernel": _FIGURES, "host": _FIGURES, "totals": _FIGURES}),
    "calibration": obj({"name": {"type": ["string", "null"]}, "machine": STR}),
}, optional=("calibration",))


def predict_json(prediction, weights: str = "bf16", measured: dict | None = None,
                 calibration: dict | None = None) -> dict[str, Any]:
    """`ledger predict CONFIG|NAME --json`: modelled TTFT, decode rate and the per-ELF / kernel breakdown, the weight
    storage it models (`--weights`), and the 4-bit README's own figures beside it when one matches (`measured`)."""
    d = prediction.to_dict()
    out = {k: d[k] for k in ("ttft_s", "decode_tokens_per_s", "ms_per_token", "prefill_calls_per_layer",
                             "decode_calls_per_layer", "seq", "ctx", "switches", "modelled", "notes", "memory")}
    out["source"] = "modelled NPU2"
    out["provenance"] = MODELLED_NPU2
    out["breakdown"] = {k: d[k] for k in ("per_elf", "per_kernel", "host", "totals")}
    out["weights"] = weights
    if measured is not None:
        out["measured"] = {"source": "measured NPU2", "provenance": IMPORTED_README, "role": measured["role"],
                           "ttft_s": measured.get("ttft_s"),  # None: the README states a decode rate only
                           "decode_tokens_per_s": measured["decode_tok_s"], "src": measured["src"],
                           "conditions": measured["conditions"]}
        if "nightly_decode_tok_s" in measured:  # the nightly decode sweep's figure at context 2048
            out["measured"]["nightly_decode_tokens_per_s"] = measured["nightly_decode_tok_s"]
            out["measured"]["nightly_src"] = measured["nightly_src"]
            out["measured"]["nightly_provenance"] = IMPORTED_NIGHTLY
    if calibration is not None:  # handlers.predicting: the machine the figures are for (`ledger perf calibrate`)
        out["calibration"] = calibration
    return out


CALIBRATE = obj({"seq": INT, "name": STR, "devices": arr(STR), "scales": ANY_OBJECT, "scale_errors": ANY_OBJECT,
                 "constants": ANY_OBJECT, "fixed": arr(STR), "error_bars": ANY_OBJECT, "rows": arr(ANY_OBJECT),
                 "method": STR, "left_out": arr(ANY_OBJECT)})


def calibrate_json(recorded: dict[str, Any]) -> dict[str, Any]:
    """`ledger perf calibrate --json`: the PerformanceCalibrated recorded (handlers.calibrate.calibrate), its seq."""
    return {k: recorded[k] for k in CALIBRATE["properties"]}


CURVE = obj({"prefill": ANY_OBJECT, "decode": ANY_OBJECT, "label": STR, "source": STR, "switches": ANY_OBJECT,
             "notes": arr(STR), "png": STR}, optional=("label", "source", "switches", "notes"))


def curve_json(curve: dict[str, Any], png: str) -> dict[str, Any]:
    """`ledger predict CONFIG|NAME --curve --json`: both curves (npu_kernels.perf.curve.npu2_curve) and the PNG's path."""
    return {**curve, "png": png}


KERNEL_RUN = model_schema(KernelResult)


def kernel_run_json(result: KernelResult) -> dict[str, Any]:
    """`ledger kernel run KERNEL --json`: the judged kernel run (every `KernelResult` field) and where its figures
    come from (`provenance_class`, npu_kernels.provenance: the CPU emulator, or what the mlir-air checkout and machine
    say)."""
    return {**result.to_json(), "provenance_class": result.provenance_class or figure_class(result.executor)}


VERIFY_MODEL = obj({"passed": BOOL, "drill": maybe(STR), "caught": maybe(INT),
                    "prompts": arr(model_schema(TokenGateChecked))})


def verify_model_json(gates: list[TokenGateChecked], inject: str | None) -> dict[str, Any]:
    """`ledger verify-model NAME --json`: the token gate per prompt; for a drill, how many prompts caught it."""
    caught = sum(1 for g in gates if not g.passed)
    return {"passed": all(g.passed for g in gates), "drill": inject, "caught": caught if inject else None,
            "prompts": [g.to_payload() for g in gates]}


DIAGNOSE = arr(model_schema(LayerDiagnosed))


def diagnose_json(layers: list[LayerDiagnosed]) -> list[dict[str, Any]]:
    """`ledger diagnose NAME --json`: per-layer cosines of the pipeline vs HF bf16."""
    return [x.to_payload() for x in layers]


RECORD_HARNESS = obj({"seq": INT, "kernel": STR, "shape": ANY_OBJECT, "contract": STR, "verdict": STR,
                      "output_sha256": STR, "provenance_class": STR})


def record_harness_json(seq: int, event: KernelVerified) -> dict[str, Any]:
    """`ledger record harness ... --json`: the KernelVerified(source=harness) recorded from the transcript."""
    return {"seq": seq, "kernel": event.kernel, "shape": event.shape, "contract": event.contract,
            "verdict": event.verdict, "output_sha256": event.provenance["output_sha256"],
            "provenance_class": event.provenance_class}


# --- triage, the registry, the chain -------------------------------------------------------------------------

TRIAGE = arr(obj({"rule_id": STR, "source": STR, "title": STR, "root_cause": STR, "check": STR, "remedy": STR,
                  "known_limit": BOOL, "confidence": NUM, "matched_lines": arr(STR), "matched_facts": arr(STR)}))


def triage_json(matches: list[Match]) -> list[dict[str, Any]]:
    """`ledger triage FILE --json`: the playbook rules that match, best first ([] when none does)."""
    return [m.to_json() for m in matches]


GEMM_CONFIG = obj({"method": STR, "tile": ANY_OBJECT, "gflops": NUM, "mean_rel_L1": NUM, "herd": arr(INT)},
                  optional=("herd",))
REGISTRY_ROW = obj({
    "kernel": STR, "page": STR, "shape": ANY_OBJECT, "status": STR, "caveats": arr(STR), "used_by": arr(STR),
    "contracts": arr(STR), "methods": arr(STR), "measured": {}, "best": maybe(ANY_OBJECT),
    "not_npu2": maybe(ANY_OBJECT),
})
REGISTRY_LOOKUP = {"anyOf": [GEMM_CONFIG, arr(REGISTRY_ROW)]}


def registry_row_json(r) -> dict[str, Any]:
    """One registry row (`registry.lookup.kernel_rows`) as `ledger registry lookup KERNEL k=v --json` prints it."""
    b = r.best
    return {
        "kernel": r.spec.kernel, "page": r.spec.page, "shape": dict(r.shape), "status": r.status,
        "caveats": list(r.caveats), "used_by": list(r.used_by), "contracts": list(r.contracts),
        "methods": list(r.methods), "measured": r.measured,
        # `best` is an NPU2 row only (npu_kernels.provenance); a shape with rehearsal / emulated evidence alone names
        # that row under `not_npu2`, with its provenance and without its throughput
        "best": None if b is None or not b.on_hardware else {
            "method": b.method, "evidence": b.evidence, "provenance": b.provenance_class, "contract": b.contract,
            "tile": b.tile, "throughput": b.throughput, "unit": r.spec.unit, "mean_rel_L1": b.mean_rel_L1,
            "max_abs": b.max_abs, "seq": b.seq,
        },
        "not_npu2": None if b is None or b.on_hardware else {
            "method": b.method, "evidence": b.evidence, "provenance": b.provenance_class, "contract": b.contract,
            "tile": b.tile, "mean_rel_L1": b.mean_rel_L1, "seq": b.seq,
        },
    }


def registry_lookup_json(kind: str, found) -> dict[str, Any] | list[dict[str, Any]]:
    """`ledger registry lookup --json`: the best measured config (kind "best", `registry.lookup.gemm_config`'s
    answer as it is), or the matching registry rows (kind "rows")."""
    return found if kind == "best" else [registry_row_json(r) for r in found]


VERIFY = obj({
    "ok": BOOL, "first_bad_seq": maybe(INT), "reason": STR, "checked": INT, "missing_triggers": arr(STR),
    "disabled_triggers": arr(STR), "altered_triggers": arr(STR), "extra_triggers": arr(STR),
    "schema_deviations": arr(obj({"object": STR, "problem": STR, "found": STR, "installed": STR})),
    "problems": arr(ANY_OBJECT), "warnings": arr(STR), "head": STR,
    "identity": maybe(ANY_OBJECT), "checkpoint_kept": BOOL,
})


def verify_json(report, warning: str | None) -> dict[str, Any]:
    """`ledger verify --json`: the chain check (`ledger.checkpoints.ChainReport`) and whether its head was kept."""
    return {**report.to_json(), "checkpoint_kept": report.ok and warning is None}


SCHEMAS: dict[str, dict] = {
    "status": {"anyOf": [STATUS_ROW, arr(STATUS_ROW)]}, "history": HISTORY, "init": INIT, "advance": ADVANCE,
    "resume": RESUME, "lesson": LESSON, "audit": AUDIT, "plan": PLAN, "predict": {"anyOf": [PREDICT, CURVE]}, "perf_calibrate": CALIBRATE,
    "kernel_run": KERNEL_RUN, "verify_model": VERIFY_MODEL, "diagnose": DIAGNOSE,
    "record_harness": RECORD_HARNESS, "triage": TRIAGE, "registry_lookup": REGISTRY_LOOKUP, "verify": VERIFY,
}
