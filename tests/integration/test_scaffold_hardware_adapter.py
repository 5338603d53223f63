"""A hardware scaffold's verify adapter imports its `<name>_inference` module where mlir-air's verify runner imports
the adapter (issue #48 item 2).

mlir-air's runner (PE/llms/verify/verify_runner.py:48-51, :186-193 @e972f29) puts llms/ and llms/verify/ on sys.path
and imports `<name>.verify_adapter`; the model directory itself is not on the path, so an adapter that imports its
inference module by name puts its directory there first (PE/llms/llama32_1b/verify_adapter.py:25-32). The twin's
runner does what mlir-air's does and nothing more (the probe below pins it), so an adapter that imports under the
twin's imports on a real checkout. The checkout here is a twin without its marker: the shape of a real checkout,
where `ledger scaffold` writes a hardware directory (on a twin it refuses one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from npu_kernels.mlir_air.checkout import MARKER, ROOT
from npu_kernels.mlir_air.executor import MlirAirExecutor
from npu_kernels.mlir_air.output import TranscriptError
from npu_kernels.mlir_air.scaffold import scaffold
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.model.architecture import load_raw_config, resolve

# the engineer's tiny_inference.py, written here as an engineer would: the functions the hardware adapter calls,
# over npu-ledger's emulated pipeline (this test has no NPU); module-level, as mlir-air's inference modules are
ENGINEERS_INFERENCE = '''"""tiny: the engineer's inference module (a test's: npu-ledger's emulated pipeline behind the adapter's calls)."""
import os

from npu_kernels.mlir_air.twin import stand_in


def build_config():
    return stand_in.build_config(os.environ["NPU_LEDGER_MODEL"])


def setup(config, max_seq):
    return stand_in.build_runner(os.environ["NPU_LEDGER_MODEL"])


def run_npu_prefill(state, tokens, lite):
    return state.prefill(tokens)


def run_npu_decode_step(state, token, pos):
    return state.decode_step(token, pos)
'''


@pytest.fixture()
def hardware_dir(tmp_path, tiny_llama) -> Path:
    """A hardware model directory `tiny` in a real checkout's shape (the twin, its marker removed)."""
    checkout = write_twin(tmp_path / "mlir-air")
    (checkout / MARKER).unlink()
    out = scaffold(checkout, "tiny", str(tiny_llama), resolve(load_raw_config(tiny_llama)))
    assert not (Path(out["dir"]) / "stand_in.json").exists()
    return Path(out["dir"])


def _make(model_dir: Path, tiny_llama, target: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(model_dir), target, f"PYTHON={sys.executable}", f"NPU_LEDGER={ROOT}",
                           f"NPU_LEDGER_MODEL={tiny_llama}"], capture_output=True, text=True, timeout=600)


def test_the_twins_verify_runner_imports_an_adapter_on_mlir_airs_sys_path_and_nothing_more(hardware_dir, tiny_llama):
    """What the adapter sees at import: llms/verify/, llms/, then the script's directory (llms/verify/ again), as
    `python verify_runner.py` gives mlir-air's; not the working directory (`make` runs it from build_peano/), which
    `python -m` would add and a real checkout never has."""
    llms = hardware_dir.parent
    probe = llms / "probe"
    probe.mkdir()
    (probe / "verify_adapter.py").write_text(
        "import json, os, sys\nprint('[probe] ' + json.dumps({'path': sys.path, 'cwd': os.getcwd()}))\nsys.exit(0)\n")
    build = hardware_dir / "build_peano"
    build.mkdir()
    done = subprocess.run([sys.executable, str(llms / "verify" / "verify_runner.py"), "--runner=probe.verify_adapter",
                           "--prompts", "single"], cwd=build, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("[probe] "))[len("[probe] "):])
    resolved = [str(Path(p).resolve()) if p else str(build) for p in seen["path"]]
    verify = str((llms / "verify").resolve())
    assert resolved[:3] == [verify, str(llms.resolve()), verify]
    assert str(build.resolve()) not in resolved and str(hardware_dir.resolve()) not in resolved


def test_a_hardware_adapter_imports_its_inference_module_under_the_verify_runner(hardware_dir, tiny_llama):
    """`make diagnosis` through the hardware adapter and the engineer's module: at dd99c44 the adapter's
    `from tiny_inference import ...` ended in ModuleNotFoundError, on the twin as on mlir-air's own runner."""
    (hardware_dir / "tiny_inference.py").write_text(ENGINEERS_INFERENCE)
    done = _make(hardware_dir, tiny_llama, "diagnosis")
    assert done.returncode == 0 and "ModuleNotFoundError" not in done.stderr, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "[verify] PASS"
    report = next(ln for ln in done.stdout.splitlines() if ln.startswith("[verify] JSON:")).split(":", 1)[1].strip()
    rows = json.loads(Path(report).read_text())["per_layer"]
    assert [r["layer"] for r in rows] == [0, 1]


def test_a_failed_make_diagnosis_is_reported_with_its_tracebacks_last_lines(hardware_dir, tiny_llama):
    """The engineer's module fails at import (no pyxrt here): the error names the exception and where it was
    raised, not 'matches none of the mlir-air verify formats' and make's last line."""
    (hardware_dir / "tiny_inference.py").write_text("import pyxrt  # XRT's Python binding: absent on this machine\n")
    executor = MlirAirExecutor(mlir_air_dir=str(hardware_dir.parents[2]), lock_path=str(hardware_dir / "npu.lock"))
    with pytest.raises(TranscriptError) as e:
        executor.run_model_diagnosis(hardware_dir, make_vars={"PYTHON": sys.executable, "NPU_LEDGER": str(ROOT),
                                                              "NPU_LEDGER_MODEL": str(tiny_llama)})
    message = str(e.value)
    assert "before its verdict:" in message and "matches none" not in message and "Leaving directory" not in message
    assert message.endswith("| import pyxrt  # XRT's Python binding: absent on this machine | "
                            "ModuleNotFoundError: No module named 'pyxrt'"), message
    assert 'tiny_inference.py", line 1, in <module>' in message


def test_the_unwritten_skeleton_says_so_in_one_line(hardware_dir, tiny_llama):
    """The scaffold's own tiny_inference.py is a skeleton: `make verify` says it is, without a traceback."""
    done = _make(hardware_dir, tiny_llama, "verify")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "tiny_inference.py is the scaffold's skeleton, not written yet" in done.stderr
