"""The toolchain floor (issue #38 item 4): the Peano version mlir-air's nightly records (nightlyPerfBenchmark.yml
@0252fbd, `toolchain.llvm_aie_version` = `pip show llvm-aie` Version), checked against contract.toml's
[[toolchain.floor]]: Peano >= 21 for every model (the llvm-aie mlir-air's CI pins at e972f29), >= 22 for a model
directory whose lit file REQUIRES peano_ge22 (gemma4_e2b_q4nx@887fa82). `ledger doctor` and the mlir-air preflight
refuse a twin below the floor in one line naming it; every mlir-air row records the versions beside the toolchain
hashes. The issue asked that a 21.x twin be refused: mlir-air's own nightly runs 21.x (module docstring of
npu_kernels.mlir_air.toolchain_floor), so 21.x passes the general floor and is refused only for a model that requires 22."""

from __future__ import annotations

import json

from handlers.doctor import preflight
from npu_kernels.mlir_air.toolchain_floor import (FLOORS, TWIN_PEANO, floor_refusal, known_bad, mlir_aie_hash,
                                              peano_version)
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.toolchain import current_toolchain, toolchain_label
from tests.e2e.cli import in_process

OLD_PEANO = "20.0.0.2026010101+0123abcd"  # below the floor: no mlir-air CI at the contract's commit used a Peano 20
PINNED = "21.0.0.2026080601+f4a72c27"  # the llvm-aie mlir-air's CI pins at e972f29 (and history.ndjson's `peano`)
LLVM22 = "22.0.0.2026081201+046b11f9"  # the LLVM 22 nightly nightlyPerfBenchmark.yml@0252fbd found miscompiling
NIGHTLY_0914 = "22.0.0.2026090201+a36c62b9"  # the build the nightly verifies every model with (sweep_history@15f33a3)


def test_doctor_on_a_twin_below_the_floor_refuses_in_one_line_naming_the_floor(tmp_path):
    old = write_twin(tmp_path / "old", peano=OLD_PEANO)
    assert peano_version(str(old)) == OLD_PEANO
    done = in_process(tmp_path / "ws", "doctor", str(old))
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert done.returncode == 1 and len(lines) == 1, lines
    assert OLD_PEANO in lines[0] and "Peano (llvm-aie) >= 21" in lines[0] and "nightlyPerfBenchmark.yml:154" in lines[0]
    js = json.loads(in_process(tmp_path / "ws", "doctor", str(old), "--json").stdout)
    assert js["clean"] is False and js["toolchain"]["llvm_aie_version"] == OLD_PEANO and "floor" in js["toolchain_refusal"]
    assert "below the toolchain floor" in preflight(str(old))  # `ledger advance` on mlir-air refuses the same way
    # the twin's default (the Peano mlir-air's CI pins) meets the floor, and the versions are recorded
    new = write_twin(tmp_path / "new")
    assert TWIN_PEANO == PINNED and preflight(str(new)) is None
    assert in_process(tmp_path / "ws", "doctor", str(new)).returncode == 0
    # a model directory that requires Peano 22 is refused on it
    assert "peano_ge22" in preflight(str(new), "gemma4_e2b_q4nx")
    tc = current_toolchain("mlir-air", mlir_air_dir=str(new))
    assert tc["llvm_aie_version"] == TWIN_PEANO and tc["mlir_aie_hash"] is None  # a twin pins no mlir-aie
    assert f"llvm-aie-version {TWIN_PEANO}" in toolchain_label(tc)


def test_the_floor_reads_the_major_version_per_model_and_leaves_an_unknown_one_alone(tmp_path):
    assert [(f["key"], f["min_major"], tuple(f.get("models", ()))) for f in FLOORS] == [
        ("llvm_aie_version", 21, ()), ("llvm_aie_version", 22, ("gemma4_e2b_q4nx",))]
    assert floor_refusal({"llvm_aie_version": PINNED}) is None
    assert floor_refusal({"llvm_aie_version": PINNED}, "qwen25_0_5b") is None
    assert "peano_ge22" in floor_refusal({"llvm_aie_version": PINNED}, "gemma4_e2b_q4nx")
    assert floor_refusal({"llvm_aie_version": LLVM22}, "gemma4_e2b_q4nx") is None
    assert floor_refusal({"llvm_aie_version": None}) is None  # nothing says it is below
    assert "20.1.0" in floor_refusal({"llvm_aie_version": "20.1.0"})
    # the LLVM 22 nightly meets every floor, and is named as one mlir-air found miscompiling
    assert known_bad({"llvm_aie_version": PINNED}) is None and "Qwen" in known_bad({"llvm_aie_version": LLVM22})
    # mlir_aie_hash: the HASH= line of the checkout's utils/clone-mlir-aie.sh, as the nightly reads it (e972f29's)
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "clone-mlir-aie.sh").write_text(
        "#!/usr/bin/env bash\nexport HASH=7e00b57955e108fe9d8e9419f5828a0c7e650858\nWHEEL_VERSION=1.4.2.dev16+g7e00b57\n")
    assert mlir_aie_hash(str(tmp_path)) == "7e00b57955e108fe9d8e9419f5828a0c7e650858"


def test_doctor_names_a_known_bad_peano_as_a_warning(tmp_path):
    bad = write_twin(tmp_path / "bad", peano=LLVM22)
    done = in_process(tmp_path / "ws", "doctor", str(bad))
    assert done.returncode == 0 and "known to build wrong code" in done.stderr


def test_the_known_bad_warning_names_the_build_the_nightly_verifies_with_and_that_build_is_clean(tmp_path):
    """Issue 46: the nightly of 2026-09-14 (run 34806564676) builds with 22.0.0.2026090201+a36c62b9 and every model
    verifies; the warning for the miscompiling 22 build points there, and that build meets every floor unwarned."""
    warning = known_bad({"llvm_aie_version": LLVM22})
    assert f"nightly verifies with {NIGHTLY_0914}" in warning and "34806564676" in warning
    assert known_bad({"llvm_aie_version": NIGHTLY_0914}) is None
    assert floor_refusal({"llvm_aie_version": NIGHTLY_0914}, "gemma4_e2b_q4nx") is None
    good = write_twin(tmp_path / "good", peano=NIGHTLY_0914)
    done = in_process(tmp_path / "ws", "doctor", str(good))
    assert done.returncode == 0 and "known to build wrong code" not in done.stderr


def test_ledger_twin_refuses_a_peano_that_is_not_a_version(tmp_path):
    done = in_process(tmp_path / "ws", "twin", str(tmp_path / "t"), "--peano", "$(rm -rf /)")
    assert done.returncode != 0 and "is not a version" in done.stdout + done.stderr
    assert not (tmp_path / "t").exists()
