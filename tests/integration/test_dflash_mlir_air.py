"""The mlir-air path of the speculative-decoding gate (issue 46 item 3), rehearsed on the twin: a stand-in model
directory scaffolded for a deployment with a drafter has `make dflash-exactness` and `<name>_dflash.py`, which prints
the lines of mlir-air's qwen3_4b_q4nx dflash_acceptance_device.py --exactness (@43e773e) from the emulated
speculative loop; the backend runs it through real make and records what Phase 5 needs, with the run's provenance
(standin-rehearsal). A drill through NPU_LEDGER_FAULTS is caught; an unreadable run is a FAIL in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from handlers import deploy
from handlers.evaluator.audit import check_speculation
from handlers.gates import GateRun
from handlers.gates.speculation import speculation_event, speculation_reasons
from handlers.workbench import scaffold_deployment
from ledger import open_ledger
from ledger.streams import deployment_stream
from ledger.events import SpeculationChecked
from ledger.record import RecordedEvent
from npu_kernels.backends.in_process import InProcessBackend
from npu_kernels.backends.mlir_air import MlirAirBackend
from npu_kernels.mlir_air.checkout import MARKER
from npu_kernels.mlir_air.scaffold import scaffold
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.speculative import acceptance_summary, greedy_stream, speculative_stream
from npu_kernels.provenance import STANDIN_REHEARSAL
from npu_kernels.thresholds import TOKEN_GATE_STEPS
from statemachine.checks import speculation_problem
from statemachine.fold import fold

BLOCK = 4


@pytest.fixture(scope="module")
def backend(tmp_path_factory, tiny_llama) -> MlirAirBackend:
    twin = write_twin(tmp_path_factory.mktemp("dflash") / "mlir-air")
    config = resolve(load_raw_config(tiny_llama))
    out = scaffold(twin, "tiny", str(tiny_llama), config, stand_in="emulated", drafter=True)
    assert {"tiny_dflash.py", "Makefile"} <= set(out["written"])
    scaffold(twin, "plain", str(tiny_llama), config, stand_in="emulated")  # no drafter: no target, no script
    return MlirAirBackend(tiny_llama, config, "tiny", mlir_air_dir=str(twin))


def _event(fields: dict) -> SpeculationChecked:
    return SpeculationChecked(drafter={"path": "d", "block": BLOCK}, **fields)


def test_dflash_exactness_records_the_emulated_loops_streams_and_acceptance(backend, tiny_llama, tiny_llama_drafter):
    make = (backend.model_dir / "Makefile").read_text()
    assert "\ndflash-exactness:" in make and "--exactness --out $(DFLASH_OUT)" in make
    assert not (backend.model_dir.parent / "plain" / "plain_dflash.py").exists()
    assert "dflash-exactness:" not in (backend.model_dir.parent / "plain" / "Makefile").read_text()
    prompts = backend.prompts(False)
    fields = backend.speculation_check(prompts, str(tiny_llama_drafter), BLOCK, TOKEN_GATE_STEPS)
    event = _event(fields)
    assert not event.problem and event.passed and event.exact_prompts == len(prompts) == 2
    assert [r["exact_for"] for r in event.prompts] == [[TOKEN_GATE_STEPS, TOKEN_GATE_STEPS]] * 2
    assert event.provenance_class == STANDIN_REHEARSAL and event.source.startswith("make -C ")
    assert event.provenance["transcript_sha256"] and event.provenance["report_sha256"]
    # the figures are the emulated loop's on the same target and drafter (computed here in process)
    target = InProcessBackend(tiny_llama, resolve(load_raw_config(tiny_llama)), "emulated").pipeline
    draft = InProcessBackend(tiny_llama_drafter, resolve(load_raw_config(tiny_llama_drafter)), "emulated").pipeline
    lengths = []
    for p, row in zip(prompts, event.prompts):
        run = speculative_stream(target, draft, p.tokens, TOKEN_GATE_STEPS, BLOCK)
        assert run.tokens == greedy_stream(target, p.tokens, TOKEN_GATE_STEPS)
        assert row["acceptance"] == run.acceptance and row["index"] == p.index
        lengths += run.acceptance
    assert (event.acceptance_mean, event.acceptance_sem) == acceptance_summary(lengths)
    assert event.n_verify_passes == len(lengths)
    assert speculation_problem(event) is None and speculation_reasons(event) == []
    rec = RecordedEvent(seq=1, stream_id="d", version=1, event_id="e", type="SpeculationChecked", payload=event.model_dump(), recorded_at="")
    assert check_speculation(rec) == []
    forged = event.model_copy(update={"prompts": [{**event.prompts[0], "exact_for": [5, TOKEN_GATE_STEPS]},
                                                  event.prompts[1]]})
    assert "contradicts its exact for 5/32" in speculation_problem(forged)


def test_phase5s_gate_on_mlir_air_runs_a_drill_through_the_make_targets_faults(tmp_path, tiny_llama,
                                                                               tiny_llama_drafter, monkeypatch):
    """`ledger init --executor mlir-air --drafter` is accepted, `ledger scaffold` writes the target for it, and the
    Phase 5 gate runs it: the drill (declared at init, passed in NPU_LEDGER_FAULTS) is caught."""
    twin = write_twin(tmp_path / "mlir-air")
    monkeypatch.setenv("MLIR_AIR_DIR", str(twin))
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    name = deploy.init(ledger, str(tiny_llama), name="t", workspace=tmp_path, drafter=str(tiny_llama_drafter),
                       draft_block=BLOCK, drafter_faults=("spec_unverified_accept",), executor="mlir-air")
    assert "t_dflash.py" in scaffold_deployment(ledger, tmp_path, name, str(twin), "emulated")["written"]
    state = fold(ledger.read_stream(deployment_stream(name)))
    event = speculation_event(GateRun(state=state, workspace=tmp_path), [])
    assert isinstance(event, SpeculationChecked), event
    assert not event.problem and not event.passed and event.faults == ["spec_unverified_accept"]
    assert event.executor == "mlir-air" and event.provenance_class == STANDIN_REHEARSAL
    assert "NPU_LEDGER_FAULTS=spec_unverified_accept" in event.source
    assert "differ from those without it at step" in speculation_problem(event)
    reasons = speculation_reasons(event)
    assert reasons and all("exact for" in r and "[test faults spec_unverified_accept]" in r for r in reasons)
    assert event.acceptance_mean == pytest.approx(BLOCK + 1)  # every draft committed unchecked


def test_an_unreadable_run_or_a_missing_target_is_a_fail_in_one_line(backend, tmp_path):
    prompts = backend.prompts(False)
    event = _event(backend.speculation_check(prompts, str(tmp_path / "nowhere"), BLOCK, TOKEN_GATE_STEPS))
    assert not event.passed and "\n" not in event.problem and "NPU_LEDGER_DRAFTER names no drafter" in event.problem
    assert event.provenance_class == STANDIN_REHEARSAL and speculation_reasons(event)[0].startswith("speculation: `make")
    plain = MlirAirBackend(backend.model_path, backend.config, "plain", mlir_air_dir=backend.mlir_air_dir)
    event = _event(plain.speculation_check(prompts, str(tmp_path), BLOCK, TOKEN_GATE_STEPS))
    assert not event.passed and "has no dflash-exactness target" in event.problem and "\n" not in event.problem


def test_a_hardware_scaffold_gets_a_skeleton_that_says_it_is_not_written(tmp_path, tiny_llama):
    checkout = write_twin(tmp_path / "mlir-air")
    (checkout / MARKER).unlink()  # a real checkout's shape
    d = Path(scaffold(checkout, "tiny", str(tiny_llama), resolve(load_raw_config(tiny_llama)), drafter=True)["dir"])
    assert "\ndflash-exactness:" in (d / "Makefile").read_text()
    done = subprocess.run([sys.executable, str(d / "tiny_dflash.py")], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and done.stderr.strip().splitlines() == [
        "tiny_dflash.py is the scaffold's skeleton, not written yet: its docstring says what make dflash-exactness prints"]
