"""The hardware path rehearsed on the mlir-air twin for the families Llama's twin run (test_mlir_air_twin.py) does
not exercise (issue #48): Gemma3, whose local layers run a sliding-window attention row, and LFM2, whose short
convolution runs eltwise_mul and conv1d rows. `ledger twin` -> `init --executor mlir-air` -> `scaffold --stand-in
emulated` -> `advance`, every command through the real CLI; the tiny models are the suite's shared folders
(tests/prebuilt.py). Both go to deployed with an evaluation PASS; LFM2's Phase 2 checks the carried convolution state
with the model directory's `make decode-gate`, the lines of mlir-air's lfm2 decode gate computed by the stand-in
(npu_kernels.mlir_air.twin.decode_gate) and read by npu_kernels.mlir_air.decode_gate_report."""

from __future__ import annotations

import pytest

from tests.e2e.cli import ledger, ledger_json


def _twin_deployment(mp: pytest.MonkeyPatch, root, model, name: str, until: int | None):
    """A twin under `root` and a workspace where `name` was initialised on mlir-air, scaffolded with the emulated
    stand-in and advanced (to deployed, or `until` a phase); `mp` sets MLIR_AIR_DIR and the NPU lock."""
    twin, ws = root / "mlir-air", root / "ws"
    mp.setenv("MLIR_AIR_DIR", str(twin))
    mp.setenv("LEDGER_NPU_LOCK", str(root / "npu.lock"))
    advance = ("advance", name, *(["--until", str(until)] if until is not None else []))
    for args in (("twin", str(twin)), ("init", str(model), "--name", name, "--executor", "mlir-air"),
                 ("scaffold", name, "--stand-in", "emulated"), advance):
        proc = ledger(ws, *args, timeout=1500)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return twin, ws


@pytest.fixture(scope="module")
def gemma3_on_the_twin(tmp_path_factory, tiny_gemma3):
    with pytest.MonkeyPatch.context() as mp:
        yield _twin_deployment(mp, tmp_path_factory.mktemp("twin-g3"), tiny_gemma3, "g3", None)


@pytest.fixture(scope="module")
def lfm2_on_the_twin(tmp_path_factory, tiny_lfm2):
    with pytest.MonkeyPatch.context() as mp:
        yield _twin_deployment(mp, tmp_path_factory.mktemp("twin-lf"), tiny_lfm2, "lf", None)


def _rows(ws, name: str, kind: str = "KernelVerified") -> list[dict]:
    events = ledger_json(ws, "log", "--stream", f"deployment:{name}")
    return [e["payload"] for e in events if e["type"] == kind]


@pytest.mark.slow
def test_the_tiny_gemma3_is_deployed_through_the_twin_with_an_evaluation_pass(gemma3_on_the_twin):
    twin, ws = gemma3_on_the_twin
    status = ledger_json(ws, "status", "g3")
    assert status["status"] == "deployed" and status["evaluation"] == "PASS", status
    assert status["phases_passed"] == list(range(8))
    rows = _rows(ws, "g3")
    assert rows and all(r["source"] == "harness" and r["provenance_class"] == "standin-rehearsal" for r in rows)
    # the local layer's attention: its window reached mlir-air's flag (attn_npu2.py --window) and the row passed
    windowed = [r for r in rows if r["kernel"] == "flash_attention" and r["shape"].get("window")]
    assert windowed and all(r["verdict"] == "PASS" for r in windowed)
    assert all(f"--window {r['shape']['window']}" in r["provenance"]["command"] for r in windowed)
    assert all(str(twin) in r["provenance"]["command"] for r in rows)


@pytest.mark.slow
def test_the_tiny_lfm2_is_deployed_through_the_twin_with_an_evaluation_pass(lfm2_on_the_twin):
    """The short convolution's rows run through mlir-air's eltwise_mul and conv1d_depthwise Makefiles and pass as
    stand-in rehearsals (at dd99c44 the first of them stopped Phase 1: `error: 'eltwise_mul'`); Phase 2's carried
    state is the model directory's `make decode-gate`, read as mlir-air's lfm2 decode gate prints it."""
    twin, ws = lfm2_on_the_twin
    status = ledger_json(ws, "status", "lf")
    assert status["status"] == "deployed" and status["evaluation"] == "PASS", status
    assert status["phases_passed"] == list(range(8))
    gates = _rows(ws, "lf", "ConvStateChecked")
    assert gates and all(g["method"] == "decode-gate" and g["passed"] and g["carried_state"] for g in gates), gates
    for g in gates:  # every token scored, every short-convolution layer's state read back after each
        assert g["provenance_class"] == "standin-rehearsal" and "decode-gate" in g["provenance"]["command"]
        assert str(twin) in g["provenance"]["command"] and g["state_slots"] > 0 and g["drift_layers"] == 0
        assert len(g["steps"]) == g["n_positions"] == 5
        assert all({x["layer"] for x in s["per_layer"]} == {0, 2} for s in g["steps"])  # the tiny LFM2's conv layers
    page = (ws / "llms" / "lf" / "docs" / "development_progress" / "phase2_block.md").read_text()
    assert "mlir-air's decode gate (`make decode-gate`)" in page and "| standin-rehearsal | PASS |" in page
    rows = _rows(ws, "lf")
    assert rows and all(r["verdict"] == "PASS" and r["provenance_class"] == "standin-rehearsal" for r in rows)
    for kernel, folder in (("eltwise_mul", "eltwise_mul"), ("conv1d", "conv1d_depthwise")):
        mine = [r for r in rows if r["kernel"] == kernel]
        assert len(mine) >= 2, kernel  # a prefill and a decode row
        assert all(f"{twin}/programming_examples/{folder} run" in r["provenance"]["command"] for r in mine)
