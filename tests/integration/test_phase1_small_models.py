"""Small legal NPU2 models pass Phase 1 on the emulated executor with the contracts their plan gives on
`--executor mlir-air` (the issue's Qwen2 E=448 and Qwen3 E=256 rows stopped Phase 1 on bf16-out-high): the real
gate through `ledger advance --until 1`, each recorded row compared with the hardware plan's, row by row."""

from __future__ import annotations

import pytest

from ledger import open_ledger
from ledger.events import ArchitectureAssessed, ConfigResolved, DeploymentRequested, PhasePassed, PhaseStarted
from tests.e2e.cli import ledger as cli
from tests.small_configs import MODELS, model_config, phase1_rows

QUICK = [MODELS[4], MODELS[7]]  # qwen2 E=448 head_dim 64 vocab 1001; qwen3 E=256 head_dim 128 vocab 387


def _at_phase1(url: str, config) -> None:
    fields = {k: v for k, v in config.to_dict().items() if k in ConfigResolved.model_fields}
    lg = open_ledger(url)
    lg.append("deployment:m", 0, [
        DeploymentRequested(model_path="(config only)", name="m", executor="emulated"),
        ArchitectureAssessed(architecture=config.architecture, in_scope=True), ConfigResolved(**fields),
        PhaseStarted(phase=0, attempt=1), PhasePassed(phase=0, attempt=1, summary="reference ok")])
    lg.close()


def _phase1(tmp_path, model) -> None:
    config = model_config(*model)
    url = f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}"
    _at_phase1(url, config)
    proc = cli(tmp_path, "advance", "m", "--until", "1")
    assert "phase 1 PASSED (attempt 1)" in proc.stdout, proc.stdout + proc.stderr
    latest = {}
    for e in open_ledger(url).read_stream("deployment:m"):
        if e.type == "KernelVerified":
            p = e.payload
            latest[(p["kernel"], tuple(sorted(p["shape"].items())))] = p
    hardware = phase1_rows(config)
    recorded = [latest[(k, tuple(sorted(s.items())))] for k, s, *_ in hardware]
    assert [(p["kernel"], p["shape"], p["contract"], p["method"], p["tier"], p["tile"]) for p in recorded] == \
        [(k, s, c, m, t, tile) for k, s, c, m, t, tile in hardware]
    assert all(p["verdict"] == "PASS" for p in recorded if p["kernel"] == "gemm" and p["tier"] == "low")


@pytest.mark.parametrize("model", QUICK, ids=[f"{m[0]}-E{m[1]}" for m in QUICK])
def test_a_small_model_passes_phase_1_on_the_emulated_executor_with_the_hardware_plans_contracts(model, tmp_path):
    _phase1(tmp_path, model)


SLOW = [m for m in MODELS if m not in QUICK]


@pytest.mark.slow
@pytest.mark.parametrize("model", SLOW, ids=[f"{m[0]}-E{m[1]}-D{m[4]}-V{m[6]}" for m in SLOW])
def test_every_width_passes_phase_1_on_the_emulated_executor_with_the_hardware_plans_contracts(model, tmp_path):
    _phase1(tmp_path, model)
