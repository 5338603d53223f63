"""Every format mlir-air's XRTRunner prints (python/air/backend/xrt_runner.py) and its `make profile` timers,
parsed as mlir-air means them; a traceback or a compile-only run is refused, and `ledger record harness` then
appends nothing."""

from pathlib import Path

import pytest

from npu_kernels.mlir_air.profile import parse_profile_output
from npu_kernels.mlir_air.output import TranscriptError
from npu_kernels.mlir_air.transcript import parse_harness_transcript
from ledger.events import KernelVerified
from statemachine.checks import atol_artifact

PROFILE = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "profile"
PREC = ("[precision] Output {i} ({n} elements): mean_rel_L1={l1} | rel_err max=1.000e+00 | abs_err max={ab} | "
        "rtol=1.6e-02 atol=1.5e-03")


def prec(n=4194304, l1="9.312e-03", ab="2.441e-03", i=0):
    return PREC.format(i=i, n=n, l1=l1, ab=ab)


def fail_block(n_bad, listed, total=4194304, numpy2=True, i=0):
    lines = [f"ERROR: Output {i} does not meet expected output.", "Shape: (2048, 2048)",
             f"Mismatches: {n_bad} / {total} elements ({100 * n_bad / total:.2f}%)",
             f"First {min(20, n_bad)} mismatched locations:"]
    for j, (e, a) in enumerate(listed):
        idx = f"(np.int64(0), np.int64({j}))" if numpy2 else f"(0, {j})"
        lines.append(f"  Index {idx}: expected={e}, actual={a}, diff={abs(a - e)}")
    if n_bad > 20:
        lines.append(f"  ... and {n_bad - 20} more mismatches")
    return lines


def text(*lines):
    return "\n".join(lines) + "\n"


def test_a_pass_with_latency_and_throughput_and_one_without_latency():
    with_lat = parse_harness_transcript(text("Latency (us): 2017.3 | Throughput: 8.515000e+03 GFLOP/s", prec(), "PASS!"))
    assert (with_lat.verdict, with_lat.latency_us, with_lat.gflops) == ("PASS", 2017.3, 8515.0)
    plain = parse_harness_transcript(text(prec(), "PASS!"))
    assert (plain.verdict, plain.latency_us, plain.gflops) == ("PASS", None, None)
    lat_only = parse_harness_transcript(text("Latency (us): 155.0", prec(2048 * 128), "PASS!"))
    assert (lat_only.latency_us, lat_only.gflops) == (155.0, None)


@pytest.mark.parametrize("numpy2", [True, False], ids=["numpy2-np.int64-tuples", "numpy1-plain-tuples"])
def test_element_fail_index_lines_give_the_mismatch_maxima_when_every_mismatch_is_listed(numpy2):
    listed = [(0.0001, 0.0018), (-0.0002, 0.0015), (0.00005, -0.0016)]
    r = parse_harness_transcript(text(prec(), *fail_block(3, listed, numpy2=numpy2), "failed."))
    f = r.kernel_verified_fields()
    assert (r.verdict, f["mismatches"], f["n_elements"]) == ("FAIL", 3, 4194304)
    assert f["mismatch_ref_max"] == pytest.approx(0.0002)
    assert f["mismatch_err_max"] == pytest.approx(0.0017)
    # the near-zero atol artifact rule applies to this hardware row as to an emulated one
    ev = KernelVerified(kernel="gemm", shape={"M": 2048, "K": 576, "N": 2048}, contract="bf16-out-high",
                        executor="mlir-air", source="harness", **{k: v for k, v in f.items()})
    assert atol_artifact(ev) and "near-zero atol artifact: 3/4194304" in atol_artifact(ev)


def test_more_than_twenty_mismatches_leave_the_maxima_unknown_not_a_lower_bound():
    listed = [(0.5, 0.75)] * 20
    r = parse_harness_transcript(text(prec(), *fail_block(786432, listed), "failed."))
    f = r.kernel_verified_fields()
    assert f["mismatches"] == 786432 and f["mismatch_ref_max"] is None and f["mismatch_err_max"] is None
    assert r.outputs[0].listed == 20 and r.outputs[0].listed_err_max == pytest.approx(0.25)


def test_listed_locations_that_disagree_with_the_count_are_refused():
    with pytest.raises(TranscriptError, match="lists 2 mismatch locations and 0 more, but reports 3"):
        parse_harness_transcript(text(prec(), *fail_block(3, [(0.1, 0.2), (0.1, 0.3)]), "failed."))


def test_two_outputs_the_second_failing():
    listed = [(1.0, 1.5)]
    r = parse_harness_transcript(text(prec(1024, i=0), prec(1024, i=1), *fail_block(1, listed, total=1024, i=1),
                                      "failed."))
    assert [o.passed for o in r.outputs] == [True, False] and r.failing_output == 1
    assert r.kernel_verified_fields()["mismatch_ref_max"] == 1.0


def test_nan_and_inf_outputs_fail_with_non_finite_figures():
    r = parse_harness_transcript(text(prec(l1="nan", ab="nan"),
                                      *fail_block(1, [(0.5, float("nan"))], total=4194304), "failed."))
    f = r.kernel_verified_fields()
    assert r.verdict == "FAIL" and f["mean_rel_L1"] != f["mean_rel_L1"]  # NaN kept
    assert f["mismatch_err_max"] != f["mismatch_err_max"]
    ev = KernelVerified(kernel="gemm", shape={"M": 2048, "K": 576, "N": 2048}, contract="bf16-out-high",
                        executor="mlir-air", **f)
    assert atol_artifact(ev) is None  # a NaN is never the atol artifact
    inf = parse_harness_transcript(text(prec(l1="inf", ab="inf"), *fail_block(1, [(0.5, float("inf"))]), "failed."))
    assert inf.kernel_verified_fields()["max_abs"] == float("inf")
    with pytest.raises(TranscriptError, match="non-finite"):
        parse_harness_transcript(text(prec(l1="nan", ab="nan"), "PASS!"))


def test_a_correlation_failure():
    r = parse_harness_transcript(text(prec(), "Output 0 correlation: 0.020000 (threshold: 0.99)",
                                      "ERROR: Output 0 correlation 0.020000 below threshold 0.99", "failed."))
    assert r.verdict == "FAIL" and r.outputs[0].correlation == pytest.approx(0.02)
    assert r.kernel_verified_fields()["mismatches"] == 0


def test_a_sampled_check_is_marked_as_sampled():
    lines = fail_block(2, [(0.1, 0.3), (0.2, 0.5)], total=4096)
    lines.insert(2, "Stochastic check: 4096 sampled elements")
    r = parse_harness_transcript(text(prec(4096), *lines, "failed."))
    assert r.outputs[0].sampled == 4096 and r.kernel_verified_fields()["n_elements"] == 4096


@pytest.mark.parametrize("body, message", [
    (["Traceback (most recent call last):", '  File "attn_npu2.py", line 155, in build_module',
      "AssertionError: num_heads (9) must be divisible by num_heads_per_unroll (2)"],
     r"raised a Python exception before its verdict \('AssertionError: num_heads \(9\)"),
    (["Compiling air_project/aie.air.mlir ...", "Compile-only done."], "only compiled"),
    (["Compilation complete."], "only compiled"),
])
def test_a_traceback_or_a_compile_only_run_is_refused(body, message):
    with pytest.raises(TranscriptError, match=message):
        parse_harness_transcript(text(*body))


def test_record_harness_refuses_a_traceback_and_appends_nothing(tmp_path):
    from handlers.record import record_harness
    from ledger import open_ledger
    from ledger.events import ArchitectureAssessed, DeploymentRequested

    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    lg.append("deployment:m", 0, [DeploymentRequested(model_path=str(tmp_path), name="m", executor="mlir-air"),
                                  ArchitectureAssessed(architecture="LlamaForCausalLM", in_scope=True)])
    before = len(lg.read_stream("deployment:m"))
    tb = text("Traceback (most recent call last):", "AssertionError: K (2000) must be divisible by 64 (vector width)")
    with pytest.raises(TranscriptError):
        record_harness(lg, "m", kernel="gemv", shape="M=2048,K=2000", contract=None, text=tb, file_label="t")
    with pytest.raises(TranscriptError):
        record_harness(lg, "m", kernel="gemm", shape="M=64,K=64,N=64", contract=None, text="Compile-only done.\n",
                       file_label="t")
    assert len(lg.read_stream("deployment:m")) == before


def test_make_profile_outputs_are_parsed():
    gemv = parse_profile_output((PROFILE / "gemv_profile.txt").read_text())
    assert (gemv.what, gemv.latency_us, gemv.min_us, gemv.max_us, gemv.gflops) == ("GEMV", 912.5, 900, 930, 18.3864)
    norm = parse_profile_output((PROFILE / "rmsnorm_profile.txt").read_text())
    assert (norm.what, norm.latency_us, norm.min_us, norm.bandwidth_gbps) == ("RMSNorm", 900.0, 800.0, 21.0)
    fa = parse_profile_output((PROFILE / "fa_profile.txt").read_text())
    assert fa.median_us == 21600 and fa.raw_us == (21500, 21600, 21700) and fa.gflops == 3181.2
    elt = parse_profile_output((PROFILE / "eltwise_profile.txt").read_text())
    assert (elt.latency_us, elt.bandwidth_gbps, elt.checked, elt.incorrect) == (350.2, 17.96, 1048576, 0)
    with pytest.raises(TranscriptError, match="none of mlir-air's `make profile` formats"):
        parse_profile_output("PASS!\n")
    with pytest.raises(TranscriptError, match="outside its min"):
        parse_profile_output("Avg NPU GEMV time: 5us.\nMin NPU GEMV time: 6us.\nMax NPU GEMV time: 7us.\n")
