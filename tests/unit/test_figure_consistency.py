"""Issue #35 item 1: every figure is checked for plausibility and self-consistency where it enters (a harness
transcript) and where it is read (the registry fold, the evaluator's audit), npu_kernels.perf.evidence.

Latency x throughput must be the shape's FLOP count within the rounding the printed digits allow; the figures
mlir-air's XRTRunner prints (xrt_runner.py:299-302 at e972f29: latency `.1f`, throughput `.6e` of the unrounded
latency) are always accepted, a throughput off by more than its digits is not.
"""

from __future__ import annotations

import json
import random

import pytest

from handlers.evaluator.audit import audit_stream, check_kernel
from npu_kernels.mlir_air.transcript import parse_harness_transcript
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.perf.constants import PEAK_FLOPS
from npu_kernels.thresholds import DDR_BANDWIDTH_BYTES_S
from npu_kernels.perf.evidence import EvidenceError, check_measurement, check_stored_row, output_elements, printed_unit
from ledger.events import KernelVerified
from ledger.record import RecordedEvent
from registry.fold import fold_registry
from registry.render_json import render_all_json
from registry.render_markdown import render_all_markdown
from registry.synthetic import record

GEMM = {"M": 2048, "K": 2048, "N": 2048}
PRECISION = ("[precision] Output 0 ({n} elements): mean_rel_L1=9.312e-03 | rel_err max=3.906e-01 | "
             "abs_err max=6.104e-04 | rtol=1.6e-02 atol=1.5e-03")


def _transcript(n: int, latency: str, gflops: str) -> str:
    return f"{PRECISION.format(n=n)}\nLatency (us): {latency} | Throughput: {gflops} GFLOP/s\nPASS!\n"


def _check_transcript(kernel: str, shape: dict, contract: str, text: str) -> dict:
    r = parse_harness_transcript(text)
    return check_measurement(kernel, shape, contract, latency_text=r.latency_text, gflops_text=r.gflops_text,
                             **r.kernel_verified_fields())


def test_the_unit_of_a_figure_is_its_last_printed_digit():
    assert printed_unit(2017.3, "2017.3") == pytest.approx(0.1)
    assert printed_unit(8516.269, "8.516269e+03") == pytest.approx(1e-3)
    assert printed_unit(49000.0, "4.900000e+04") == pytest.approx(1e-2)
    assert printed_unit(16100.0, "16.1e3") == pytest.approx(100)
    # read back without its text: the shortest text of the number, trailing zeros of an integer not significant
    assert printed_unit(8516.269) == pytest.approx(1e-3) and printed_unit(49000.0) == pytest.approx(1000)


def test_a_gemm_transcript_whose_latency_and_throughput_disagree_is_refused():
    # 2 * 2048 * 512 * 512 FLOP in 50000 us is 21.47 GFLOP/s; 49000 GFLOP/s is 99.7 % of NPU2's peak
    text = _transcript(2048 * 512, "50000.0", "4.900000e+04")
    with pytest.raises(EvidenceError, match="contradict each other: 1.07374e\\+09 FLOP in 49999.95 to 50000.05 us is 21.47"):
        _check_transcript("gemm", {"M": 2048, "K": 512, "N": 512}, "bf16-out-high", text)


def test_the_tolerance_is_the_printed_digits_and_nothing_more():
    shape, n = GEMM, 2048 * 2048
    # 2 * 2048**3 FLOP in 2017.25 .. 2017.35 us: 8516.058 .. 8516.480 GFLOP/s
    _check_transcript("gemm", shape, "bf16-out-high", _transcript(n, "2017.3", "8.516269e+03"))
    _check_transcript("gemm", shape, "bf16-out-high", _transcript(n, "2017.3", "8.516479e+03"))
    with pytest.raises(EvidenceError, match="contradict"):
        _check_transcript("gemm", shape, "bf16-out-high", _transcript(n, "2017.3", "8.516500e+03"))
    # three significant digits leave 8515 .. 8525: the same throughput passes when printed that coarsely
    _check_transcript("gemm", shape, "bf16-out-high", _transcript(n, "2017.3", "8.52e+03"))
    with pytest.raises(EvidenceError, match="contradict"):
        _check_transcript("gemm", shape, "bf16-out-high", _transcript(n, "2017.3", "8.50e+03"))


@pytest.mark.parametrize("kernel, shape, contract", [
    ("gemm", {"M": 2048, "K": 2048, "N": 2048}, "bf16-out-high"),
    ("gemm", {"M": 2048, "K": 8192, "N": 2048}, "f32-out"),
    ("gemv", {"M": 8192, "K": 2048}, "bf16-out"),
    ("flash_attention", {"lq": 2048, "lk": 2048, "dk": 64, "dv": 64, "heads_q": 32, "heads_kv": 8, "causal": True},
     "bf16-out"),
])
def test_what_mlir_airs_xrt_runner_prints_is_always_consistent(kernel, shape, contract):
    """xrt_runner.py:299-302: `Latency (us): {lat:.1f}` and `Throughput: {perf_flops / (lat * 1e-6) / 1e9:.6e}` of
    the unrounded latency; perf_flops as the harnesses pass it (run.py:1252 2MKN, matvec.py:304 2MK, attn_npu2.py:
    1487-1489 halved when causal) is the catalog's count, so no printed pair is refused."""
    spec = get_spec(kernel)
    flops = spec.flops(spec.normalize_shape(shape))
    rng = random.Random(35)
    moved = spec.bytes(spec.normalize_shape(shape))
    floor = max(flops / PEAK_FLOPS["npu2"], moved / DDR_BANDWIDTH_BYTES_S["npu2"]) * 1e6 * 1.05  # a possible latency
    for _ in range(200):
        lat = rng.uniform(floor, floor * 400)
        r = parse_harness_transcript(_transcript(output_elements(kernel, shape), f"{lat:.1f}",
                                                 f"{flops / (lat * 1e-6) / 1e9:.6e}"))
        # the [precision] line is GEMM's; only the timing is under test here
        check_measurement(kernel, shape, contract, latency_text=r.latency_text, gflops_text=r.gflops_text,
                          **{**r.kernel_verified_fields(), "rtol": None, "atol": None}, require_count=False)


def test_a_causal_flash_attention_timed_by_the_cpp_profile_counts_the_full_score_matrix():
    # test_elf_npu2.cpp:140-141 (e972f29): macs = heads * (lq*lk*dk*2 + lk*lq*dv*2), not halved for causal
    shape = {"lq": 2048, "lk": 2048, "dk": 64, "dv": 64, "heads_q": 32, "heads_kv": 8, "causal": True}
    full = 32 * (2048 * 2048 * 64 * 2 + 2048 * 2048 * 64 * 2)
    check_measurement("flash_attention", shape, "bf16-out", verdict="PASS", latency_us=15400.0,
                      gflops=round(full / 15400.0e3, 1), require_count=False)
    with pytest.raises(EvidenceError, match="contradict"):  # neither count: a third of the full one
        check_measurement("flash_attention", shape, "bf16-out", verdict="PASS", latency_us=15400.0,
                          gflops=round(full / 3 / 15400.0e3, 1), require_count=False)


@pytest.mark.parametrize("change, says", [
    ({"gflops": 0.0}, "throughput 0.0 GFLOP/s is not a positive finite number"),
    ({"gflops": -5.0}, "throughput -5.0 GFLOP/s is not a positive finite number"),
    ({"latency_us": -2017.3, "gflops": None}, "latency -2017.3 us is not a positive finite number"),
    ({"latency_us": float("inf"), "gflops": None}, "latency inf us is not a positive finite number"),
    ({"mean_rel_L1": -1.0}, "mean_rel_L1=-1.0 is negative"),
    ({"max_abs": -1e-3}, "max_abs=-0.001 is negative"),
])
def test_figures_must_be_positive_and_finite_and_errors_non_negative(change, says):
    good = dict(verdict="PASS", rtol=1.6e-2, atol=1.5e-3, n_elements=2048 * 2048, mean_rel_L1=9.3e-3, max_abs=6e-4,
                max_rel=0.39, latency_us=2017.3, gflops=8516.27)
    check_measurement("gemm", GEMM, "bf16-out-high", **good)
    with pytest.raises(EvidenceError, match=says.replace("(", r"\(").replace(".", r"\.")):
        check_measurement("gemm", GEMM, "bf16-out-high", **{**good, **change})


def _row(**kw) -> dict:
    base = dict(kernel="gemm", shape=GEMM, contract="bf16-out-high", executor="mlir-air", source="harness",
                verdict="PASS", rtol=1.6e-2, atol=1.5e-3, mean_rel_L1=9.3e-3, latency_us=2017.3, gflops=8516.27)
    payload = KernelVerified(**{**base, **{k: v for k, v in kw.items() if k not in ("mean_rel_L1",)}}).to_payload()
    payload = json.loads(json.dumps(payload))
    if "mean_rel_L1" in kw:  # what no recorder writes, as raw SQL can
        payload["mean_rel_L1"] = kw["mean_rel_L1"]
    return payload


def _recorded(*payloads: dict) -> list[RecordedEvent]:
    return [RecordedEvent(i + 1, "deployment:a", i + 1, f"id-{i}", "KernelVerified", p, "2026-12-01T00:00:00Z")
            for i, p in enumerate(payloads)]


def test_a_stored_row_is_checked_again_on_read():
    assert check_stored_row(_row()) == []
    [why] = check_stored_row(_row(gflops=1e7, latency_us=None, mean_rel_L1=-1.0))
    assert "mean_rel_L1=-1.0 is negative" in why
    [why] = check_stored_row(_row(gflops=1e7, latency_us=None))
    assert "exceeds npu2's peak" in why
    [why] = check_stored_row(_row(latency_us=50000.0, gflops=49000.0))
    assert "contradict each other" in why
    # a CPU emulator's timing is not held to the NPU's bounds, but still to its own consistency
    assert check_stored_row(_row(executor="emulated", source="emulated", gflops=1e6, latency_us=None)) == []


def test_a_forged_row_is_never_best_never_verified_and_shown_refused_with_its_reason():
    good, forged = _row(gflops=5000.0, latency_us=None), _row(gflops=1e7, latency_us=None, mean_rel_L1=-1.0)
    events = _recorded(good, forged)
    [row] = fold_registry(events).page("gemm_bf16").rows
    assert row.best.seq == 1 and row.best.throughput == 5000.0
    assert [m.passed for m in row.measurements] == [True, False]
    assert any(c.startswith("seq 2 refused as implausible, not counted: ") and "mean_rel_L1=-1.0 is negative" in c
               for c in row.caveats)
    docs = render_all_json(fold_registry(events))
    assert "10000000" not in json.dumps({k: v.decode() for k, v in docs.items()})
    md = render_all_markdown(fold_registry(events))
    assert "seq 2 refused as implausible, not counted: " in md["details/GEMM_bf16_in_bf16_out.md"].decode()

    [row] = fold_registry(_recorded(forged)).page("gemm_bf16").rows
    assert row.best is None and row.status == "failed"  # alone, it verifies nothing


def test_the_audit_reports_a_stored_row_with_implausible_figures_naming_its_seq():
    rec = _recorded(_row(), _row(gflops=1e7, latency_us=None, mean_rel_L1=-1.0))
    assert check_kernel(rec[0]) == []
    [problem] = [p for p in check_kernel(rec[1]) if "implausible" in p]
    assert problem.startswith("seq 2 has implausible figures: ") and "negative" in problem
    findings = audit_stream(record([]) + rec, planned=None, head_dim=64)
    assert any(f.seq == 2 and f.severity == "error" and "implausible" in f.message for f in findings)


def test_the_phase_1_harness_path_refuses_a_transcript_whose_figures_disagree(tmp_path):
    """npu_kernels.backends.harness_runner: what the mlir-air executor's harness printed is checked with its printed
    digits before it can become a row (a real subprocess printing the transcript, as tests/unit/
    test_mlir_air_executor.py runs harnesses)."""
    import shlex
    import sys
    from pathlib import Path

    from npu_kernels.backends.harness_runner import HarnessRunner
    from npu_kernels.backends.runner_base import KernelRow
    from npu_kernels.mlir_air.executor import MlirAirExecutor

    fake = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "fake_harness.py"
    shape = {"M": 2048, "K": 2048, "N": 2048}

    def runner_printing(gflops: str) -> HarnessRunner:
        transcript = tmp_path / f"run-{gflops}.txt"
        transcript.write_text(_transcript(2048 * 2048, "2017.3", gflops))
        table = tmp_path / f"harnesses-{gflops}.toml"
        command = " ".join(shlex.quote(a) for a in (sys.executable, str(fake), str(transcript)))
        table.write_text(f'[harness."gemm"]\ncommand = \'{command}\'\ntimeout_s = 20\n'
                         '[harness."gemm".defaults]\ntile_n = 128\nherd_n = 4\n')
        executor = MlirAirExecutor(harness_table=table, mlir_air_dir=str(tmp_path),
                                   lock_path=str(tmp_path / "npu.lock"), lock_timeout_s=5)

        class Runner(HarnessRunner):  # the runner with this harness table instead of the checkout's
            def executor(self) -> MlirAirExecutor:
                return executor

        return Runner("npu2", lock_path=str(tmp_path / "npu.lock"))

    row = KernelRow(kernel="gemm", shape=shape, contract="bf16-out-high", tile={"tile_m": 64, "herd_m": 8})
    done = runner_printing("8.516269e+03").verify(row, attempt=1, when="", host="")
    assert done.fields["verdict"] == "PASS" and done.fields["gflops"] == pytest.approx(8516.269)
    with pytest.raises(EvidenceError, match="latency 2017.3 us and throughput 8.516500e\\+03 GFLOP/s contradict"):
        runner_printing("8.516500e+03").verify(row, attempt=1, when="", host="")
