"""The MCP tools' input schemas, and their output schemas derived from `handlers.results.SCHEMAS`.

Inputs are the CLI's arguments as typed JSON, generated from each verb's request (`handlers.verbs.input_schema`:
a shape is an object, not `M=..,K=..` text, except for `record_harness`, whose `--shape` is validated by
`handlers.record` as the CLI's is); `additionalProperties` is false, so a misspelt argument is refused instead of
ignored; `default`s are filled in by `with_defaults`.
Outputs: MCP requires a tool's structured result to be an object, so a result that is a JSON array on the
CLI (`history`, `plan`, `diagnose`, `triage`, ...) travels as `{"items": [...]}` (`output_schema`,
`structured`); the text content of every result is the CLI's JSON value, unwrapped.

Imports: handlers.results, handlers.results_workbench, handlers.verbs.
"""

from __future__ import annotations

from typing import Any

from handlers.results import SCHEMAS, json_safe
from handlers.results_workbench import SCHEMAS as WORKBENCH_SCHEMAS
from handlers.verbs import VERBS, input_schema

INPUTS: dict[str, dict] = {v.tool: input_schema(v) for v in VERBS}  # every tool is a row of handlers.verbs


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
