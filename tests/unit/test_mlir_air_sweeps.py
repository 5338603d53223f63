"""On hardware, Phase 6's curve is the model directory's prefill sweep (mlir-air llms/bench/sweep_prefill.py@a32bef3
over `make profile-prefill CTX=L`): its lines parsed (transcripts written here from the script's documented
print statements, not copied), and the twin's stand-in printing what that script prints."""

from __future__ import annotations

import json
import subprocess
import sys
from tests.npu2_facts import NPU2_PROVENANCE
from pathlib import Path

import pytest

from kernels.backends.mlir_air import MlirAirBackend
from kernels.mlir_air.checkout import ROOT
from kernels.mlir_air.output import TranscriptError
from kernels.mlir_air.scaffold import scaffold
from kernels.mlir_air.sweeps import hardware_curve, parse_prefill_sweep
from kernels.mlir_air.twin import write_twin
from kernels.model.architecture import load_raw_config, resolve
from kernels.perf.curve import compare_curves, npu2_curve, point
from kernels.perf.dispatch import normalize_switches
from kernels.thresholds import CURVE_COMPARE_RTOL
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
    curve = hardware_curve(points, {"source": "modelled-npu2"}, {"command": "make -C d sweep-prefill", **NPU2_PROVENANCE})
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
    assert curve["decode"]["points"] == [] and "fused (Q4NX) decode only" in curve["decode"]["detail"]


def test_a_device_curve_renders_its_sweep_says_why_decode_has_no_points_and_plots_the_model_beside(tiny_llama):
    config = resolve(load_raw_config(tiny_llama))
    sw = normalize_switches(None)
    curve = hardware_curve(parse_prefill_sweep(TRANSCRIPT), npu2_curve(config, sw, sw), NPU2_PROVENANCE)
    text, png = curve_section(curve, "llama32_1b", 7)
    assert "### Prefill latency vs padded prefill length (measured NPU2)" in text and "| TTFT (ms) | 315.0 | — |" in text
    assert "not_swept: " in text and "### The NPU2 performance model's curve beside it" in text
    assert png[:4] == b"\x89PNG" and curve_section(curve, "llama32_1b", 7)[1] == png
