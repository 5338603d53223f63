"""What `ledger scaffold` writes into an mlir-air checkout is committable as it stands (issue #25 item 2b): no
file names a path of this machine (the npu-ledger checkout, its interpreter, the model folder, the checkout);
the interpreter, npu-ledger and the model are make variables the tool passes at run time."""

import re
import sys
from pathlib import Path

import pytest

from npu_kernels.mlir_air.checkout import MARKER, ROOT
from npu_kernels.mlir_air.scaffold import scaffold
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.model.architecture import load_raw_config, resolve

# an absolute path: "/" then a name, not preceded by a character that makes it part of a relative path, a URL
# or a make/shell expression; mlir-air's NPU lock file is the one absolute path every machine shares
_ABSOLUTE = re.compile(r"(?<![\w.$)}\]/:~-])/(?!tmp/mlir-air-npu\.lock)[A-Za-z_][\w.-]*")


@pytest.mark.parametrize("stand_in", ["emulated", None])
def test_no_written_file_names_a_path_of_this_machine(tmp_path, tiny_llama, stand_in):
    twin = write_twin(tmp_path / "mlir-air")
    if stand_in is None:
        (twin / MARKER).unlink()  # a real checkout's shape: a hardware scaffold is refused on a twin
    out = scaffold(twin, "tiny", str(tiny_llama), resolve(load_raw_config(tiny_llama)), stand_in=stand_in)
    d = Path(out["dir"])
    written = [d / rel for rel in out["written"]] + [d / ".npu-ledger-scaffold.json"]
    assert len(written) >= 11 and {f"run_npu2_{k}.lit" for k in ("compile", "verify", "profile", "prefill_sweep")} <= set(out["written"])
    machine = {str(ROOT), sys.executable, str(Path(sys.executable).resolve()), str(tiny_llama), str(twin),
               str(tmp_path), str(Path.home())}
    for path in written:
        text = path.read_text()
        assert not [m for m in machine if m in text], path.name
        assert _ABSOLUTE.findall(text) == [], (path.name, _ABSOLUTE.findall(text))
    make = (d / "Makefile").read_text()
    assert "PYTHON ?= python3" in make and "NPU_LEDGER ?=\n" in make and "export NPU_LEDGER_MODEL" in make


def test_the_pattern_finds_absolute_paths():
    """The grep above is not vacuous: it finds the paths it must and only those."""
    assert _ABSOLUTE.findall(f"PY = {sys.executable!r}") and _ABSOLUTE.findall("NPU_LEDGER ?= /home/u/npu-ledger")
    assert _ABSOLUTE.findall("sys.path.insert(0, '/work/x')")
    assert not _ABSOLUTE.findall("$(srcdir)/../verify/verify_runner.py flock /tmp/mlir-air-npu.lock PE/llms/x "
                                 "https://github.com/Xilinx/mlir-air build_peano/ reports/ a/b")
