"""Issue #45 item 1: a figure's class follows what ran (npu_kernels.mlir_air.checkout.where_it_ran), never where
MLIR_AIR_DIR points; the readers re-derive it from the recorded `ran` facts (npu_kernels.provenance)."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_kernels.mlir_air.checkout import MARKER, ROOT, STANDIN_CODE, standin_reasons, where_it_ran
from npu_kernels.provenance import (NPU2_MEASURED, STANDIN_REHEARSAL, UNATTESTED, figure_provenance,
                                    kernel_row_provenance, run_provenance)
from tests.npu2_facts import NPU2_PROVENANCE


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """A twin (marker at its root), a checkout with no marker whose harness Makefile is mlir-air-shaped, a
    stand-in model directory inside that checkout, and a twin copied without its marker."""
    twin = tmp_path / "twin"
    (twin / "programming_examples" / "gemm").mkdir(parents=True)
    (twin / MARKER).write_text("")
    real = tmp_path / "real"
    (real / "programming_examples" / "gemm").mkdir(parents=True)
    (real / "programming_examples" / "gemm" / "Makefile").write_text("run:\n\tpython3 run.py --m $(M)\n")
    model = real / "programming_examples" / "llms" / "tiny"
    model.mkdir(parents=True)
    (model / "stand_in.json").write_text("{}")
    copied = tmp_path / "copied" / "gemm"
    copied.mkdir(parents=True)
    (copied / "Makefile").write_text(f"TWIN = python -m {STANDIN_CODE}.harness\nrun:\n\t$(TWIN) gemm\n")
    return {"twin": twin, "real": real, "model": model, "copied": copied, "tmp": tmp_path}


def _whys(facts: dict) -> str:
    return " / ".join(hit["why"] for hit in facts["standin"])


def test_a_command_is_judged_by_the_paths_it_names_and_where_it_ran(dirs):
    real_gemm = dirs["real"] / "programming_examples" / "gemm"
    clean = where_it_ran(f"make -C {real_gemm} run M=64", dirs["tmp"])
    assert clean["standin"] == [] and clean["cwd"] == str(dirs["tmp"].resolve())
    assert str(real_gemm.resolve()) in clean["paths"]

    into_twin = where_it_ran(f"make -C {dirs['twin'] / 'programming_examples' / 'gemm'} run", dirs["real"])
    assert "inside a `ledger twin` checkout" in _whys(into_twin)
    ran_in_twin = where_it_ran("make run", dirs["twin"] / "programming_examples" / "gemm")  # the working directory
    assert "inside a `ledger twin` checkout" in _whys(ran_in_twin)
    relative = where_it_ran("make -C ../twin/programming_examples/gemm run", dirs["real"])  # resolved against cwd
    assert "inside a `ledger twin` checkout" in _whys(relative)
    as_make_var = where_it_ran(f"make -C {real_gemm} run SRC={dirs['twin']}", dirs["tmp"])  # a variable's value
    assert "inside a `ledger twin` checkout" in _whys(as_make_var)


def test_a_link_into_a_twin_is_followed(dirs):
    link = dirs["tmp"] / "looks-real"
    link.symlink_to(dirs["twin"])
    assert "inside a `ledger twin` checkout" in _whys(where_it_ran(f"make -C {link}/programming_examples/gemm run"))


def test_a_stand_in_model_directory_is_a_stand_in_whatever_the_checkout(dirs):
    facts = where_it_ran(f"make -C {dirs['model']} verify", dirs["tmp"])
    assert "stand-in model directory (stand_in.json" in _whys(facts)
    assert standin_reasons(dirs["real"]) == []  # the checkout itself is not one


def test_stand_in_code_is_found_without_its_marker(dirs):
    assert "runs npu-ledger's stand-in" in _whys(where_it_ran(f"make -C {dirs['copied']} run"))
    script = dirs["tmp"] / "run_gemm.py"
    script.write_text(f"import {STANDIN_CODE}.harness\n")
    assert "a script that runs npu-ledger's stand-in" in _whys(where_it_ran(f"python3 {script} --m 64"))
    module = where_it_ran(f"python3 -m {STANDIN_CODE}.harness gemm --m 64", dirs["tmp"])
    assert "npu-ledger's stand-in module" in _whys(module)
    inside = where_it_ran(f"python3 {ROOT / 'npu_kernels' / 'mlir_air' / 'twin' / 'harness.py'} gemm", dirs["tmp"])
    assert "npu-ledger's stand-in code" in _whys(inside)
    # npu-ledger's checkout itself is not stand-in code: a hardware model directory runs its walk from there
    assert standin_reasons(ROOT) == []


def test_the_reasons_name_no_path_of_this_machine(dirs):
    facts = where_it_ran(f"make -C {dirs['model']} verify SRC={dirs['twin']}", dirs["tmp"])
    assert facts["standin"] and all(str(dirs["tmp"]) not in hit["why"] for hit in facts["standin"])


def _row(prov: dict) -> dict:
    return {"source": "harness", "provenance": prov}


def test_the_class_is_re_derived_from_the_recorded_ran_facts(dirs):
    clean = where_it_ran("make run", dirs["real"] / "programming_examples" / "gemm")
    ran_here = {**NPU2_PROVENANCE, "command": "make run", "ran": clean}
    assert kernel_row_provenance(_row(ran_here)) == NPU2_MEASURED
    twin = where_it_ran("make run", dirs["twin"])
    assert kernel_row_provenance(_row({**ran_here, "ran": twin})) == STANDIN_REHEARSAL
    # a command the tool ran without recording where (a row dd99c44 wrote): not NPU2
    assert kernel_row_provenance(_row({**NPU2_PROVENANCE, "command": "make run"})) == UNATTESTED
    # the timing run's facts count too: its figures are the ones shown
    timed = {**ran_here, "latency_run": {"command": "make profile", "ran": twin}}
    assert run_provenance(timed) == STANDIN_REHEARSAL
    # a transcript a person recorded (`record harness`, no command): the declared device and toolchain decide
    assert kernel_row_provenance(_row({**NPU2_PROVENANCE, "declared_by": "ledger record harness"})) == NPU2_MEASURED
    # a model directory's figure: the same facts
    assert figure_provenance("mlir-air-profile", {**ran_here, "stand_in": False}) == NPU2_MEASURED
    assert figure_provenance("mlir-air-profile", {**ran_here, "ran": twin, "stand_in": False}) == STANDIN_REHEARSAL
