"""The MCP tool table holds no way around a gate: every tool is on a reviewed allow-list with its reason."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from handlers.deploy import OutOfScope
from handlers.mcp.server import LedgerServer
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
    "perf_calibrate": ("writes", "a fit of the ledger's own NPU2-measured rows, computed by the tool, with its data"),
    "doctor": ("reads", "reads an mlir-air checkout's files against the contract"),
    "perf_export_history": ("reads", "the ledger's figures as nightly rows, read-only"),
    "log": ("reads", "the events as recorded, read-only"),
    "head": ("reads", "the head checkpoint (kept in checkpoints.json, outside the ledger, as `verify`)"),
    "graph": ("reads", "the lifecycle table as Mermaid"),
    "quantize": ("writes", "a bundle file computed from the model's own weights; no event"),
    "scaffold": ("writes", "the model directory's files in the checkout, the engineer's changes kept; no event"),
    "perf_import_history": ("writes", "mlir-air's nightly rows as imported evidence, never as our measurement"),
    "reverify": ("writes", "the token gate and changed Phase 1 rows re-measured; a regression blocks"),
    "twin": ("writes", "a stand-in checkout's files in a confined folder; no event"),
    "run": ("writes", "the integrated run's figures, measured now; no verdict"),
    "optimise": ("writes", "an engineer's change measured on hardware and gated by the token gate"),
    "registry_import": ("writes", "mlir-air's registry rows as imported evidence, never as our measurement"),
    "registry_build": ("writes", "projections rebuilt from the ledger (or rows added to a checkout); no event"),
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


# --- the call path in this process (LedgerServer.call: validation, defaults, the tool, the error line) ----------

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"


def _gemm_pass(elements: int) -> str:
    return (f"[precision] Output 0 ({elements} elements): mean_rel_L1=9.312e-03 | rel_err max=3.906e-01 | "
            "abs_err max=6.104e-04 | rtol=1.6e-02 atol=1.5e-03\nLatency (us): 40000.0 | Throughput: 6.871948e+03 GFLOP/s\n"
            "PASS!\n")


@pytest.fixture
def server(tmp_path):
    return LedgerServer(tmp_path, f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}", allowed=(CONFIGS,))


def _events(server):
    return server.call("history", {"name": "m"}).structured_content["items"]


def test_record_harness_takes_a_transcript_file_validates_it_and_refuses_what_cannot_be_the_row(server, tmp_path):
    created = server.call("init", {"model": str(CONFIGS / "qwen3-0.6b.json"), "name": "m"})
    assert not created.is_error and created.structured_content["name"] == "m"
    good, bogus = tmp_path / "run.txt", tmp_path / "bogus.txt"
    good.write_text(_gemm_pass(4096 * 4096))
    bogus.write_text(_gemm_pass(10))
    row = {"name": "m", "kernel": "gemm", "shape": "M=4096,K=8192,N=4096", "method": "fused-cast"}
    before = _events(server)
    refused = server.call("record_harness", {**row, "transcript_path": str(bogus)})
    assert refused.is_error and refused.content[0].text.startswith("error: ") and "checked 10 elements" in (
        refused.content[0].text)
    missing = server.call("record_harness", {**row, "transcript_path": str(tmp_path / "none.txt")})
    assert missing.is_error and "No such file or directory" in missing.content[0].text
    assert _events(server) == before
    recorded = server.call("record_harness", {**row, "transcript_path": str(good)})
    assert not recorded.is_error and recorded.structured_content["verdict"] == "PASS"
    jsonschema.validate(recorded.structured_content, output_schema("record_harness"))
    assert [e["type"] for e in _events(server)][len(before):] == ["KernelVerified"]


def test_a_bad_argument_or_an_unknown_tool_is_one_line_and_runs_nothing(server):
    assert server.call("advance", {"name": "m", "until": 9}).content[0].text == (
        "error: advance: bad argument until: 9 is greater than the maximum of 7")
    assert server.call("append_event", {}).content[0].text.startswith("error: no tool named 'append_event'")
    assert server.call("resume", {"name": "m", "note": "x"}).content[0].text == (
        "error: no deployment named 'm' (run `ledger init MODEL` first)")
    assert server.call("status", {}).structured_content == {"items": []}


def test_doctor_graph_and_log_tools_return_the_cli_s_json_and_a_twin_s_own_copies_are_named(server, tmp_path):
    import json

    from npu_kernels.mlir_air.twin import write_twin
    from tests.e2e.cli import in_process

    twin = write_twin(tmp_path / "twin")
    doctor = server.call("doctor", {"mlir_air_dir": str(twin)})
    assert not doctor.is_error, doctor.content[0].text
    assert doctor.structured_content == json.loads(in_process(tmp_path, "doctor", str(twin), "--json").stdout)
    copies = [f["twin_copy"] for f in doctor.structured_content["findings"] if f["twin_copy"]]
    # the twin's own copies: its modules, and the kernel modules that declare a harness script's stand-in (TWIN)
    assert copies and all(c.startswith(("npu_kernels/mlir_air/twin/", "npu_kernels/numerics/kernels/")) for c in copies)
    text = in_process(tmp_path, "doctor", str(twin)).stdout
    assert "a `ledger twin` stand-in" in text and "read the twin's own copy, npu_kernels/mlir_air/twin/" in text
    assert server.call("graph", {}).structured_content["mermaid"].startswith("stateDiagram-v2")
    server.call("init", {"model": str(CONFIGS / "qwen3-0.6b.json"), "name": "m"})
    log = server.call("log", {"stream_id": "deployment:m"}).structured_content["items"]
    assert log == json.loads(in_process(tmp_path, "log", "--stream", "deployment:m", "--json").stdout)
