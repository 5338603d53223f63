"""Issue 46 item 5: a curve flags a point whose figure breaks its trend by more than the work allows
(npu_kernels.perf.trend): mlir-air's nightly LFM2-1.2B prefill at 4096 (81.9 s against 1.09 s at 2048, "ok", no
first-token gate) is flagged on the curve's JSON, its tables, its PNG and the perf page; the healthy curves of the
same nightly file, and the performance model's own curves, are not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.events import NightlyPerfImported
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.mlir_air.sweeps import hardware_curve
from npu_kernels.perf.curve import curve_png, npu2_curve, point, render_curve
from npu_kernels.perf.dispatch import normalize_switches
from npu_kernels.perf.trend import TREND_SLACK, flag_curve, prefill_flops, trend_breaks
from registry.nightly_history import FILES, NIGHTLY_STREAM
from registry.nightly_merge import merged_curves
from registry.perf_history import FILE_MD, project_history
from registry.synthetic import record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NIGHTLY = FIXTURES / "nightly_history" / FILES["prefill_sweep"]
LFM2 = [{"prefill_len": 1024, "ttft_ms": 624.0, "status": "ok"}, {"prefill_len": 2048, "ttft_ms": 1090.0, "status": "ok"},
        {"prefill_len": 4096, "ttft_ms": 81900.0, "status": "ok"}]  # the figures (81.9 s vs 1.09 s)


def _nightly_rows() -> list[dict]:
    return [json.loads(x) for x in NIGHTLY.read_text().splitlines()]


def test_the_lfm2_cliff_breaks_the_quadratic_ceiling_and_says_by_how_much():
    [(at, b)] = trend_breaks(LFM2, "prefill").items()
    assert at == 4096 and b["against"] == 2048
    assert b["factor"] == pytest.approx(81900 / 1090, rel=1e-3)
    assert b["work_ratio"] == 4.0 and b["slack"] == TREND_SLACK and b["bound"] == 4.0 * TREND_SLACK
    assert "75.1x" in b["detail"] and "quadratic ceiling" in b["detail"]


def test_with_the_models_config_the_bound_is_its_own_flop_ratio():
    cfg = resolve(load_raw_config(FIXTURES / "configs" / "lfm2-1.2b.json"))
    ratio = prefill_flops(cfg, 4096) / prefill_flops(cfg, 2048)
    assert 2.0 < ratio < 4.0  # linear weight matmuls plus the quadratic attention: between the two ceilings
    [b] = trend_breaks(LFM2, "prefill", lambda n: prefill_flops(cfg, n)).values()
    assert b["bound"] == pytest.approx(ratio * TREND_SLACK, rel=1e-3) and b["basis"] == "the model's prefill FLOPs"
    # a step just inside the bound is the trend; just past it is a break
    inside = [{"prefill_len": 2048, "ttft_ms": 1000.0, "status": "ok"},
              {"prefill_len": 4096, "ttft_ms": 1000.0 * ratio * TREND_SLACK * 0.99, "status": "ok"}]
    assert trend_breaks(inside, "prefill", lambda n: prefill_flops(cfg, n)) == {}
    inside[1]["ttft_ms"] = 1000.0 * ratio * TREND_SLACK * 1.01
    assert list(trend_breaks(inside, "prefill", lambda n: prefill_flops(cfg, n))) == [4096]


def test_every_other_curve_of_the_nightly_file_is_its_trend():
    curves = {c.model: c for c in merged_curves("prefill_sweep", _nightly_rows())}
    flagged = {m: trend_breaks(list(c.points.values()), "prefill") for m, c in curves.items()}
    assert {m: list(b) for m, b in flagged.items() if b} == {"lfm2_1_2b_q4nx": [4096]}
    assert len(curves) == 8  # gemma3, llama31_8b, llama32_1b/3b, phi4, qwen25_7b, qwen3_8b: none flagged


def test_a_point_without_a_figure_is_skipped_over_not_compared():
    pts = [{"prefill_len": 2048, "ttft_ms": 1000.0, "status": "ok"},
           {"prefill_len": 4096, "ttft_ms": None, "status": "bd_exhaustion"},
           {"prefill_len": 8192, "ttft_ms": 9000.0, "status": "ok"}]  # 9x over 4x the length: (4^2) x 2 allows 32x
    assert trend_breaks(pts, "prefill") == {}
    pts[2]["ttft_ms"] = 40000.0  # 40x > 32x
    assert trend_breaks(pts, "prefill")[8192]["against"] == 2048


def test_a_decode_step_is_bounded_by_the_linear_growth_of_its_kv_cache():
    healthy = [{"context_len": c, "decode_tokens_per_sec": t, "status": "ok"} for c, t in
               ((1024, 20.0), (2048, 19.0), (4096, 17.5))]
    assert trend_breaks(healthy, "decode") == {}
    cliff = healthy + [{"context_len": 8192, "decode_tokens_per_sec": 17.5 / 5, "ms_per_token": 1000 / 3.5,
                        "status": "ok"}]  # 5x the time per token for 2x the context: past 2 x 2
    [(at, b)] = trend_breaks(cliff, "decode").items()
    assert at == 8192 and b["factor"] == pytest.approx(5.0) and b["bound"] == 4.0


def test_a_device_curve_carries_the_break_in_its_json_tables_and_png():
    curve = hardware_curve(LFM2, {}, {"command": "make sweep-prefill"})
    assert curve["prefill"]["trend_breaks"] == 1
    assert point(curve, "prefill", 4096)["trend_break"]["against"] == 2048
    assert point(curve, "prefill", 4096)["status"] == "ok"  # flagged, not rewritten
    assert "trend_break" not in point(curve, "prefill", 2048)
    json.dumps(curve)  # the JSON a PerformanceMeasured records
    md = render_curve(curve, "lfm2")
    assert "- 4k: TREND BREAK (npu_kernels.perf.trend): TTFT 81900 ms at 4096 is 75.1x the 1090 ms at 2048" in md
    calm = hardware_curve(LFM2[:2], {}, {"command": "make sweep-prefill"})
    assert "TREND BREAK" not in render_curve(calm, "lfm2") and "trend_breaks" not in calm["prefill"]
    assert curve_png(curve, "lfm2") != curve_png({**curve, "prefill": {**curve["prefill"], "points": [
        {k: v for k, v in p.items() if k != "trend_break"} for p in curve["prefill"]["points"]]}}, "lfm2")


@pytest.mark.parametrize("name", ["llama-3.2-1b.json", "lfm2-1.2b.json", "smollm2-135m-instruct.json"])
def test_the_performance_models_own_curve_is_its_trend(name):
    cfg = resolve(load_raw_config(FIXTURES / "configs" / name))
    sw = normalize_switches(None)
    curve = npu2_curve(cfg, sw, sw)
    assert not any(p.get("trend_break") for axis in ("prefill", "decode") for p in curve[axis]["points"])
    assert flag_curve(curve, cfg) == curve  # nothing to flag: the curve as it was


def test_the_perf_page_flags_the_nightly_cliff():
    rows = _nightly_rows()
    events = record([(NIGHTLY_STREAM, NightlyPerfImported(series="prefill_sweep", row=r, file=FILES["prefill_sweep"],
                                                          line=i + 1)) for i, r in enumerate(rows)])
    md = project_history(events, "lfm2_1_2b_q4nx", "lfm2_1_2b_q4nx")[FILE_MD].decode()
    assert "- TREND BREAK at 4096 (marked ok by the nightly; npu_kernels.perf.trend): TTFT 81877 ms at 4096 is " \
           "75.9x the 1079 ms at 2048" in md
    assert "TREND BREAK" not in project_history(events, "llama32_1b_q4nx", "llama32_1b_q4nx")[FILE_MD].decode()
