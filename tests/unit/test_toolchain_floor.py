"""The toolchain floor (issue #38 item 4): the Peano version mlir-air's nightly records (nightlyPerfBenchmark.yml
@0252fbd, `toolchain.llvm_aie_version` = `pip show llvm-aie` Version), checked against contract.toml's
[[toolchain.floor]] (Peano >= 22: gemma4_e2b_q4nx/run_npu2_verify.lit@887fa82 REQUIRES peano_ge22). `ledger doctor`
and the mlir-air preflight refuse a twin whose recorded Peano is 21.x in one line naming the floor; every mlir-air
row records the versions beside the toolchain hashes."""

from __future__ import annotations

import json

from handlers.doctor import preflight
from kernels.mlir_air.toolchain_floor import FLOORS, TWIN_PEANO, floor_refusal, mlir_aie_hash, peano_version
from kernels.mlir_air.twin import write_twin
from kernels.toolchain import current_toolchain, toolchain_label
from tests.e2e.cli import in_process

OLD_PEANO = "21.0.0.2026080601+f4a72c27"  # the llvm-aie the nightly pinned at 0252fbd (and history.ndjson's `peano`)


def test_doctor_on_a_twin_whose_recorded_peano_is_21_refuses_in_one_line_naming_the_floor(tmp_path):
    old = write_twin(tmp_path / "old", peano=OLD_PEANO)
    assert peano_version(str(old)) == OLD_PEANO
    done = in_process(tmp_path / "ws", "doctor", str(old))
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert done.returncode == 1 and len(lines) == 1, lines
    assert OLD_PEANO in lines[0] and "Peano (llvm-aie) >= 22" in lines[0] and "peano_ge22" in lines[0]
    js = json.loads(in_process(tmp_path / "ws", "doctor", str(old), "--json").stdout)
    assert js["clean"] is False and js["toolchain"]["llvm_aie_version"] == OLD_PEANO and "floor" in js["toolchain_refusal"]
    assert "below the toolchain floor" in preflight(str(old))  # `ledger advance` on mlir-air refuses the same way
    # the twin's default (the LLVM 22 nightly the workflow names) meets the floor, and the versions are recorded
    new = write_twin(tmp_path / "new")
    assert preflight(str(new)) is None and in_process(tmp_path / "ws", "doctor", str(new)).returncode == 0
    tc = current_toolchain("mlir-air", mlir_air_dir=str(new))
    assert tc["llvm_aie_version"] == TWIN_PEANO and tc["mlir_aie_hash"] is None  # a twin pins no mlir-aie
    assert f"llvm-aie-version {TWIN_PEANO}" in toolchain_label(tc)


def test_the_floor_reads_the_major_version_and_leaves_an_unknown_one_alone(tmp_path):
    assert [f["key"] for f in FLOORS] == ["llvm_aie_version"] and FLOORS[0]["min_major"] == 22
    assert floor_refusal({"llvm_aie_version": "22.0.0.2026081201+046b11f9"}) is None
    assert floor_refusal({"llvm_aie_version": None}) is None  # nothing says it is below
    assert "21.1.0" in floor_refusal({"llvm_aie_version": "21.1.0"})
    # mlir_aie_hash: the HASH= line of the checkout's utils/clone-mlir-aie.sh, as the nightly reads it (e972f29's)
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "clone-mlir-aie.sh").write_text(
        "#!/usr/bin/env bash\nexport HASH=7e00b57955e108fe9d8e9419f5828a0c7e650858\nWHEEL_VERSION=1.4.2.dev16+g7e00b57\n")
    assert mlir_aie_hash(str(tmp_path)) == "7e00b57955e108fe9d8e9419f5828a0c7e650858"


def test_ledger_twin_refuses_a_peano_that_is_not_a_version(tmp_path):
    done = in_process(tmp_path / "ws", "twin", str(tmp_path / "t"), "--peano", "$(rm -rf /)")
    assert done.returncode != 0 and "is not a version" in done.stdout + done.stderr
    assert not (tmp_path / "t").exists()
