"""`ledger scaffold` of a deployed deployment writes an ARCHITECTURE.md whose switches are the ones the ledger
records for it (issue #25 item 2b): the switches requested at init plus every optimisation Phases 4-5 applied,
re-derived here from the recorded events, compared with the `## Switches` table the file states."""

from __future__ import annotations

from ledger import open_ledger
from npu_kernels.mlir_air.scaffold import stated_switches
from npu_kernels.mlir_air.twin import write_twin
from tests.e2e.cli import ledger

NAMES = ("fusion", "weight_residency", "intermediate_bos", "seq_first")


def test_the_architecture_of_a_scaffolded_deployment_states_the_switches_its_ledger_records(tiny_at, tmp_path):
    ws = tiny_at(7)
    twin = write_twin(tmp_path / "mlir-air")
    done = ledger(ws, "scaffold", "tiny", "--stand-in", "emulated", env_extra={"MLIR_AIR_DIR": str(twin)})
    assert done.returncode == 0, done.stdout + done.stderr
    text = (twin / "programming_examples" / "llms" / "tiny" / "ARCHITECTURE.md").read_text()
    stream = open_ledger(f"sqlite:///{ws / '.ledger' / 'ledger.db'}", read_only=True).read_stream("deployment:tiny")
    recorded = dict(stream[0].payload.get("pipeline") or {})
    applied = 0
    for e in stream:
        if e.type == "OptimizationTried":
            recorded[e.payload["optimisation"]] = e.payload["outcome"] == "applied"
            applied += e.payload["outcome"] == "applied"
    assert applied  # the deployment switched something on, so a file stating "all off" fails here
    assert stated_switches(text) == {"prefill": {k: bool(recorded.get(k)) for k in NAMES},
                                     "decode": {k: bool(recorded.get("decode:" + k)) for k in NAMES}}
