"""Every kernel of the catalog through the mlir-air runner on a twin (issue #48): the Phase 1 code path
(`handlers.gates.kernel_rows.verify_once` on `make_runner("mlir-air")`, real make, real subprocesses, real flock)
runs each kernel's harness, as npu_kernels/mlir_air/harnesses.toml renders it, at a shape the planner tiles, and
the row it builds is a PASS labelled standin-rehearsal whose figures the read-side checks accept.

Parametrised over `CATALOG`, so a kernel added to the catalog runs here without anyone adding it: a kernel with
no harness entry, no twin script, no output size or a reference the twin computes differently fails here, as
LFM2's eltwise_mul (no output size in the evidence checks) and Gemma3's sliding-window attention (a reference
without the window) did on the twin at dd99c44."""

from __future__ import annotations

import pytest

from handlers.gates.kernel_rows import verify_once
from npu_kernels.backends.kernel_runners import make_runner
from npu_kernels.mlir_air.table import HarnessConfigError
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.numerics.catalog import CATALOG, KERNELS
from npu_kernels.numerics.row import KernelRow
from npu_kernels.numerics.tiles import plan_tile
from npu_kernels.perf.evidence import check_stored_row

# The one exemption: mlir-air has no standalone [precision] harness for the 4-bit GEMV (harnesses.toml says why:
# fused_decode/proj_qmm_gate.py@307c494 prints GATE PASS/FAIL, not XRTRunner's lines), so its rows are refused
# by name, never run on something else.
NO_MLIR_AIR_HARNESS = ("gemv_q4nx",)
# dequant_q4nx.py's `__main__` takes no flags and checks one shape, its registry shape (harnesses.toml)
ONLY_SHAPE = {"dequant_q4nx": CATALOG["dequant_q4nx"].registry_shape}
# Gemma3's local layers: a sliding-window row beside the catalog's small (causal) attention shape
WINDOWED = {**CATALOG["flash_attention"].small_shape, "window": 64}


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    """The mlir-air kernel runner over a fresh twin (`ledger twin`'s write_twin) and a lock of its own."""
    root = tmp_path_factory.mktemp("twin-kernels")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLIR_AIR_DIR", str(write_twin(root / "mlir-air")))
        mp.setenv("LEDGER_NPU_LOCK", str(root / "npu.lock"))
        yield make_runner("mlir-air", "npu2")


def _row(kernel: str, shape: dict) -> KernelRow:
    spec = CATALOG[kernel]
    plan = plan_tile(kernel, spec.normalize_shape(shape), "npu2", None)
    return KernelRow(kernel, dict(shape), contract=spec.default_contract).planned_on(plan)


CASES = [pytest.param(k, ONLY_SHAPE.get(k, CATALOG[k].small_shape), id=k) for k in KERNELS]
CASES.append(pytest.param("flash_attention", WINDOWED, id="flash_attention-window"))


@pytest.mark.parametrize("kernel, shape", CASES)
def test_every_catalog_kernel_passes_through_the_mlir_air_runner_on_the_twin_as_a_rehearsal(runner, kernel, shape):
    row = _row(kernel, shape)
    if kernel in NO_MLIR_AIR_HARNESS:
        with pytest.raises(HarnessConfigError, match=f"no mlir-air harness for '{kernel}@bf16-out'"):
            verify_once(runner, row, "2026-12-04", "host", 1)
        return
    event, transcript = verify_once(runner, row, "2026-12-04", "host", 1)
    assert event.verdict == "PASS" and not event.not_measured, transcript
    assert event.provenance_class == "standin-rehearsal" and event.provenance["toolchain"]["standin"] == "ledger twin"
    assert event.executor == "mlir-air" and event.source == "harness" and event.shape == shape
    assert event.n_elements == CATALOG[kernel].output_elements(shape)  # the whole output was checked
    assert check_stored_row(event.model_dump()) == []  # what the registry fold and the audit re-check on read


def test_the_exemptions_are_kernels_the_catalog_still_has():
    """An exemption outliving its kernel would hide nothing, but would say something false."""
    assert set(NO_MLIR_AIR_HARNESS) <= set(KERNELS) and set(ONLY_SHAPE) <= set(KERNELS)
