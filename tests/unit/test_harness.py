"""The mlir-air transcript parsers: real formats parse, garbage / truncated / contradictory text raises."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from npu_kernels.mlir_air.diagnosis_report import parse_diagnosis_output, parse_diagnosis_report
from npu_kernels.mlir_air.output import TranscriptError, sha256_text
from npu_kernels.mlir_air.transcript import parse_harness_transcript
from npu_kernels.mlir_air.verify_report import parse_verify_output
from ledger.events import KernelVerified, LayerDiagnosed, TokenGateChecked

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def report(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


# --- standalone harness -------------------------------------------------------------------------------


def test_a_passing_gemm_transcript_gives_its_numbers_and_thresholds():
    r = parse_harness_transcript(text("gemm_pass.txt"))
    assert r.verdict == "PASS"
    (out,) = r.outputs
    assert (out.index, out.n_elements, out.mismatches, out.passed) == (0, 4194304, 0, True)
    assert out.mean_rel_L1 == pytest.approx(9.312e-3)
    assert out.max_rel == pytest.approx(3.906e-1)
    assert out.max_abs == pytest.approx(6.104e-4)
    assert (out.rtol, out.atol) == (pytest.approx(1.6e-2), pytest.approx(1.5e-3))
    assert r.latency_us == pytest.approx(2017.3)
    assert r.gflops == pytest.approx(8516.269)


def test_kernel_verified_fields_build_a_valid_event():
    fields = parse_harness_transcript(text("gemm_pass.txt")).kernel_verified_fields()
    assert set(fields) == {
        "verdict", "rtol", "atol", "mean_rel_L1", "max_abs", "max_rel", "mismatches", "n_elements", "latency_us", "gflops",
        "mismatch_ref_max", "mismatch_err_max",
    }
    event = KernelVerified(kernel="gemm", shape={"M": 2048, "K": 2048, "N": 2048}, contract="bf16-out-high",
                           executor="mlir-air", source="harness", **fields)
    assert event.verdict == "PASS" and event.mismatches == 0


def test_a_failing_gemm_transcript_records_the_mismatch_count():
    r = parse_harness_transcript(text("gemm_fail_mismatches.txt"))
    assert r.verdict == "FAIL"
    assert r.failing_output == 0
    (out,) = r.outputs
    assert (out.passed, out.mismatches, out.n_elements, out.shape) == (False, 786432, 1835008, "(2048, 896)")
    assert r.kernel_verified_fields()["mismatches"] == 786432
    assert "786432 of 1835008" in r.failure_reasons[0]


def test_rmsnorm_latency_without_throughput_is_read():
    r = parse_harness_transcript(text("rmsnorm_pass.txt"))
    assert (r.verdict, r.latency_us, r.gflops) == ("PASS", pytest.approx(182.4), None)
    assert r.outputs[0].atol == pytest.approx(5e-2)


def test_flash_attention_pass_reads_latency_and_throughput():
    r = parse_harness_transcript(text("flash_attention_pass.txt"))
    assert r.verdict == "PASS"
    assert r.latency_us == pytest.approx(10542.6) and r.gflops == pytest.approx(1629.567)
    assert r.outputs[0].atol == pytest.approx(0.1)


def test_a_nan_output_is_a_failure_with_nan_figures():
    r = parse_harness_transcript(text("nan_output.txt"))
    assert r.verdict == "FAIL"
    fields = r.kernel_verified_fields()
    assert math.isnan(fields["mean_rel_L1"]) and math.isnan(fields["max_abs"])
    assert fields["mismatches"] == fields["n_elements"] == 2097152


def test_a_multi_output_harness_reports_the_worst_figures_and_summed_counts():
    r = parse_harness_transcript(text("multi_output_pass.txt"))
    assert [o.index for o in r.outputs] == [0, 1, 2]
    fields = r.kernel_verified_fields()
    assert fields["mean_rel_L1"] == pytest.approx(1.050e-2)
    assert fields["max_abs"] == pytest.approx(7.812e-3)
    assert fields["n_elements"] == 8192 + 8192 + 2048
    assert fields["mismatches"] == 0


def test_a_failure_at_the_second_output_leaves_the_first_passed_and_the_rest_unchecked():
    t = (
        "[precision] Output 0 (64 elements): mean_rel_L1=1.0e-03 | rel_err max=2.0e-03 | abs_err max=1.0e-04 | rtol=1.6e-02 atol=1.0e-03\n"
        "[precision] Output 1 (32 elements): mean_rel_L1=5.0e-01 | rel_err max=1.0e+00 | abs_err max=2.0e-01 | rtol=1.6e-02 atol=1.0e-03\n"
        "ERROR: Output 1 does not meet expected output.\nShape: (32,)\nMismatches: 7 / 32 elements (21.88%)\nfailed.\n"
    )
    r = parse_harness_transcript(t)
    assert [(o.passed, o.mismatches) for o in r.outputs] == [(True, 0), (False, 7)]
    assert r.kernel_verified_fields()["mismatches"] == 7


def test_the_short_precision_form_and_the_numerics_md_mismatch_form_are_accepted():
    t = (
        "[precision] mean_rel_L1=9.312e-03 | rel_err max=3.906e-01 | abs_err max=6.104e-04 | rtol=1.6e-02 atol=1.5e-03\n"
        "ERROR: Output 0 does not meet expected output.\nMismatches: 12 / 4194304 (0.0003%)\nfailed.\n"
    )
    r = parse_harness_transcript(t)
    assert (r.verdict, r.outputs[0].n_elements, r.outputs[0].mismatches) == ("FAIL", None, 12)


def test_a_correlation_failure_is_a_fail_with_zero_elementwise_mismatches():
    t = (
        "[precision] Output 0 (100 elements): mean_rel_L1=1.0e-02 | rel_err max=1.0e-02 | abs_err max=1.0e-03 | rtol=1.6e-02 atol=1.0e-01\n"
        "Output 0 correlation: 0.412000 (threshold: 0.99)\nERROR: Output 0 correlation 0.412000 below threshold 0.99\nfailed.\n"
    )
    r = parse_harness_transcript(t)
    assert (r.verdict, r.outputs[0].mismatches, r.outputs[0].correlation) == ("FAIL", 0, pytest.approx(0.412))


def test_garbage_is_an_error_never_a_pass():
    with pytest.raises(TranscriptError, match="matches none of the mlir-air harness formats"):
        parse_harness_transcript(text("garbage_compiler_log.txt"))


def test_a_transcript_cut_before_its_verdict_is_an_error():
    with pytest.raises(TranscriptError, match="ends without a verdict line"):
        parse_harness_transcript(text("truncated.txt"))


def test_pass_alongside_mismatches_is_contradictory():
    with pytest.raises(TranscriptError, match="contradicts itself"):
        parse_harness_transcript(text("contradictory.txt"))


@pytest.mark.parametrize(
    "bad, message",
    [
        ("", "empty"),
        ("PASS!\n", "no \\[precision\\] line"),
        (text("gemm_pass.txt") + "failed.\n", "both 'PASS!' and 'failed.'"),
        (text("gemm_pass.txt") + "PASS!\n", "verdict 2 times"),
        (text("gemm_pass.txt").replace("mean_rel_L1=9.312e-03", "mean_rel_L1=nan"), "non-finite"),
        (text("gemm_pass.txt").replace("rtol=1.6e-02 atol=1.5e-03", "rtol=?"), "malformed \\[precision\\]"),
        (text("gemm_pass.txt").replace("Latency (us): 2017.3", "Latency (us): fast"), "malformed latency"),
        (text("gemm_fail_mismatches.txt").replace("786432 / 1835008", "786432 / 1835000"), "elements in its"),
        (text("gemm_fail_mismatches.txt").replace("786432 / 1835008", "9999999 / 1835008"), "out of only"),
        (text("gemm_pass.txt") + text("gemm_pass.txt").split("PASS!")[0], "after the verdict|two \\[precision\\]"),
        ("Mismatches: 3 / 10 elements (30.00%)\nfailed.\n", "without the 'ERROR: Output N'"),
    ],
)
def test_malformed_or_self_contradicting_transcripts_raise(bad, message):
    with pytest.raises(TranscriptError, match=message):
        parse_harness_transcript(bad)


def test_a_transcript_error_keeps_the_text_for_triage():
    with pytest.raises(TranscriptError) as info:
        parse_harness_transcript(text("truncated.txt"))
    assert info.value.transcript == text("truncated.txt")


def test_sha256_text_is_the_hash_of_the_utf8_bytes():
    assert sha256_text("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_text("é") != sha256_text("e")


# --- make verify --------------------------------------------------------------------------------------


def test_a_verify_pass_maps_every_prompt_onto_token_gate_fields():
    r = parse_verify_output(text("verify_pass.txt"), report("verify_pass_report.json"))
    assert r.verdict == "PASS" and r.summary["topk_passed"] == 2
    assert r.report_json_path == "reports/verify_topk_token_20260614-101502.json"
    p0, p1 = r.prompts
    assert (p0.divergence_step, p0.agreed_prefix, p0.passed, p0.topk_ours) == (None, 32, True, [])
    assert (p1.divergence_step, p1.agreed_prefix, p1.chosen_ours, p1.chosen_ref) == (19, 19, 2797, 1117)
    assert (p1.rank_ours_in_ref, p1.rank_ref_in_ours) == (2, 2)
    assert p1.prompt == "Explain why the sky is blue in one sentence."
    for fields in r.token_gate_fields():
        event = TokenGateChecked(**fields)
        assert event.executor == "mlir-air" and event.top_k == 5


def test_a_verify_fail_records_the_divergence_ranks_and_kl():
    r = parse_verify_output(text("verify_fail.txt"), report("verify_fail_report.json"))
    assert r.verdict == "FAIL"
    bad = r.prompts[0]
    assert (bad.passed, bad.divergence_step, bad.rank_ours_in_ref, bad.rank_ref_in_ours) == (False, 3, None, None)
    assert bad.topk_ref == [7042, 314, 216, 253, 1117]
    assert bad.kl_divergence == pytest.approx(1.8734) and len(bad.kl_per_step) == 4
    assert "not in ref top-5" in bad.fail_reason
    assert TokenGateChecked(**bad.token_gate_fields()).passed is False


def test_a_verify_transcript_without_a_report_gives_verdict_and_summary_only():
    r = parse_verify_output(text("verify_fail.txt"), None)
    assert (r.verdict, r.summary["topk_failed"], r.prompts) == ("FAIL", 1, ())


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t.replace("[verify] PASS", "[verify] PASS\n[verify] FAIL — see report"), "both"),
        (lambda t: t.replace("[verify] PASS", ""), "truncated"),
        (lambda t: t.replace("'topk_failed': 0", "'topk_failed': 1"), "--no-strict"),
        (lambda t: t.replace("[verify] Summary: {", "[verify] Summary: {oops"), "not a dict literal"),
        (lambda t: t.replace("'topk_passed': 2", "'topk_passed': 0"), "diagnosis run"),
        (lambda t: "building NPU runner...\nKilled\n", "matches none of the mlir-air verify formats"),
    ],
)
def test_malformed_verify_transcripts_raise(mutate, message):
    with pytest.raises(TranscriptError, match=message):
        parse_verify_output(mutate(text("verify_pass.txt")), report("verify_pass_report.json"))


def test_a_fail_line_with_no_failed_prompt_is_contradictory():
    t = text("verify_fail.txt").replace("'topk_passed': 1, 'topk_failed': 1", "'topk_passed': 2, 'topk_failed': 0")
    with pytest.raises(TranscriptError, match="counts no failed prompt"):
        parse_verify_output(t, None)


def _bad_row(mutate):
    rep = copy.deepcopy(report("verify_fail_report.json"))
    mutate(rep)
    return rep


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r["topk_checks"][0].update(status="OK"), "summary's failed count|contradicts"),
        (lambda r: r["topk_checks"][0].update(test_chosen_rank_in_ref=3), "recorded ranks"),
        (lambda r: r["topk_checks"][0].update(ref_chosen_at_div=4911), "two different chosen tokens"),
        (lambda r: r["topk_checks"][0].update(divergence_step=40), "outside"),
        (lambda r: r["topk_checks"].pop(), "rows but the Summary"),
        (lambda r: r["summary"].update(topk_failed=2), "another run"),
        (lambda r: r.update(topk_checks=None), "not a verify_topk_token report"),
        (lambda r: r["topk_checks"][1].update(prompt_idx=0), "twice"),
        (lambda r: r["topk_checks"][0].pop("status"), "lacks 'status'"),
    ],
)
def test_a_report_that_contradicts_itself_or_the_transcript_raises(mutate, message):
    with pytest.raises(TranscriptError, match=message):
        parse_verify_output(text("verify_fail.txt"), _bad_row(mutate))


# --- make diagnosis -----------------------------------------------------------------------------------


def test_a_diagnosis_report_maps_onto_layer_diagnosed_fields():
    layers = parse_diagnosis_report(report("diagnosis_report.json"))
    assert [row["layer"] for row in layers] == list(range(30))
    first = layers[0]
    assert first["cos_min"] == pytest.approx(0.99231) and first["mean_abs"] == pytest.approx(0.0042)
    for row in layers:
        LayerDiagnosed(**row)


def test_a_diagnosis_transcript_must_agree_with_its_report():
    result = parse_diagnosis_output(text("diagnosis.txt"), report("diagnosis_report.json"))
    assert len(result.layers) == 30
    with pytest.raises(TranscriptError, match="another run"):
        parse_diagnosis_output(text("diagnosis.txt").replace("'n_layer_records': 30", "'n_layer_records': 16"),
                               report("diagnosis_report.json"))


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.update(per_layer=[]), "no 'ffn_out' rows"),
        (lambda r: r["per_layer"][3]["cosine"].update(min=1.7), "is not a cosine"),
        (lambda r: r["per_layer"][3].update(layer=2), "appears twice"),
        (lambda r: r["per_layer"][3]["errors"].pop("mean_abs"), "lacks 'mean_abs'"),
        (lambda r: r["config"].update(mode="verify"), "not 'diagnosis'"),
        (lambda r: r.pop("per_layer"), "not a diagnosis report"),
    ],
)
def test_a_broken_diagnosis_report_raises(mutate, message):
    rep = copy.deepcopy(report("diagnosis_report.json"))
    mutate(rep)
    with pytest.raises(TranscriptError, match=message):
        parse_diagnosis_report(rep)


def test_a_nan_layer_cosine_is_kept_as_evidence():
    rep = copy.deepcopy(report("diagnosis_report.json"))
    rep["per_layer"][5]["cosine"]["min"] = float("nan")
    assert math.isnan(parse_diagnosis_report(rep)[5]["cos_min"])
