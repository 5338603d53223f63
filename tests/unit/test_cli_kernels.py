"""`ledger kernel run` through click's CliRunner, and the run_kernel result it prints."""

import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from handlers.cli.kernels import commands, kernel
from npu_kernels.numerics.executors.emulated import EmulatedExecutor
from npu_kernels.numerics.run import EVENT_FIELDS, run_kernel
from ledger.events import KernelVerified

SMALL_GEMM = "M=64,K=2048,N=64"


def _run(*args):
    return CliRunner().invoke(kernel, list(args))


def test_the_module_exports_the_kernel_group():
    assert commands == [kernel]


def test_kernel_run_prints_a_short_table_and_exits_zero_on_pass():
    res = _run("run", "gemm", "--shape", SMALL_GEMM)
    assert res.exit_code == 0, res.output
    assert "verdict" in res.output and "PASS" in res.output
    assert "NPU2 measured" in res.output and "tiles" in res.output


def test_kernel_run_json_holds_the_result_fields():
    res = _run("run", "silu_mul", "--shape", "N=8192", "--executor", "torch", "--json", "--seed", "3")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["kernel"] == "silu_mul" and d["executor"] == "torch" and d["verdict"] == "PASS"
    assert d["shape"] == {"N": 8192} and set(EVENT_FIELDS) <= set(d)


def test_contract_target_and_tile_options_reach_the_run():
    res = _run("run", "gemm", "--shape", SMALL_GEMM, "--contract", "bf16-out-low", "--target", "npu1",
               "--tile", "tile_m=16,tile_n=16,herd_n=4", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["contract"] == "bf16-out-low" and d["target"] == "npu1" and d["atol"] == 4e-3
    assert d["tile"]["tile_m"] == 16 and d["herd"] == [4, 4] and d["method"] == "direct"


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "matmul", "--shape", "M=1"], "unknown kernel 'matmul'"),
        (["run", "gemm", "--shape", "M=64,K=64"], "missing N"),
        (["run", "gemm", "--shape", "M=64;K=64"], "not an integer"),
        (["run", "gemm", "--shape", "M,K=64"], "expected key=value"),
        (["run", "gemm", "--shape", SMALL_GEMM, "--tile", "tile_n=48"], "gemm.N_divisible_by_tile_n_herd_n"),
        (["run", "gemm", "--shape", SMALL_GEMM, "--contract", "bf8"], "unknown contract"),
    ],
)
def test_bad_input_is_one_clear_line_and_a_non_zero_exit(args, message):
    res = _run(*args)
    assert res.exit_code != 0
    assert message in res.output
    assert "Traceback" not in res.output
    assert len([line for line in res.output.splitlines() if line.strip()]) == 1


def test_a_forced_illegal_tile_runs_and_exits_one_with_fail():
    res = _run("run", "gemm", "--shape", "M=256,K=1024,N=256", "--tile", "tile_n=48", "--force-tile", "--json")
    assert res.exit_code == 1
    d = json.loads(res.output)
    assert d["verdict"] == "FAIL" and d["mismatches"] > 0


def test_kernel_list_names_every_kernel():
    res = _run("list")
    assert res.exit_code == 0 and "flash_attention" in res.output and "bf16-out-low" in res.output


def test_run_kernel_fields_build_a_kernel_verified_event():
    r = run_kernel("rope", {"rows": 64, "head_dim": 64}, seed=1)
    e = KernelVerified(**r.event_fields(), source="emulated", role="Q rope", stage="decode")
    assert e.verdict == "PASS" and e.kernel == "rope" and e.tiles_in_flight == 8
    assert e.worst_ratio is not None and e.worst_ratio <= 1 and e.ref_max_abs > 0
    assert set(r.event_fields()) == set(EVENT_FIELDS)
    assert r.seconds > 0 and r.gflops > 0 and math.isfinite(r.mean_rel_L1)


def test_run_kernel_accepts_an_executor_instance():
    ex = EmulatedExecutor("npu1")
    r = run_kernel("eltwise_add", {"N": 4096}, executor=ex)
    assert r.executor == "emulated" and r.target == "npu1" and r.tiles_target == 4
    assert ex.timer.calls["eltwise_add"] == 1


def test_kernel_run_with_harness_inputs_prints_npu2s_published_512_cubed_figures():
    res = _run("run", "gemm", "--shape", "M=512,K=512,N=512", "--contract", "f32-out", "--inputs", "harness")
    assert "9.273e-03" in res.output and "1.969e-03 / 1.108e+03" in res.output  # mlir-air PR #1841's line


def test_kernel_run_with_harness_inputs_prints_npu2s_published_rope_figures_for_256_rows():
    res = _run("run", "rope", "--shape", "rows=256,head_dim=64", "--inputs", "harness")
    # RoPE_bf16.md:187 publishes 2.8e-3 | abs_err max 3.1e-2 for 256x64
    assert res.exit_code == 0 and "2.778e-03" in res.output and "3.125e-02 / 7.812e-03" in res.output


def test_kernel_run_on_mlir_air_runs_the_harness_command_and_prints_what_it_printed(tmp_path, monkeypatch):
    """`--executor mlir-air` (the registry's reproduce hint) is accepted: a real subprocess stands in for make."""
    import shlex
    import sys
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
    command = " ".join(shlex.quote(a) for a in (sys.executable, str(fixtures / "fake_harness.py"),
                                                 str(fixtures / "gemm_pass.txt")))
    table = tmp_path / "t.toml"
    table.write_text(f"[harness.gemm]\ncommand = '{command} # M={{M}}'\n")
    monkeypatch.setenv("NPU_LEDGER_HARNESSES", str(table))
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "lock"))
    r = _run("run", "gemm", "--shape", "M=2048,K=2048,N=2048", "--executor", "mlir-air", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output.strip().splitlines()[-1])  # structlog's progress lines come first under CliRunner
    assert (d["executor"], d["verdict"], d["method"], d["tier"]) == ("mlir-air", "PASS", "fused-cast", "high")
    assert d["latency_us"] == 2017.3
    monkeypatch.setenv("NPU_LEDGER_HARNESSES", str(tmp_path / "missing.toml"))
    bad = _run("run", "gemm", "--shape", "M=2048,K=2048,N=2048", "--executor", "mlir-air")
    assert bad.exit_code == 1 and bad.output.count("\n") == 1 and "cannot read harness table" in bad.output


# --- the "NPU2 measured" comparison line cites the exact shape's registry row when there is one (issue #24) ----

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream_registry"
IN_REGISTRY = "M=64,K=720,N=32"  # GEMM_bf16_in_bf16_out.json: best.high drain, mean_rel_L1 0.00901


def _mean_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("mean_rel_L1"))


def test_the_comparison_cites_mlir_air_dirs_row_for_the_exact_shape(tmp_path, monkeypatch):
    details = tmp_path / "programming_examples" / "kernel_registry" / "details"
    details.mkdir(parents=True)
    shutil.copy(UPSTREAM / "GEMM_bf16_in_bf16_out.json", details)
    monkeypatch.setenv("MLIR_AIR_DIR", str(tmp_path))
    res = _run("run", "gemm", "--shape", IN_REGISTRY, "--contract", "bf16-out-high")
    assert res.exit_code == 0, res.output
    line = _mean_line(res.output)
    assert "NPU2 measured 9.0e-03 at this exact shape" in line  # the row's 0.00901, not the catalog's 9.7e-3
    assert "GEMM_bf16_in_bf16_out.json" in line and "64x720x32 best.high drain" in line
    assert "catalog" not in line


def test_without_a_row_the_comparison_says_it_is_the_catalogs_figure_and_where(monkeypatch):
    monkeypatch.delenv("MLIR_AIR_DIR", raising=False)
    res = _run("run", "gemm", "--shape", IN_REGISTRY, "--contract", "bf16-out-high")
    line = _mean_line(res.output)
    assert "the catalog's figure at another shape" in line and "at 2048x2048x2048" in line
    assert "no NPU2 row of gemm M=64,K=720,N=32" in line and "exact shape" not in line


def test_the_comparison_cites_the_ledgers_imported_row_with_its_seq(tmp_path, monkeypatch):
    from handlers.cli import cli

    monkeypatch.delenv("MLIR_AIR_DIR", raising=False)
    runner = CliRunner()
    ws = ["--workspace", str(tmp_path / "ws")]
    assert runner.invoke(cli, ws + ["registry", "import", str(UPSTREAM)]).exit_code == 0
    res = runner.invoke(cli, ws + ["kernel", "run", "gemm", "--shape", IN_REGISTRY])
    assert res.exit_code == 0, res.output
    line = _mean_line(res.output)
    assert "at this exact shape: ledger seq " in line and "64x720x32 best.high drain 37 GFLOP/s" in line
    # a kernel the imported registry has no row of keeps the catalog's figure, saying so
    res = runner.invoke(cli, ws + ["kernel", "run", "rmsnorm", "--shape", "M=1,N=2048"])
    assert "catalog's figure at another shape" in _mean_line(res.output)
