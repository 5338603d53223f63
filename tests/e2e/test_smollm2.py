"""SmolLM2-135M-Instruct, the real model, through the CLI (slow: minutes each; kept few on purpose)."""

import pytest

from tests.e2e.cli import ledger, ledger_json, read_in_process

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("executor", ["emulated", "torch"])
def test_smollm2_passes_phases_0_to_3(tmp_path, smollm2_dir, executor):
    name = "smollm2_135m_instruct"
    assert ledger(tmp_path, "init", str(smollm2_dir), "--name", name, "--executor", executor).returncode == 0
    # torch on one OpenMP thread: beside the suite's other xdist worker its spin-waiting workers made this run
    # 7x slower (190 s vs 28 s alone); as tests/conftest.py's single_torch_thread does in process
    threads = {"OMP_NUM_THREADS": "1"} if executor == "torch" else None
    proc = ledger(tmp_path, "advance", name, "--until", "3", env_extra=threads)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = ledger_json(tmp_path, "status", name)
    assert status["phases_passed"] == [0, 1, 2, 3] and status["status"] == "phase4"
    events = ledger_json(tmp_path, "log", "--stream", f"deployment:{name}")
    baseline = next(e["payload"] for e in events if e["type"] == "ReferenceBaselineRecorded")
    assert baseline["passed"] and baseline["top1_text"] and baseline["logit_std"] > 0
    block = next(e["payload"] for e in events if e["type"] == "BlockValidated")
    assert block["passed"] and block["cosine"] >= 0.99
    gates = [e["payload"] for e in events if e["type"] == "TokenGateChecked"]
    assert len(gates) == 2 and all(g["passed"] and g["executor"] == executor for g in gates)
    layers = [e["payload"] for e in events if e["type"] == "LayerDiagnosed"]
    assert len(layers) == 30
    history = read_in_process(tmp_path, "history", name).stdout
    assert "block layer 0: cosine" in history and "token gate [phase3] prompt 0" in history
    if executor == "emulated":
        kernels = [e["payload"] for e in events if e["type"] == "KernelVerified"]
        assert {k["kernel"] for k in kernels} >= {"gemm", "gemv", "rmsnorm", "rope", "flash_attention",
                                                   "eltwise_add", "silu_mul"}
        registry = (tmp_path / "kernel_registry" / "supported_kernels.md").read_text()
        assert name in registry
