"""The MCP tools' input schemas, and their output schemas derived from `handlers.results.SCHEMAS`.

Inputs are the CLI's arguments as typed JSON (a shape is an object, not `M=..,K=..` text, except for
`record_harness`, whose `--shape` is validated by `handlers.record` as the CLI's is); `additionalProperties`
is false, so a misspelt argument is refused instead of ignored; `default`s are filled in by `with_defaults`.
Outputs: MCP requires a tool's structured result to be an object, so a result that is a JSON array on the
CLI (`history`, `plan`, `diagnose`, `triage`, ...) travels as `{"items": [...]}` (`output_schema`,
`structured`); the text content of every result is the CLI's JSON value, unwrapped.

Imports: handlers.results, kernels (executor names), npu_kernels.model.options (the drill faults).
"""

from __future__ import annotations

from typing import Any

from handlers.results import SCHEMAS, json_safe
from handlers.results_workbench import SCHEMAS as WORKBENCH_SCHEMAS
from handlers.verbs import VERBS, input_schema

NAME = {"type": "string", "minLength": 1, "description": "deployment name (`ledger status` lists them)"}
TEXT = {"type": "string", "minLength": 1}
TARGET = {"type": "string", "enum": ["npu2", "npu1"]}
DIMS = {"type": "object", "additionalProperties": {"type": ["integer", "boolean"]},
        "description": "named sizes, e.g. {\"M\": 2048, \"K\": 2048, \"N\": 2048}"}


def _inputs(properties: dict[str, dict], required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _int(low: int, high: int, **extra) -> dict:
    return {"type": "integer", "minimum": low, "maximum": high, **extra}


INPUTS: dict[str, dict] = {
    "advance": _inputs({
        "name": NAME,
        "until": _int(0, 7, description="stop after this phase"),
        "full": {"type": "boolean", "default": False, "description": "token gate on all 8 prompts instead of 2"},
        "prefill_len": _int(8, 8192, description="prompt length of the Phases 4-5 emulator wall-time runs"),
    }, ("name",)),
    **{v.tool: input_schema(v) for v in VERBS},  # the verb table's rows (handlers.verbs)
}


def with_defaults(tool: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments with every property default of the tool's input schema filled in."""
    props = INPUTS[tool]["properties"]
    return {**{k: p["default"] for k, p in props.items() if "default" in p}, **(arguments or {})}


def _as_object(schema: dict) -> dict:
    if "anyOf" in schema:
        return {"type": "object", "anyOf": [_as_object(s) for s in schema["anyOf"]]}
    if schema.get("type") == "array":
        return {"type": "object", "properties": {"items": schema}, "required": ["items"]}
    return schema


def output_schema(tool: str) -> dict:
    """The tool's output schema: its result's schema, a JSON array wrapped as `{"items": ...}`."""
    return _as_object(SCHEMAS[tool] if tool in SCHEMAS else WORKBENCH_SCHEMAS[tool])


def structured(value: Any) -> dict[str, Any]:
    """A result as MCP's structured content: strict JSON, an array wrapped as `{"items": ...}`."""
    safe = json_safe(value)
    return {"items": safe} if isinstance(safe, list) else safe
