"""The twin's Q4NX dequant harness: prints what dequant_q4nx.py prints, and mlir-air's parser reads it back."""

import contextlib
import io

import numpy as np
import pytest

from npu_kernels.mlir_air.contract import check_checkout
from npu_kernels.mlir_air.table import load_harness_table, render_command
from npu_kernels.mlir_air.transcript import parse_harness_transcript
from npu_kernels.mlir_air.twin import harness, write_twin
from npu_kernels.numerics.bf16 import to_bf16
from npu_kernels.numerics.harness_inputs import harness_case


def run(argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = harness.main(argv)
    return rc, buf.getvalue()


def test_the_dequant_harness_prints_xrtrunners_lines_and_they_parse_back():
    rc, out = run(["dequant_q4nx"])
    assert rc == 0 and out.splitlines()[-1] == "PASS!"
    r = parse_harness_transcript(out)
    (o,) = r.outputs
    assert r.verdict == "PASS" and o.n_elements == 512 * 2048
    assert (o.rtol, o.atol) == (pytest.approx(0.1), pytest.approx(0.05))  # dequant_q4nx.py's run_test bounds
    assert 0 < o.mean_rel_L1 < 1e-2  # the script's reference keeps FP32 scales the kernel only sees in bf16


def test_the_harness_inputs_are_the_scripts_own_draw():
    case = harness_case("dequant_q4nx", {"M": 512, "K": 2048})
    np.random.seed(0)
    q = np.random.randint(0, 16, (512, 2048), np.uint8)
    assert np.array_equal(case.inputs["codes"], q.astype(np.float32))
    sc = np.random.uniform(0.005, 0.02, (512, 64)).astype(np.float32)
    mn = np.random.uniform(-0.1, 0.1, (512, 64)).astype(np.float32)
    assert np.array_equal(case.inputs["scale"], to_bf16(sc)) and np.array_equal(case.inputs["min"], to_bf16(mn))
    ref = q.astype(np.float32) * np.repeat(sc, 32, 1) + np.repeat(mn, 32, 1)  # FP32 scales and mins
    assert np.array_equal(case.reference, to_bf16(ref))


def test_the_script_takes_no_flags():
    with pytest.raises(SystemExit):
        run(["dequant_q4nx", "--m", "64"])


def test_the_harness_table_runs_the_script_at_its_one_shape_and_refuses_others():
    spec = load_harness_table().lookup("dequant_q4nx", None)
    cmd = render_command(spec.command, {"mlir_air": "/m", "M": 512, "K": 2048})
    assert cmd.startswith("cd /m/programming_examples/llms/llama32_1b_q4nx && ") and "python3 dequant_q4nx.py" in cmd
    assert "[ 512 = 512 ] && [ 2048 = 2048 ]" in cmd


def test_a_twin_carries_the_dequant_script_and_meets_the_contract(tmp_path):
    root = write_twin(tmp_path / "twin")
    assert (root / "programming_examples" / "llms" / "llama32_1b_q4nx" / "dequant_q4nx.py").is_file()
    q4 = [f for f in check_checkout(root) if f.check.file.endswith("dequant_q4nx.py")]
    assert [f.status for f in q4] == ["ok"]


def test_a_checkout_at_the_contract_commit_without_the_later_file_is_not_failed_for_it(tmp_path):
    (tmp_path / "programming_examples").mkdir()
    q4 = [f for f in check_checkout(tmp_path) if f.check.file.endswith("dequant_q4nx.py")]
    assert [f.status for f in q4] == ["n/a"] and not q4[0].fails
