"""The hardware path rehearsed on the mlir-air twin: `ledger twin` -> `init --executor mlir-air` -> `scaffold
--stand-in emulated` -> `advance` takes the tiny Llama from Phase 0 to deployed, every phase's evidence coming
from the twin's own make targets and report files (real make, real subprocesses, real flock)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli import ledger, ledger_json


@pytest.mark.slow
def test_the_tiny_llama_is_deployed_through_the_twins_commands_and_reports(tmp_path, tiny_llama, monkeypatch):
    twin = tmp_path / "mlir-air"
    ws = tmp_path / "ws"
    monkeypatch.setenv("MLIR_AIR_DIR", str(twin))
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "npu.lock"))
    for args in (("twin", str(twin)), ("init", str(tiny_llama), "--name", "tiny", "--executor", "mlir-air"),
                 ("scaffold", "tiny", "--stand-in", "emulated")):
        proc = ledger(ws, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = ledger(ws, "advance", "tiny", timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    status = ledger_json(ws, "status", "tiny")
    assert status["status"] == "deployed" and status["phases_passed"] == list(range(8))
    assert status["evaluation"] == "PASS"
    events = ledger_json(ws, "log", "--stream", "deployment:tiny")
    commit = subprocess.run(["git", "-C", str(twin), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    model_dir = twin / "programming_examples" / "llms" / "tiny"

    kernels = [e["payload"] for e in events if e["type"] == "KernelVerified"]
    assert kernels and all(k["source"] == "harness" and str(twin) in k["provenance"]["command"] for k in kernels)
    assert all(k["provenance"]["toolchain"]["mlir_air_commit"] == commit for k in kernels)

    def from_make(p: dict, target: str) -> None:
        prov = p["provenance"]
        assert prov["command"].startswith(f"make -C {model_dir} {target}"), prov["command"]
        assert prov["mlir_air_commit"] == commit and prov["stand_in"] is True
        if prov["report_path"]:  # the report file the run wrote, unchanged since
            assert hashlib.sha256(Path(prov["report_path"]).read_bytes()).hexdigest() == prov["report_sha256"]

    for e in events:
        p = e["payload"]
        if e["type"] in ("BlockValidated", "LayerDiagnosed"):
            from_make(p, "diagnosis")
        elif e["type"] == "TokenGateChecked":
            from_make(p, "verify")
            assert p["tf_steps"] == p["n_tokens"] == 32  # the twin's verify runner carries the walk
        elif e["type"] == "PerformanceMeasured":
            assert p["profile"]["source"] == "mlir-air-profile"
    # the gate's prompts are the checkout's prompt file, raw-encoded (not the chat template)
    prompt_file = (twin / "programming_examples/llms/verify/prompts/instruct.txt").read_text().splitlines()
    gates = [e["payload"] for e in events if e["type"] == "TokenGateChecked" and e["payload"]["context"] == "phase3"]
    assert [g["prompt"] for g in gates] == [x for x in prompt_file if x and not x.startswith("#")][:2]
    tried = [e["payload"] for e in events if e["type"] == "OptimizationTried"]
    assert {t["phase"] for t in tried if t["outcome"] == "applied"} == {4, 5}
    # on hardware a switch is another program: every trial keeps its own `make verify` re-run
    assert all(t["gate_context"] == f"phase{t['phase']}:{t['optimisation']}" for t in tried)
    assert not [e for e in events if e["type"] == "TokenGateChecked" and e["payload"]["context"].endswith(":final")]
    assert not [e for e in events if e["type"] == "PhaseFailed"]
    # the evaluator re-ran the kernel sample through the harnesses and the token gate through make verify
    evaluation = next(e["payload"] for e in events if e["type"] == "EvaluationRecorded")
    assert evaluation["remeasured"]["kernel_sample"][1:] and all(r["agrees"] for r in evaluation["remeasured"]["kernel_sample"][1:])
    assert all(g["passed"] for g in evaluation["remeasured"]["token_gate"])
