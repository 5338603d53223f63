"""Phase 1 judges its own evidence: one transcript is never evidence for two rows, and an attempt interrupted
after its evidence batch is judged, when resumed, with the plan it recorded."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from handlers.gates import GateRun
from handlers.uow import DeploymentUnit
from ledger import open_ledger
from ledger.events import (ArchitectureAssessed, ConfigResolved, DeploymentRequested, PhasePassed,
                           PhaseStarted)
from tests.e2e.cli import ledger as cli

ROOT = Path(__file__).parents[2]
GEMM_PASS = ROOT / "tests" / "fixtures" / "transcripts" / "gemm_pass.txt"
CONFIG = dict(n_layers=1, emb_dim=512, n_heads=8, n_kv_heads=4, head_dim=64, hidden_dim=1024, vocab_size=384,
              rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, qkv_bias=False, qk_norm=False,
              architecture="LlamaForCausalLM")


def _at_phase1(url: str, name: str, executor: str, model_path: str) -> None:
    """A deployment whose Phase 0 passed (the stream as the ledger holds it; Phase 1 is what is tested)."""
    lg = open_ledger(url)
    lg.append(f"deployment:{name}", 0, [
        DeploymentRequested(model_path=model_path, name=name, executor=executor),
        ArchitectureAssessed(architecture="LlamaForCausalLM", in_scope=True),
        ConfigResolved(**CONFIG),
        PhaseStarted(phase=0, attempt=1),
        PhasePassed(phase=0, attempt=1, summary="reference ok"),
    ])
    lg.close()


def test_one_gemm_transcript_fed_for_every_kernel_cannot_pass_phase_1(tmp_path, monkeypatch):
    table = tmp_path / "harnesses.toml"
    command = f"cat {GEMM_PASS}"
    table.write_text("".join(f'[harness.{k}]\ncommand = "{command}"\n' for k in
                             ("gemm", "gemv", "rmsnorm", "rope", "flash_attention", "eltwise_add", "silu_mul")))
    monkeypatch.setenv("NPU_LEDGER_HARNESSES", str(table))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _at_phase1(url, "m", "mlir-air", str(tmp_path))
    from handlers.gates.kernel_rows import run

    outcome = run(GateRun(state=DeploymentUnit(open_ledger(url), "m").state, workspace=tmp_path))
    refused = [r for r in outcome.reasons if "transcript refused" in r]
    kernels = {r.split()[0] for r in refused}
    assert {"gemv", "rmsnorm", "rope", "eltwise_add", "silu_mul", "flash_attention"} <= kernels
    assert any("checked 4194304 elements but the output has" in r for r in refused)
    assert not outcome.summary.startswith("17/17")


def test_an_advance_killed_after_its_evidence_batch_resumes_and_is_judged_with_its_own_plan(tmp_path):
    url = f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}"
    _at_phase1(url, "m", "emulated", str(tmp_path))
    # the first advance: the real gate, the real evidence commit of `advance`, then the process dies
    child = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from handlers.deploy import open_attempt
        from handlers.gates import GateRun
        from handlers.gates.table import GATES
        from handlers.uow import DeploymentUnit
        from ledger import open_ledger
        from statemachine.phases import Phase
        unit = DeploymentUnit(open_ledger({url!r}), "m")
        outcome = GATES[Phase.KERNELS](GateRun(state=unit.state, workspace=Path({str(tmp_path)!r})))
        open_attempt(unit, Phase.KERNELS, 1, outcome.context, outcome.events)
        os._exit(137)  # killed before the verdict
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert subprocess.run([sys.executable, "-c", child], env=env, cwd=ROOT).returncode == 137
    events = open_ledger(url).read_stream("deployment:m")
    assert events[-1].type == "KernelVerified" and DeploymentUnit(open_ledger(url), "m").state.attempt_open(1)

    proc = cli(tmp_path, "advance", "m", "--until", "1")
    assert "phase 1 PASSED (attempt 1)" in proc.stdout, proc.stdout + proc.stderr
    types = [(e.type, e.payload.get("phase"), e.payload.get("attempt")) for e in open_ledger(url).read_stream("deployment:m")]
    assert types.count(("PhaseStarted", 1, 1)) == 1 and ("PhasePassed", 1, 1) in types
    assert not any(t == "PhaseFailed" for t, _, _ in types)  # no retry burnt
    started = next(e for e in open_ledger(url).read_stream("deployment:m")
                   if e.type == "PhaseStarted" and e.payload["phase"] == 1)
    assert {row["kernel"] for row in started.payload["plan"]} >= {"gemm", "gemv", "rope", "flash_attention"}
    assert json.dumps(started.payload["plan"])  # plain JSON in the stream


def test_audit_of_a_model_with_a_missing_tensor_records_its_fail(tmp_path, tiny_llama):
    import shutil

    from safetensors.torch import load_file, save_file

    model = tmp_path / "model"
    shutil.copytree(tiny_llama, model)
    weights = next(model.glob("*.safetensors"))
    tensors = {k: v for k, v in load_file(weights).items() if not k.endswith("layers.0.mlp.down_proj.weight")}
    save_file(tensors, weights, metadata={"format": "pt"})
    url = f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}"
    lg = open_ledger(url)
    stream = "deployment:m"
    lg.append(stream, 0, [DeploymentRequested(model_path=str(model), name="m"),
                          ArchitectureAssessed(architecture="LlamaForCausalLM", in_scope=True),
                          ConfigResolved(**{**CONFIG, "n_layers": 2})])
    from npu_kernels.model.digest import model_digest
    from ledger.events import ModelDigested

    for phase in range(7):  # the stream as a deployment at Phase 7 holds it; Phase 0 digested this very folder
        evidence = [ModelDigested(**model_digest(model).event_fields())] if phase == 0 else []
        lg.append(stream, lg.stream_version(stream), [PhaseStarted(phase=phase, attempt=1), *evidence,
                                                     PhasePassed(phase=phase, attempt=1)])
    lg.close()
    proc = cli(tmp_path, "audit", "m")
    assert proc.returncode == 1, proc.stderr
    recorded = [e for e in open_ledger(url).read_stream(stream) if e.type == "EvaluationRecorded"]
    assert len(recorded) == 1 and recorded[0].payload["verdict"] == "FAIL"
    assert any("cannot re-run the token gate" in f["message"] and "down_proj" in f["message"]
               for f in recorded[0].payload["findings"])
