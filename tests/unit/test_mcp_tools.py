"""The MCP tool table holds no way around a gate: every tool is on a reviewed allow-list with its reason."""

from __future__ import annotations

import jsonschema
import pytest

from handlers.deploy import OutOfScope
from handlers.mcp.schemas import INPUTS, output_schema, structured, with_defaults
from handlers.mcp.tools import TOOLS, error_line
from handlers.uow import SomeoneElseAdvanced

# tool -> why it may exist. "reads" tools append nothing; every other tool appends only what its reason says.
ALLOWED = {
    "status": ("reads", "folds each stream; opens the ledger read-only"),
    "history": ("reads", "the stream's events as recorded"),
    "plan": ("reads", "a pure function of the config"),
    "predict": ("reads", "the performance model on the config"),
    "kernel_run": ("reads", "runs a kernel and judges it in memory; `ledger kernel run` records nothing either"),
    "triage": ("reads", "matches text against the playbook rules"),
    "registry_lookup": ("reads", "reads the projected GEMM JSON or folds the registry"),
    "verify": ("reads", "walks the chain read-only (keeps the head in checkpoints.json, outside the ledger)"),
    "init": ("writes", "the request and the architecture assessment, derived from config.json, not from the caller"),
    "advance": ("writes", "the gates: evidence they measure themselves, verdicts from the state machine"),
    "resume": ("writes", "a human's note after a blocker; buys one attempt, decides nothing"),
    "lesson": ("writes", "free text no gate reads"),
    "verify_model": ("writes", "token-gate measurements outside any attempt (verify-model / drill contexts)"),
    "diagnose": ("writes", "per-layer cosines, informational"),
    "audit": ("writes", "the Phase 7 gate, or a re-audit measured by the evaluator in a fresh process"),
    "record_harness": ("writes", "a transcript file read and validated as `ledger record harness` validates it"),
}
# argument names that would let a caller hand in a verdict or an event instead of having it measured
FORBIDDEN_ARGUMENTS = {"verdict", "passed", "payload", "event", "events", "type", "stream", "summary", "findings",
                       "evidence_seqs", "text_ours", "mean_rel_L1", "transcript"}


def test_every_tool_is_on_the_allow_list_and_only_the_allowed_ones_write():
    assert set(TOOLS) == set(ALLOWED)
    for name, tool in TOOLS.items():
        kind, reason = ALLOWED[name]
        assert reason and (kind == "writes") == bool(tool.writes), name


def test_no_tool_takes_a_verdict_an_event_or_transcript_text_as_an_argument():
    for name, schema in INPUTS.items():
        assert not FORBIDDEN_ARGUMENTS & set(schema["properties"]), name
        assert schema["additionalProperties"] is False, name
    assert INPUTS["record_harness"]["required"][-1] == "transcript_path"


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_each_tool_has_a_valid_input_and_object_output_schema(name):
    jsonschema.Draft202012Validator.check_schema(INPUTS[name])
    out = output_schema(name)
    jsonschema.Draft202012Validator.check_schema(out)
    assert out["type"] == "object"
    assert set(with_defaults(name, {})) <= set(INPUTS[name]["properties"])


def test_an_array_result_travels_wrapped_and_a_nan_as_null():
    value = [{"mean_rel_L1": float("nan"), "shape": (1, 2)}]
    wrapped = structured(value)
    assert wrapped == {"items": [{"mean_rel_L1": None, "shape": [1, 2]}]}
    jsonschema.validate({"items": [{"seq": 1, "version": 1, "at": "t", "type": "X", "payload": {}}]},
                        output_schema("history"))


def test_a_tool_error_is_the_cli_s_one_line():
    assert error_line(SomeoneElseAdvanced("someone else advanced tiny meanwhile; nothing was written")) == (
        "error: someone else advanced tiny meanwhile; nothing was written")
    assert error_line(KeyError("gemm_config: shape 1x2x3 not in registry")) == (
        "error: gemm_config: shape 1x2x3 not in registry")
    assert error_line(ValueError("first line\n  detail")) == "error: first line"
    assert error_line(OutOfScope("tiny: MixtralForCausalLM is out of scope")).startswith("rejected: tiny:")
    assert error_line(RuntimeError()) == "error: RuntimeError"
