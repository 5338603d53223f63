"""What `ledger scaffold` writes is the kind it was asked for, and only where that kind can run (issue #48 item 2):
on a twin (no NPU) a hardware scaffold is refused in one line naming `--stand-in emulated` (a rehearsal never
becomes a hardware directory unasked); a directory once scaffolded keeps its kind (a stand-in, with stand_in.json,
is never rewritten as hardware, nor the reverse). `ledger init` names the scaffold that fits the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from handlers.workbench import next_steps
from npu_kernels.mlir_air.checkout import MARKER
from npu_kernels.mlir_air.scaffold import STAND_IN_FILE, ScaffoldError, scaffold, scaffolded_kind
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.model.architecture import load_raw_config, resolve


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()} if d.exists() else {}


def test_a_hardware_scaffold_on_a_twin_is_refused_in_one_line_naming_the_stand_in(tmp_path, tiny_llama):
    twin = write_twin(tmp_path / "mlir-air")
    config = resolve(load_raw_config(tiny_llama))
    with pytest.raises(ScaffoldError) as e:
        scaffold(twin, "tiny", str(tiny_llama), config)
    assert "\n" not in str(e.value) and "is a twin" in str(e.value) and "`--stand-in emulated`" in str(e.value)
    assert not (twin / "programming_examples" / "llms" / "tiny").exists()  # nothing written
    d = Path(scaffold(twin, "tiny", str(tiny_llama), config, stand_in="emulated")["dir"])
    assert scaffolded_kind(d) == "stand-in" and (d / STAND_IN_FILE).is_file()


@pytest.mark.parametrize("first, then", [("emulated", None), (None, "emulated")])
def test_a_scaffolded_directory_keeps_its_kind(tmp_path, tiny_llama, first, then):
    checkout = write_twin(tmp_path / "mlir-air")
    (checkout / MARKER).unlink()  # a real checkout's shape: both kinds may be written there
    config = resolve(load_raw_config(tiny_llama))
    d = Path(scaffold(checkout, "tiny", str(tiny_llama), config, stand_in=first)["dir"])
    before = _files(d)
    assert scaffolded_kind(d) == ("stand-in" if first else "hardware")
    with pytest.raises(ScaffoldError, match=f"holds a {scaffolded_kind(d)} scaffold .* never both: remove it first"):
        scaffold(checkout, "tiny", str(tiny_llama), config, stand_in=then)
    assert _files(d) == before
    scaffold(checkout, "tiny", str(tiny_llama), config, stand_in=first)  # the same kind: refreshed
    assert _files(d) == before


def test_init_names_the_scaffold_that_fits_the_checkout_before_advance(tmp_path):
    twin = write_twin(tmp_path / "mlir-air")
    assert next_steps("tiny", "mlir-air", str(twin)) == "ledger scaffold tiny --stand-in emulated, then ledger advance tiny"
    (twin / MARKER).unlink()
    assert next_steps("tiny", "mlir-air", str(twin)) == "ledger scaffold tiny, then ledger advance tiny"
    assert next_steps("tiny", "emulated", str(twin)) == "ledger advance tiny"
    assert next_steps("-x", "mlir-air", str(twin)) == "ledger scaffold -- -x, then ledger advance -- -x"
