"""On hardware, Phase 6's curve is the model directory's prefill sweep (mlir-air llms/bench/sweep_prefill.py@57bbed0b
over `make profile-prefill CTX=L`) and runtime decode sweep (llms/bench/sweep_decode_runtime.py@c0dabd80 over one
`make profile-decode CONTEXTS=...`): their lines and records parsed (transcripts written here from the scripts'
documented print statements, not copied), their statuses judged by the scripts' closed --expect-fail lists
(wrong_seq_len never forgiven), and the twin's stand-in printing what the scripts print, failures included."""

from __future__ import annotations

import json
import subprocess
import sys
from tests.npu2_facts import NPU2_PROVENANCE, NPU2_RAN
from pathlib import Path

import pytest

from npu_kernels.backends.mlir_air import MlirAirBackend
from npu_kernels.mlir_air.checkout import ROOT
from npu_kernels.mlir_air.output import TranscriptError
from npu_kernels.mlir_air.scaffold import scaffold
from npu_kernels.mlir_air.sweeps import hardware_curve, parse_decode_sweep, parse_prefill_sweep
from handlers.gates.performance import sweep_reasons
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.perf.curve import compare_curves, npu2_curve, point
from npu_kernels.perf.dispatch import normalize_switches
from npu_kernels.thresholds import CURVE_COMPARE_RTOL
from registry.curve_page import curve_section

# sweep_prefill.py's per-length prints: `[sweep_prefill] <model> L=<L> ...`, then `[sweep_prefill]   <json.dumps(pt)>`
TRANSCRIPT = """[sweep_prefill] llama32_1b L=512 ...
make: Entering directory 'llama32_1b'
[sweep_prefill]   {"prefill_len": 512, "ttft_ms": 315.0, "prefill_tokens_per_sec": 1625.4, "status": "ok"}
[sweep_prefill] llama32_1b L=4096 ...
[sweep_prefill]   {"prefill_len": 4096, "detail": "bd_exhaustion", "status": "expected_fail"}
{"model": "llama32_1b", "axis": "prefill_len", "metric": "ttft_ms", "points": []}
"""


def test_the_sweeps_point_lines_parse_to_its_points_failures_kept_with_their_status():
    points = parse_prefill_sweep(TRANSCRIPT)
    assert [(p["prefill_len"], p["status"], p.get("ttft_ms")) for p in points] == [
        (512, "ok", 315.0), (4096, "expected_fail", None)]
    curve = hardware_curve(points, {"source": "modelled-npu2"},
                           {"command": "make -C d sweep-prefill", **NPU2_PROVENANCE, **NPU2_RAN})
    assert curve["source"] == "mlir-air-sweep" and curve["label"] == "measured NPU2"
    # the label is the sweep's provenance: no device reported, or a stand-in checkout, is not NPU2
    assert hardware_curve(points, {}, {"command": "make"})["label"] == "unattested"
    assert hardware_curve(points, {}, {**NPU2_PROVENANCE, "stand_in": True})["label"] == "stand-in rehearsal"
    assert point(curve, "prefill", 4096)["detail"] == "bd_exhaustion" and curve["decode"]["status"] == "not_swept"
    assert curve["modelled_npu2"] == {"source": "modelled-npu2"}


def test_every_requested_length_is_a_point_a_dropped_one_failed_with_its_reason():
    """Issue #40 item 2: the sweep was asked for 512, 1024 and 4096 and printed 512 and 4096: 1024 is recorded as a
    missing point saying so, and a length the model gives no figure for (past the window) as not swept, saying why;
    a sweep that printed nothing records every length it was asked for as failed, with the reason."""
    points = parse_prefill_sweep(TRANSCRIPT)
    curve = hardware_curve(points, {}, NPU2_PROVENANCE, requested=[512, 1024, 4096],
                           skipped={8192: "beyond_context_window: 8192 positions > 4096"})
    got = {p["prefill_len"]: (p["status"], p["ttft_ms"]) for p in curve["prefill"]["points"]}
    assert got == {512: ("ok", 315.0), 1024: ("missing", None), 4096: ("expected_fail", None),
                   8192: ("not_swept", None)}
    assert "printed no point" in point(curve, "prefill", 1024)["detail"]
    assert "beyond_context_window" in point(curve, "prefill", 8192)["detail"]
    none = hardware_curve([], {}, NPU2_PROVENANCE, prefill_detail="`make sweep-prefill` (exit status 2): boom",
                          requested=[128, 256])
    assert [(p["prefill_len"], p["status"], p["detail"]) for p in none["prefill"]["points"]] == [
        (128, "failed", "`make sweep-prefill` (exit status 2): boom"), (256, "failed", "`make sweep-prefill` (exit status 2): boom")]


@pytest.mark.parametrize("text, why", [
    ("[sweep_prefill] m L=512 ...\nTime to first token (TTFT): 0.3s\n", "no `[sweep_prefill]"),
    ('[sweep_prefill]   {"prefill_len": 512, "status": "ok"}\n', "is ok but has no TTFT"),
    ('[sweep_prefill]   {"prefill_len": 512, "ttft_ms": 3.0, "status": "ok"\n', "not JSON"),
    ('[sweep_prefill]   {"ttft_ms": 3.0, "status": "ok"}\n', "no prefill_len"),
])
def test_a_sweep_transcript_without_a_readable_point_is_an_error_never_a_curve(text, why):
    with pytest.raises(TranscriptError, match=why.replace("[", r"\[").replace("(", r"\(")):
        parse_prefill_sweep(text)


def test_two_device_sweeps_are_compared_but_not_judged():
    a = hardware_curve(parse_prefill_sweep(TRANSCRIPT), {}, {})
    b = json.loads(json.dumps(a))
    point(b, "prefill", 512)["ttft_ms"] = 330.0
    cmp = compare_curves(a, b, CURVE_COMPARE_RTOL.get(a["source"]))
    assert cmp.compared == 1 and cmp.regressions == [] and "not judged" in cmp.changes[0]


def test_the_twins_sweep_over_a_stand_in_model_directory_prints_what_mlir_airs_prints(tmp_path, tiny_llama):
    twin = write_twin(tmp_path / "mlir-air")
    config = resolve(load_raw_config(tiny_llama))
    d = Path(scaffold(twin, "tiny", str(tiny_llama), config, stand_in="emulated")["dir"])
    out = tmp_path / "sweep.json"
    r = subprocess.run(["make", "-C", str(d), "sweep-prefill", "SWEEP_LENGTHS=128,256", f"SWEEP_OUT={out}",
                        f"PYTHON={sys.executable}", f"NPU_LEDGER={ROOT}", f"NPU_LEDGER_MODEL={tiny_llama}"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[sweep_prefill] tiny L=128 ..." in r.stdout and "[sweep_prefill] tiny L=256 ..." in r.stdout
    points = parse_prefill_sweep(r.stdout)
    sw = normalize_switches("none")  # the stand-in's switches: none given on this make line
    modelled = npu2_curve(config, sw, sw)
    assert [p["prefill_len"] for p in points] == [128, 256]
    for p in points:  # the stand-in's TTFT is the performance model's for a build at that length
        ttft_s = point(modelled, "prefill", p["prefill_len"])["ttft_s"]
        assert p["status"] == "ok" and p["ttft_ms"] == round(ttft_s * 1e3, 2)
        assert p["prefill_tokens_per_sec"] == round(p["prefill_len"] / ttft_s, 1)  # L / the printed TTFT
    record = json.loads(out.read_text())
    assert (record["model"], record["axis"], record["metric"]) == ("tiny", "prefill_len", "ttft_ms")
    assert record["points"] == points


def test_the_mlir_air_backends_curve_is_the_model_directorys_sweep_with_the_modelled_one_beside(
        tmp_path, tiny_llama, monkeypatch):
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "npu.lock"))
    twin = write_twin(tmp_path / "mlir-air")
    config = resolve(load_raw_config(tiny_llama))
    scaffold(twin, "tiny", str(tiny_llama), config, stand_in="emulated")
    curve = MlirAirBackend(tiny_llama, config, "tiny", mlir_air_dir=str(twin)).sweep_curve()
    command = curve["provenance"]["command"]
    assert curve["source"] == "mlir-air-sweep" and " sweep-prefill " in command and "SWEEP_LENGTHS=" in command
    modelled = curve["modelled_npu2"]
    swept = [p["prefill_len"] for p in modelled["prefill"]["points"] if p["status"] == "ok"]
    # the sweep ran the lengths the plan and window allow; the others are recorded, not swept, saying why
    assert [p["prefill_len"] for p in curve["prefill"]["points"]] == [p["prefill_len"] for p in modelled["prefill"]["points"]]
    assert [p["prefill_len"] for p in curve["prefill"]["points"] if p["status"] == "ok"] == swept
    for p in curve["prefill"]["points"]:
        if p["status"] == "ok":
            assert p["ttft_ms"] == round(point(modelled, "prefill", p["prefill_len"])["ttft_s"] * 1e3, 2)
        else:
            assert p["status"] == "not_swept" and "beyond_context_window" in p["detail"]
    # decode: the runtime sweep (one `make profile-decode CONTEXTS=...`) over the contexts the modelled curve allows
    assert " sweep-decode " not in command and "failures" not in curve["prefill"] and "failures" not in curve["decode"]
    ctxs = [p["context_len"] for p in modelled["decode"]["points"] if p["status"] == "ok"]
    assert [p["context_len"] for p in curve["decode"]["points"]] == ctxs
    for p in curve["decode"]["points"]:  # the stand-in prints the modelled decode step (median = min)
        m = point(modelled, "decode", p["context_len"])
        assert p["status"] == "ok" and p["ms_per_token"] == p["min_ms_per_token"] == round(m["ms_per_token"], 4)
        assert p["decode_tokens_per_sec"] == round(m["decode_tokens_per_sec"], 4)


def test_a_device_curve_renders_its_sweep_says_why_decode_has_no_points_and_plots_the_model_beside(tiny_llama):
    config = resolve(load_raw_config(tiny_llama))
    sw = normalize_switches(None)
    curve = hardware_curve(parse_prefill_sweep(TRANSCRIPT), npu2_curve(config, sw, sw), NPU2_PROVENANCE)
    text, png = curve_section(curve, "llama32_1b", 7)
    assert "### Prefill latency vs padded prefill length (measured NPU2)" in text and "| TTFT (ms) | 315.0 | — |" in text
    assert "not_swept: " in text and "### The NPU2 performance model's curve beside it" in text
    assert png[:4] == b"\x89PNG" and curve_section(curve, "llama32_1b", 7)[1] == png


# sweep_prefill.py@57bbed0b: an expected failure carries its cause in `detail`; wrong_seq_len is never forgiven
STATUSES = """[sweep_prefill] m L=512 ...
[sweep_prefill]   {"prefill_len": 512, "ttft_ms": 315.0, "prefill_tokens_per_sec": 1625.4, "status": "ok"}
[sweep_prefill]   {"prefill_len": 1024, "status": "expected_fail", "detail": "no_registry_shape"}
[sweep_prefill]   {"prefill_len": 2048, "status": "wrong_seq_len: engines built at 1024"}
[sweep_prefill]   {"prefill_len": 4096, "status": "expected_fail", "detail": "wrong_seq_len: engines built at 2048"}
[sweep_prefill]   {"prefill_len": 8192, "status": "fail: error: something else"}
"""


def test_expected_failures_keep_their_cause_and_no_figure_and_the_unforgiven_ones_fail_the_run():
    curve = hardware_curve(parse_prefill_sweep(STATUSES), {}, NPU2_PROVENANCE)
    assert point(curve, "prefill", 1024) == {"prefill_len": 1024, "status": "expected_fail",
                                             "detail": "no_registry_shape", "ttft_ms": None}
    assert curve["prefill"]["failures"] == [
        "prefill_len=2048: wrong_seq_len: engines built at 1024",
        "prefill_len=4096: expected_fail with cause 'wrong_seq_len: engines built at 2048', which --expect-fail "
        "never forgives (forgivable: bd_exhaustion, device_fail, host_oom, method_tile_mismatch, no_registry_shape, "
        "stitcher_mixed_tile_m, timeout)",
        "prefill_len=8192: fail: error: something else"]
    assert sweep_reasons(curve)[0] == "the prefill sweep failed: prefill_len=2048: wrong_seq_len: engines built at 1024"
    # a figure on a point that is not "ok" is never kept as a measurement
    forged = hardware_curve([{"prefill_len": 512, "status": "expected_fail", "detail": "timeout", "ttft_ms": 9.0,
                              "prefill_tokens_per_sec": 56.0}], {}, NPU2_PROVENANCE)
    assert point(forged, "prefill", 512) == {"prefill_len": 512, "status": "expected_fail", "detail": "timeout",
                                             "ttft_ms": None}
    assert sweep_reasons(forged) == [] and "failures" not in forged["prefill"]


# sweep_decode_runtime.py@c0dabd80 writes this record (main): the same as sweep_decode.py's, + min_ms_per_token
DECODE_RECORD = {"model": "m", "axis": "context_len", "metric": "decode_tokens_per_sec",
                 "timestamp_utc": "2026-09-01T00:00:00Z", "runner": "", "points": [
                     {"context_len": 1024, "decode_tokens_per_sec": 2.63, "ms_per_token": 380.6, "status": "ok",
                      "min_ms_per_token": 372.1},
                     {"context_len": 65536, "decode_tokens_per_sec": None, "ms_per_token": None,
                      "status": "expected_fail", "detail": "host_oom"},
                     {"context_len": 131072, "decode_tokens_per_sec": None, "ms_per_token": None,
                      "status": "expected_fail", "detail": "no_number"}]}


def test_the_runtime_decode_sweeps_record_is_the_decode_curve_with_its_closed_expect_fail_list():
    points = parse_decode_sweep(json.dumps(DECODE_RECORD))
    curve = hardware_curve([], {}, NPU2_PROVENANCE, decode=points)
    assert point(curve, "decode", 1024)["min_ms_per_token"] == 372.1 and curve["label"] == "measured NPU2"
    assert point(curve, "decode", 65536)["detail"] == "host_oom"
    assert curve["decode"]["failures"] == [  # no_number is not a host/device cause: never forgiven
        "context_len=131072: expected_fail with cause 'no_number', which --expect-fail never forgives (forgivable: "
        "host_oom, timeout, xrt_incomplete)"]
    assert curve["prefill"]["status"] == "not_swept" and "not_swept" not in json.dumps(curve["decode"])
    for bad, why in ((b"{", "not JSON"), (json.dumps({**DECODE_RECORD, "axis": "prefill_len"}), "no context_len axis"),
                     (json.dumps({**DECODE_RECORD, "points": [{"context_len": 1, "status": "ok"}]}), "no tokens/s")):
        with pytest.raises(TranscriptError, match=why):
            parse_decode_sweep(bad if isinstance(bad, str) else bad.decode())


def test_the_twins_sweeps_print_the_failures_its_fault_switch_asks_for(tmp_path, tiny_llama):
    """`profile-prefill@L: CAUSE` / `profile-decode@C: CAUSE` in twin-faults.txt: the stand-in prints what that
    failure prints, the twin's sweeps classify it as mlir-air's do and forgive only their closed lists."""
    twin = write_twin(tmp_path / "mlir-air")
    config = resolve(load_raw_config(tiny_llama))
    d = Path(scaffold(twin, "tiny", str(tiny_llama), config, stand_in="emulated")["dir"])
    (twin / "twin-faults.txt").write_text("profile-prefill@256: bd_exhaustion\nprofile-prefill@128: wrong_seq_len\n"
                                          "profile-decode@256: host_oom\n")
    here = [f"PYTHON={sys.executable}", f"NPU_LEDGER={ROOT}", f"NPU_LEDGER_MODEL={tiny_llama}"]
    pre, dec = tmp_path / "pre.json", tmp_path / "dec.json"
    r = subprocess.run(["make", "-C", str(d), "sweep-prefill", "SWEEP_LENGTHS=128,256", "SWEEP_EXPECT_FAIL=128,256",
                        f"SWEEP_OUT={pre}", *here], capture_output=True, text=True, timeout=240)
    assert r.returncode != 0  # wrong_seq_len at 128 is not forgiven although 128 is listed
    got = {p["prefill_len"]: p for p in parse_prefill_sweep(r.stdout)}
    assert got[256] == {"prefill_len": 256, "status": "expected_fail", "detail": "bd_exhaustion"}
    assert got[128] == {"prefill_len": 128, "status": "wrong_seq_len: engines built at 2048"}
    r = subprocess.run(["make", "-C", str(d), "sweep-decode", "SWEEP_CONTEXTS=128,256,512",
                        "SWEEP_DECODE_EXPECT_FAIL=256,512", f"SWEEP_DECODE_OUT={dec}", *here],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr  # the run died at 256; 256 and 512 were listed, host_oom forgiven
    points = parse_decode_sweep(dec.read_text())
    assert [(p["context_len"], p["status"], p.get("detail")) for p in points] == [
        (128, "ok", None), (256, "expected_fail", "host_oom"), (512, "expected_fail", "host_oom")]
    assert "[sweep] tiny ctx=128 " in r.stdout and points[0]["decode_tokens_per_sec"] > 0
