"""`ledger advance` of an `--executor mlir-air` deployment with no usable MLIR_AIR_DIR (unset, not an mlir-air
checkout, a checkout that fails the contract) is refused in one line before an attempt is opened: the stream
holds no new event (issue #25 item 2b)."""

import shutil
from pathlib import Path

import pytest

from handlers.doctor import advance_refusal
from handlers.uow import DeploymentUnit
from npu_kernels.mlir_air.twin import write_twin
from ledger import open_ledger
from tests.e2e.cli import ledger as cli


@pytest.fixture(scope="module")
def twin(tmp_path_factory) -> Path:
    return write_twin(tmp_path_factory.mktemp("twin") / "mlir-air")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, tiny_llama, twin):
    """One workspace for the module: deployment `m` on mlir-air (recorded where a checkout was set: `init` refuses
    mlir-air without one, issue #40), `e` on the emulator (a refused advance changes nothing, which each test
    checks, so they can share it)."""
    ws = tmp_path_factory.mktemp("preflight") / "ws"
    with pytest.MonkeyPatch.context() as mp:
        for name, executor in (("m", "mlir-air"), ("e", "emulated")):
            mp.setenv("MLIR_AIR_DIR", str(twin)) if executor == "mlir-air" else mp.delenv("MLIR_AIR_DIR", raising=False)
            done = cli(ws, "init", str(tiny_llama), "--name", name, "--executor", executor)
            assert done.returncode == 0, done.stderr
    return ws


def _events(ws: Path) -> list:
    return open_ledger(f"sqlite:///{ws / '.ledger' / 'ledger.db'}").read_all()


def _broken_twin(twin: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "broken-twin"
    shutil.copytree(twin, copy, symlinks=True)
    make = copy / "programming_examples" / "matrix_multiplication" / "bf16_in_bf16_out" / "Makefile"
    make.write_text(make.read_text().replace("HERD_N", "HERD_COLS"))
    return copy


@pytest.mark.parametrize("where", ["unset", "not-a-checkout", "fails-the-contract"])
def test_advance_without_a_usable_checkout_is_refused_before_an_attempt(where, workspace, twin, tmp_path,
                                                                       monkeypatch):
    before = _events(workspace)
    monkeypatch.delenv("MLIR_AIR_DIR", raising=False)
    if where == "not-a-checkout":
        monkeypatch.setenv("MLIR_AIR_DIR", str(tmp_path))
    elif where == "fails-the-contract":
        monkeypatch.setenv("MLIR_AIR_DIR", str(_broken_twin(twin, tmp_path)))
    done = cli(workspace, "advance", "m")
    assert done.returncode == 1
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: m runs on mlir-air and ") and "nothing was run" in lines[0]
    expected = {"unset": "mlir_air_dir is not set", "not-a-checkout": "is not an mlir-air checkout",
                "fails-the-contract": "does not meet mlir-air contract"}[where]
    assert expected in lines[0].lower()
    after = _events(workspace)
    assert [e.event_id for e in after] == [e.event_id for e in before]  # no attempt opened, nothing recorded


def test_a_twin_or_another_executor_passes_the_preflight(workspace, twin):
    lg = open_ledger(f"sqlite:///{workspace / '.ledger' / 'ledger.db'}")
    m, e = (DeploymentUnit(lg, name).state for name in ("m", "e"))
    assert advance_refusal(m, "m", str(twin)) is None
    assert advance_refusal(m, "m", "") is not None
    assert advance_refusal(e, "e", "") is None  # the emulator needs no checkout
