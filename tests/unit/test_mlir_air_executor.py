"""The mlir-air executor against real subprocesses: a harness that is a script printing a recorded
transcript, a real flock held by another process, a real timeout."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from npu_kernels.numerics.executors.base import KERNEL_NAMES
from npu_kernels.mlir_air.executor import MlirAirExecutor
from npu_kernels.mlir_air.lock import DEVICE_RUN_TRIES, HarnessInconclusive, HarnessTimeout, NpuLockTimeout
from npu_kernels.mlir_air.table import HarnessConfigError, load_harness_table, render_command
from npu_kernels.mlir_air.output import TranscriptError
from ledger.events import KernelVerified, LayerDiagnosed, TokenGateChecked

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
FAKE = FIXTURES / "fake_harness.py"


def fake(transcript: str, *extra: str) -> str:
    """A harness command: the fake script printing one fixture transcript."""
    args = [sys.executable, str(FAKE), str(FIXTURES / transcript), *extra]
    return " ".join(shlex.quote(a) for a in args)


def toml_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'" if "'" not in s else '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.fixture
def make_executor(tmp_path):
    def build(entries: dict[str, str], model: dict[str, str] | None = None, **kwargs) -> MlirAirExecutor:
        lines = []
        for key, command in entries.items():
            lines += [f'[harness."{key}"]', f"command = {toml_string(command)}", "timeout_s = 20",
                      f'[harness."{key}".defaults]', "tile_n = 128", "herd_n = 4"]
        if model:
            lines.append("[model]")
            lines += [f"{k} = {toml_string(v)}" for k, v in model.items()]
            lines.append('report_dirs = ["{model_dir}/reports"]')
        table = tmp_path / "harnesses.toml"
        table.write_text("\n".join(lines) + "\n")
        kwargs.setdefault("lock_path", str(tmp_path / "npu.lock"))
        kwargs.setdefault("lock_timeout_s", 5)
        return MlirAirExecutor(harness_table=table, mlir_air_dir=str(tmp_path), **kwargs)

    return build


def test_a_passing_harness_run_is_parsed_with_its_provenance(make_executor):
    ex = make_executor({"gemm": fake("gemm_pass.txt") + " # M={M} K={K} N={N} TILE_N={tile_n}"})
    run = ex.run_harness("gemm", {"M": 2048, "K": 2048, "N": 2048}, {"tile_m": 64, "herd_m": 8}, "bf16-out-high")
    assert run.result.verdict == "PASS" and run.returncode == 0
    assert run.command.endswith("# M=2048 K=2048 N=2048 TILE_N=128")
    assert run.transcript == (FIXTURES / "gemm_pass.txt").read_text()
    prov = run.provenance
    assert prov["command"] == run.command and len(prov["output_sha256"]) == 64 and prov["host"]
    assert set(prov["toolchain"]) == {"mlir_air_commit", "mlir_air_contract", "aie_opt", "air_opt", "xrt_smi", "standin",
                                      "llvm_aie_version", "mlir_aie_hash"}  # the versions the nightly records (#38)
    assert prov["toolchain"]["mlir_air_commit"] is None  # tmp_path is no git checkout: recorded as absent
    assert "device" in prov
    kwargs = run.kernel_verified_kwargs()
    event = KernelVerified(**kwargs)
    assert (event.source, event.executor, event.verdict, event.mismatches) == ("harness", "mlir-air", "PASS", 0)
    assert event.herd == [8, 4] and event.tiles_in_flight == 32


def test_a_failing_harness_run_is_a_fail_not_an_error(make_executor):
    ex = make_executor({"gemm": fake("gemm_fail_mismatches.txt", "--exit", "2")})
    run = ex.run_harness("gemm", {"M": 2048, "K": 2048, "N": 896})
    assert (run.result.verdict, run.returncode, run.result.kernel_verified_fields()["mismatches"]) == ("FAIL", 2, 786432)


@pytest.mark.parametrize(
    "transcript, message",
    [
        ("garbage_compiler_log.txt", "matches none of the mlir-air harness formats"),
        ("truncated.txt", "ends without a verdict line"),
        ("contradictory.txt", "contradicts itself"),
    ],
)
def test_garbage_truncated_and_contradictory_runs_raise_naming_the_command(make_executor, transcript, message):
    ex = make_executor({"gemm": fake(transcript)})
    with pytest.raises(TranscriptError, match=message) as info:
        ex.run_harness("gemm", {"M": 1, "K": 1, "N": 1})
    assert str(FAKE.name) in str(info.value) and transcript in str(info.value)
    assert info.value.transcript == (FIXTURES / transcript).read_text()


def test_a_pass_printed_by_a_failing_process_is_not_a_pass(make_executor):
    ex = make_executor({"gemm": fake("gemm_pass.txt", "--exit", "1")})
    with pytest.raises(TranscriptError, match="exited with status 1"):
        ex.run_harness("gemm", {"M": 1, "K": 1, "N": 1})


def test_a_hanging_harness_is_killed_at_its_timeout_on_each_fresh_try_then_inconclusive(make_executor):
    ex = make_executor({"flash_attention": fake("truncated.txt", "--sleep", "60")})
    with pytest.raises(HarnessTimeout, match="the last timed out after 0.5 s") as info:
        ex.run_harness("flash_attention", {}, timeout_s=0.5)
    assert isinstance(info.value, HarnessInconclusive) and info.value.tries == DEVICE_RUN_TRIES
    assert "[precision] Output 0" in info.value.transcript  # the last try's partial transcript, kept for triage


def test_the_npu_lock_is_really_taken(make_executor, tmp_path):
    lock = tmp_path / "held.lock"
    holder = subprocess.Popen([sys.executable, str(FIXTURES / "hold_lock.py"), str(lock)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        ex = make_executor({"gemm": fake("gemm_pass.txt")}, lock_path=str(lock), lock_timeout_s=0.3)
        with pytest.raises(NpuLockTimeout, match="could not take the NPU lock .*held.lock within 0.3 s"):
            ex.run_harness("gemm", {"M": 1, "K": 1, "N": 1})
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert ex.run_harness("gemm", {"M": 1, "K": 1, "N": 1}).result.verdict == "PASS"


def test_the_harness_holds_the_lock_while_it_runs(make_executor, tmp_path):
    lock = tmp_path / "npu.lock"
    ex = make_executor({"gemm": fake("gemm_pass.txt", "--probe-lock", str(lock))}, lock_path=str(lock))
    run = ex.run_harness("gemm", {"M": 1, "K": 1, "N": 1})
    assert run.transcript.startswith("HELD")


def test_leaf_kernel_methods_point_to_run_harness():
    ex = MlirAirExecutor(mlir_air_dir="/nonexistent")
    assert ex.name == "mlir-air"
    for kernel in KERNEL_NAMES:
        with pytest.raises(NotImplementedError, match="runs whole harnesses; use run_harness"):
            getattr(ex, kernel)(None, None)


# --- the harness table --------------------------------------------------------------------------------


def test_the_default_table_fills_the_mlir_air_make_variables():
    ex = MlirAirExecutor(mlir_air_dir="/src/mlir air")
    _, cmd, tile = ex.harness_command("gemm", {"M": 2048, "K": 8192, "N": 2048}, {"tile_n": 64})
    assert cmd.startswith("make -C '/src/mlir air'/programming_examples/matrix_multiplication/bf16_in_bf16_out run ")
    assert "M=2048 K=8192 N=2048 TILE_M=64 TILE_K_L2=256 TILE_K_L1=32 TILE_N=64 HERD_M=8 HERD_N=4" in cmd
    assert tile["tile_n"] == 64 and "perf_iters" not in tile
    _, cmd, _ = ex.harness_command("gemm", {"M": 64, "K": 64, "N": 64}, contract="f32-out")
    assert "bf16_in_fp32_out" in cmd and "CODEGEN=external" in cmd


def test_the_planned_flash_attention_row_renders_with_heads_per_unroll_dividing_the_heads():
    """The planner's spelling (heads_q / heads_kv) fills NUM_HEADS / NUM_KV_HEADS; SmolLM2's 9 query heads get
    --num-heads-per-unroll 1 through EXTRA_PY_FLAGS (attn_npu2.py asserts num_heads % it == 0; its default is 2)."""
    from npu_kernels.model.plan import plan
    from npu_kernels.model.config import ModelConfig

    smol = ModelConfig(n_layers=30, emb_dim=576, n_heads=9, n_kv_heads=3, head_dim=64, hidden_dim=1536,
                       vocab_size=49152)
    row = next(r for r in plan(smol) if r.kernel == "flash_attention")
    ex = MlirAirExecutor(mlir_air_dir="/src")
    _, cmd, tile = ex.harness_command(row.kernel, row.shape, row.plan.tile)
    assert ("LQ=2048 LK=2048 LQP=256 LKP=64 DK=64 DV=64 NUM_HEADS=9 NUM_KV_HEADS=3 NUM_Q_TILES=4 "
            "EXTRA_PY_FLAGS='--causal --num-heads-per-unroll 1 --num-q-tiles 4 --num-cascade-stages 4'") in cmd
    assert row.shape["heads_q"] % tile["num_heads_per_unroll"] == 0
    assert "--perf-iters" not in cmd  # precision and latency are separate runs
    timing = ex.latency_command(row.kernel, row.shape, row.plan.tile)
    assert timing.endswith("EXTRA_PY_FLAGS='--causal --num-heads-per-unroll 1 --num-q-tiles 4 --num-cascade-stages 4 "
                           "--perf-iters 20'")


def test_an_unlisted_contract_or_kernel_is_an_error_not_a_fallback():
    ex = MlirAirExecutor(mlir_air_dir="/src")
    with pytest.raises(HarnessConfigError, match="no mlir-air harness for 'gemm@bf16-out-medium'"):
        ex.harness_command("gemm", {"M": 1, "K": 1, "N": 1}, contract="bf16-out-medium")
    with pytest.raises(HarnessConfigError, match="no mlir-air harness for 'softmax'"):
        ex.harness_command("softmax", {})


def test_a_missing_placeholder_names_the_known_variables():
    with pytest.raises(HarnessConfigError, match=r"no value for placeholder \{K\}.*known: m, n"):
        render_command("run M={M} K={K}", {"M": 1, "n": 2})


def test_mlir_air_dir_must_be_set_for_commands_that_need_it(monkeypatch):
    monkeypatch.delenv("MLIR_AIR_DIR", raising=False)
    ex = MlirAirExecutor()
    with pytest.raises(HarnessConfigError, match="set MLIR_AIR_DIR"):
        ex.harness_command("gemv", {"M": 2048, "K": 2048})


def test_a_user_table_from_the_environment_overrides_one_field(tmp_path, monkeypatch):
    user = tmp_path / "mine.toml"
    user.write_text('[harness.gemv]\ncommand = "echo M={M} TILE_M={tile_m}"\n[harness.gemv.defaults]\ntile_m = 2\n')
    monkeypatch.setenv("NPU_LEDGER_HARNESSES", str(user))
    table = load_harness_table()
    spec = table.harnesses["gemv"]
    assert spec.command == "echo M={M} TILE_M={tile_m}"
    assert spec.defaults == {"tile_m": 2, "m_input": 1, "herd_m": 4}
    assert "gemm" in table.harnesses and table.sources[-1] == str(user)


def test_a_broken_user_table_is_a_config_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[harness.gemm\n")
    with pytest.raises(HarnessConfigError, match="not valid TOML"):
        load_harness_table(bad)
    with pytest.raises(HarnessConfigError, match="cannot read harness table"):
        load_harness_table(tmp_path / "missing.toml")


# --- model verify / diagnosis -------------------------------------------------------------------------


def test_model_verify_parses_the_transcript_and_the_report_it_names(make_executor, tmp_path):
    model_dir = tmp_path / "smollm2"
    model_dir.mkdir()
    report = "{model_dir}/reports/verify_topk_token_20260614-113040.json"
    ex = make_executor({}, model={
        "verify": fake("verify_fail.txt", "--copy", str(FIXTURES / "verify_fail_report.json"), "REPORT", "--exit", "2")
        .replace("REPORT", report) + " #",
    })
    run = ex.run_model_verify(model_dir)
    assert run.result.verdict == "FAIL" and run.returncode == 2
    assert run.report_path.endswith("verify_topk_token_20260614-113040.json")
    events = [TokenGateChecked(**f, context="verify-model") for f in run.result.token_gate_fields()]
    assert [e.passed for e in events] == [False, True]
    assert run.provenance["output_sha256"]


def test_model_verify_full_with_make_vars(make_executor, tmp_path):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    report = "{model_dir}/reports/verify_topk_token_20260614-101502.json"
    ex = make_executor({}, model={
        "verify_full": fake("verify_pass.txt", "--copy", str(FIXTURES / "verify_pass_report.json"), report) + " #",
    })
    run = ex.run_model_verify(model_dir, full=True, make_vars={"MODEL": "base"})
    assert run.command.endswith("# MODEL=base") and run.result.verdict == "PASS"
    assert len(run.result.prompts) == 2


def test_model_verify_without_a_fresh_report_is_an_error(make_executor, tmp_path):
    model_dir = tmp_path / "m"
    (model_dir / "reports").mkdir(parents=True)
    stale = model_dir / "reports" / "verify_topk_token_20200101-000000.json"
    stale.write_text((FIXTURES / "verify_pass_report.json").read_text())
    os.utime(stale, (1_000_000_000, 1_000_000_000))  # written long before this run
    ex = make_executor({}, model={"verify": fake("verify_pass.txt")})
    with pytest.raises(TranscriptError, match="wrote no report JSON"):
        ex.run_model_verify(model_dir)


def test_a_crashed_model_run_reports_the_transcript_problem_first(make_executor, tmp_path):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    ex = make_executor({}, model={"verify": fake("truncated.txt", "--exit", "1")})
    with pytest.raises(TranscriptError, match=r"failed \(exit status 1\) before its verdict: \[precision\] Output 0"):
        ex.run_model_verify(model_dir)  # what it printed last, not the format it failed to match
    ex = make_executor({}, model={"verify": fake("truncated.txt")})
    with pytest.raises(TranscriptError, match="matches none of the mlir-air verify formats"):
        ex.run_model_verify(model_dir)  # exit status 0: the format is the problem


def test_model_diagnosis_maps_layers(make_executor, tmp_path):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    # The transcript names a report that does not exist; the newest report written during the run is used.
    ex = make_executor({}, model={"diagnosis": fake(
        "diagnosis.txt", "--copy", str(FIXTURES / "diagnosis_report.json"),
        "{model_dir}/reports/diagnosis_20260614-120000.json")})
    run = ex.run_model_diagnosis(model_dir)
    assert run.report_path.endswith("diagnosis_20260614-120000.json")
    rows = run.result.layers
    assert len(rows) == 30 and LayerDiagnosed(**rows[-1]).layer == 29


def test_a_harness_whose_checked_run_cannot_time_itself_takes_latency_from_its_profile_run(tmp_path):
    """GEMV's `make run` prints no Latency line; `make profile`'s C++ timer prints `Avg NPU GEMV time`."""
    profile = FIXTURES / "profile" / "gemv_profile.txt"
    table = tmp_path / "t.toml"
    table.write_text(f"[harness.gemv]\ncommand = {toml_string(fake('gemm_pass.txt'))}\n"
                     f"latency_command = {toml_string(fake(str(profile)))}\nlatency_format = \"profile\"\n")
    ex = MlirAirExecutor(harness_table=table, mlir_air_dir=str(tmp_path), lock_path=str(tmp_path / "l"))
    run = ex.run_harness("gemv", {"M": 2048, "K": 8192})
    assert run.latency_us == 912.5
    rec = run.provenance["latency_run"]
    assert rec["format"] == "profile" and rec["returncode"] == 0 and len(rec["output_sha256"]) == 64
    assert run.kernel_verified_kwargs()["latency_us"] == 912.5
    broken = tmp_path / "b.toml"
    broken.write_text(f"[harness.gemv]\ncommand = {toml_string(fake('gemm_pass.txt'))}\n"
                      f"latency_command = {toml_string(fake('garbage_compiler_log.txt', '--exit', '2'))}\n"
                      "latency_format = \"profile\"\n")
    run = MlirAirExecutor(harness_table=broken, mlir_air_dir=str(tmp_path), lock_path=str(tmp_path / "l")).run_harness(
        "gemv", {"M": 2048, "K": 8192})
    assert run.result.verdict == "PASS" and run.latency_us is None  # a failed timing run never changes the verdict
    assert "exit status 2" in run.provenance["latency_run"]["error"]


def test_harness_gemm_rows_carry_the_registry_method_and_tier(make_executor):
    ex = make_executor({"gemm": fake("gemm_pass.txt"), "gemm@bf16-out-low": fake("gemm_pass.txt")})
    high = ex.run_harness("gemm", {"M": 2048, "K": 2048, "N": 2048}, {"method": "auto"}, "bf16-out-high")
    assert high.method_tier() == ("fused-cast", "high")  # 2048^3 >= 4e9 (run.py:1147-1151)
    small = ex.run_harness("gemm", {"M": 2048, "K": 576, "N": 576}, {"method": "auto"}, "bf16-out-high")
    assert small.method_tier() == ("drain", "high")
    low = ex.run_harness("gemm", {"M": 2048, "K": 2048, "N": 2048}, None, "bf16-out-low")
    assert low.kernel_verified_kwargs()["method"] == "direct" and low.kernel_verified_kwargs()["tier"] == "low"
