"""Prefill length and decode context as axes (issue #25 item 4): `npu_kernels.perf.curve` and `ledger predict --curve`.

The curves are the performance model's: TTFT grows with the padded prefill length (each point a build for that
length), decode tokens/s falls as the KV cache the CPU attends over grows; the curve's 2048 point and its Phase 6
context point are exactly what `ledger predict` and Phase 6 give; a point past a bound has no figure and says
which bound.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from handlers.cli.main import cli
from handlers.evaluator.replay import _curve_problems
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.config import ModelConfig
from npu_kernels.perf.curve import (
    DECODE_CONTEXTS,
    PREFILL_LENGTHS,
    compare_curves,
    decode_curve,
    npu2_curve,
    point,
    prefill_curve,
)
from npu_kernels.perf.dispatch import SWITCHES, normalize_switches
from npu_kernels.perf.figures import NPU2_DECODE_CTX, NPU2_PREFILL_SEQ, npu2_figures, path_switches
from npu_kernels.perf.predict import predict
from npu_kernels.thresholds import CURVE_COMPARE_RTOL, FIGURE_RTOL
from registry.curve_page import CURVE_CHART, curve_section

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
MODELS = ["llama-3.2-1b.json", "smollm2-1.7b.json", "smollm2-135m-instruct.json"]
ALL_ON = normalize_switches(None)


def _config(name: str):
    raw = load_raw_config(CONFIGS / name)
    return resolve(raw), raw.get("max_position_embeddings")


@pytest.mark.parametrize("name", MODELS)
def test_ttft_grows_with_the_prefill_length_and_decode_speed_falls_with_context(name):
    config, window = _config(name)
    c = npu2_curve(config, ALL_ON, ALL_ON, max_positions=window)
    ttft = [p["ttft_ms"] for p in c["prefill"]["points"] if p["status"] == "ok"]
    tps = [p["decode_tokens_per_sec"] for p in c["decode"]["points"] if p["status"] == "ok"]
    assert len(ttft) >= 5 and len(tps) >= 5  # 128 ... 2048 and 128, 1k ... 8k at least
    assert all(a < b for a, b in zip(ttft, ttft[1:])), ttft
    assert all(a > b for a, b in zip(tps, tps[1:])), tps


@pytest.mark.parametrize("name", ["llama-3.2-1b.json", "smollm2-1.7b.json"])
def test_the_curves_2048_ttft_and_phase6_context_decode_are_the_point_predict_gives(name):
    config, window = _config(name)
    today = predict(config)  # `ledger predict CONFIG`: seq 2048, ctx 128, every switch on
    c = npu2_curve(config, ALL_ON, ALL_ON, max_positions=window)
    assert point(c, "prefill", NPU2_PREFILL_SEQ)["ttft_s"] == today.ttft_s
    assert point(c, "decode", NPU2_DECODE_CTX)["decode_tokens_per_sec"] == today.decode_tokens_per_s
    assert point(c, "decode", NPU2_DECODE_CTX)["ms_per_token"] == today.ms_per_token
    # and the point Phase 6 records, under a deployment's own per-path switches
    deployment = {"fusion": True, "weight_residency": True, "decode:fusion": True}
    f = npu2_figures(config, deployment)
    c6 = npu2_curve(config, path_switches(deployment, "prefill"), path_switches(deployment, "decode"))
    assert point(c6, "prefill", f["seq"])["ttft_s"] == f["ttft_s"]
    assert point(c6, "decode", f["ctx"])["decode_tokens_per_sec"] == f["tokens_per_s"]


def test_prefill_tokens_per_second_is_the_length_over_ttft_as_sweep_prefill_computes_it():
    config, _ = _config("llama-3.2-1b.json")
    points, _ = prefill_curve(config, ALL_ON)
    assert [p["prefill_len"] for p in points] == list(PREFILL_LENGTHS)
    for p in points:
        assert p["prefill_tokens_per_sec"] == round(p["prefill_len"] / p["ttft_s"], 1)


def test_a_point_past_the_models_context_window_has_no_figure_and_says_so():
    config, window = _config("smollm2-1.7b.json")
    assert window == 8192
    c = npu2_curve(config, ALL_ON, ALL_ON, max_positions=window)
    for axis, key in (("prefill", "prefill_len"), ("decode", "context_len")):
        beyond = [p for p in c[axis]["points"] if p[key] > window]
        assert beyond and all(p["status"] == "beyond_context_window" for p in beyond)
        assert all(p.get("ttft_ms") is None and p.get("decode_tokens_per_sec") is None for p in beyond)
        assert all("8192" in p["detail"] for p in beyond)


def test_the_kv_cache_that_does_not_fit_the_host_ends_the_decode_axis():
    config, _ = _config("smollm2-1.7b.json")  # MHA: 24 layers x 32 KV heads x 64 x 2 x bf16 = 192 KiB a position
    config = replace(config, max_positions=None)  # the KV fit alone (its 8192 window would end the axis first)
    weights = predict(config).memory["weights_bytes"]
    points, notes = decode_curve(config, ALL_ON, host_bytes=weights + 2 * 2**30)
    fits = {p["context_len"]: p["status"] for p in points}
    assert fits[1024] == "ok" and fits[32768] == "does_not_fit"  # 6 GiB of KV cache at 32k
    assert not notes  # the host's memory was given: nothing left unchecked
    _, unchecked = decode_curve(config, ALL_ON)
    assert any("host memory not given" in n for n in unchecked)


def test_a_length_whose_activation_bo_passes_4_gib_ends_the_prefill_axis():
    config, _ = _config("llama-3.2-1b.json")  # Gate / Up activations: L x 8192 x bf16 = 4 GiB at L = 262144
    config = replace(config, max_positions=None)  # the BO bound alone (its 131072 window would end the axis first)
    points, _ = prefill_curve(config, ALL_ON, lengths=(2048, 262144 + 2048))
    assert points[0]["status"] == "ok"
    assert points[1]["status"] == "bo_address_limit" and "4 GiB" in points[1]["detail"]
    assert points[1]["ttft_ms"] is None


def test_a_length_the_tiles_cannot_split_ends_the_prefill_axis_but_a_shape_illegal_everywhere_does_not():
    config, _ = _config("llama-3.2-1b.json")
    points, notes = prefill_curve(config, ALL_ON, lengths=(2048, 2048 + 32))  # flash attention: lq % lqp
    assert points[0]["status"] == "ok" and not notes
    assert points[1]["status"] == "no_legal_tile" and "flash_attention" in points[1]["detail"]
    tiny = ModelConfig(n_layers=2, emb_dim=64, n_heads=4, n_kv_heads=2, head_dim=16, hidden_dim=176, vocab_size=300)
    points, notes = prefill_curve(tiny, ALL_ON)  # head_dim 16, K=176: no legal tile at any length
    assert all(p["status"] == "ok" for p in points)
    assert notes and all("the shape's, not the length's" in n for n in notes)


@pytest.mark.parametrize("name", ["llama-3.2-1b.json", "smollm2-1.7b.json"])
def test_predict_curve_prints_both_curves_writes_the_png_and_its_json_has_both_axes(name, tmp_path, monkeypatch):
    monkeypatch.setenv("LEDGER_HOME", str(tmp_path))
    png = tmp_path / "curve.png"
    r = CliRunner().invoke(cli, ["predict", str(CONFIGS / name), "--curve", "--png", str(png)])
    assert r.exit_code == 0, r.output
    assert "Prefill latency vs padded prefill length (modelled NPU2)" in r.output
    assert "Decode throughput vs context (modelled NPU2)" in r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png.unlink()
    r = CliRunner().invoke(cli, ["predict", str(CONFIGS / name), "--curve", "--json", "--png", str(png)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["source"] == "modelled-npu2" and d["label"] == "modelled NPU2" and d["png"] == str(png) and png.is_file()
    assert [p["prefill_len"] for p in d["prefill"]["points"]] == list(PREFILL_LENGTHS)
    assert [p["context_len"] for p in d["decode"]["points"]] == list(DECODE_CONTEXTS)
    assert {"ttft_ms", "prefill_tokens_per_sec", "status"} <= set(d["prefill"]["points"][0])
    assert {"decode_tokens_per_sec", "ms_per_token", "status"} <= set(d["decode"]["points"][0])
    point_json = json.loads(CliRunner().invoke(cli, ["predict", str(CONFIGS / name), "--json"]).output)
    assert point(d, "prefill", 2048)["ttft_s"] == point_json["ttft_s"]
    assert point(d, "decode", point_json["ctx"])["decode_tokens_per_sec"] == point_json["decode_tokens_per_s"]
    assert set(d["switches"]["prefill"]) == set(SWITCHES)


def test_predict_curve_refuses_an_unknown_switch_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("LEDGER_HOME", str(tmp_path))
    r = CliRunner().invoke(cli, ["predict", str(CONFIGS / "llama-3.2-1b.json"), "--curve", "--switches", "warp"])
    assert r.exit_code != 0 and "unknown switch" in r.output and len(r.output.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.png"))


# --- reverify compares curves, not points (hand-built pairs) ------------------------------------------------------

def _hand_curve(ttft_ms, tps, source="modelled-npu2"):
    return {"source": source,
            "prefill": {"points": [{"prefill_len": L, "ttft_ms": t, "status": "ok" if t is not None else "no_legal_tile"}
                                   for L, t in zip((512, 2048, 8192), ttft_ms)]},
            "decode": {"points": [{"context_len": C, "decode_tokens_per_sec": v, "status": "ok" if v is not None else
                                   "does_not_fit"} for C, v in zip((128, 8192, 32768), tps)]}}


def test_a_curve_equal_at_every_point_is_no_regression():
    a = _hand_curve([400.0, 1169.5, 5867.2], [9.99, 8.32, 5.51])
    cmp = compare_curves(a, _hand_curve([400.0, 1169.5, 5867.2], [9.99, 8.32, 5.51]), FIGURE_RTOL)
    assert cmp.compared == 6 and cmp.regressions == [] and cmp.changes == []


def test_a_kv_regression_at_long_context_is_caught_where_the_phase6_point_did_not_move():
    recorded = _hand_curve([400.0, 1169.5, 5867.2], [9.99, 8.32, 5.51])
    now = _hand_curve([400.0, 1169.5, 5867.2], [9.99, 8.32, 4.10])  # 128-context point unchanged
    cmp = compare_curves(recorded, now, FIGURE_RTOL)
    assert len(cmp.regressions) == 1 and "decode at 32k: 5.51 -> 4.1 tokens/s" in cmp.regressions[0]


def test_a_slower_prefill_length_is_a_regression_and_a_faster_one_a_change():
    recorded = _hand_curve([400.0, 1169.5, 5867.2], [9.99, 8.32, 5.51])
    now = _hand_curve([380.0, 1169.5, 6100.0], [9.99, 8.32, 5.51])
    cmp = compare_curves(recorded, now, FIGURE_RTOL)
    assert [r.split(":")[0] for r in cmp.regressions] == ["TTFT at 8k"]
    assert [c.split(":")[0] for c in cmp.changes] == ["TTFT at 512"]


def test_a_point_that_lost_its_figure_is_a_regression_and_one_that_gained_it_a_change():
    recorded = _hand_curve([400.0, 1169.5, None], [9.99, 8.32, 5.51])
    now = _hand_curve([400.0, 1169.5, 5867.2], [9.99, 8.32, None])
    cmp = compare_curves(recorded, now, FIGURE_RTOL)
    assert len(cmp.regressions) == 1 and "decode at 32k" in cmp.regressions[0] and "does_not_fit" in cmp.regressions[0]
    assert len(cmp.changes) == 1 and "TTFT at 8k" in cmp.changes[0]


def test_the_modelled_band_is_the_evaluators_point_tolerance_and_a_device_sweep_is_listed_not_judged():
    assert CURVE_COMPARE_RTOL["modelled-npu2"] == FIGURE_RTOL
    recorded = _hand_curve([400.0, 1169.5, 5867.2], [9.99, 8.32, 5.51], source="mlir-air-sweep")
    now = _hand_curve([400.0, 1180.0, 5867.2], [9.99, 8.32, 5.40], source="mlir-air-sweep")
    cmp = compare_curves(recorded, now, CURVE_COMPARE_RTOL.get("mlir-air-sweep"))
    assert cmp.regressions == [] and len(cmp.changes) == 2 and all("not judged" in c for c in cmp.changes)
    other = compare_curves(_hand_curve([1.0] * 3, [1.0] * 3), recorded, FIGURE_RTOL)
    assert other.compared == 0 and other.regressions == [] and "not compared" in other.changes[0]


# --- the per-model docs plot it; the evaluator re-derives a modelled one ------------------------------------------

def test_the_phase6_page_shows_both_curves_and_its_chart_is_the_same_bytes_on_every_rebuild():
    config, window = _config("smollm2-135m-instruct.json")
    c = npu2_curve(config, ALL_ON, ALL_ON, max_positions=window)
    text, png = curve_section(c, "smol", 42)
    assert "(modelled NPU2, PerformanceMeasured seq 42)" in text and f"]({CURVE_CHART})" in text
    assert "| TTFT (ms) |" in text and "| decode tokens/s |" in text
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and curve_section(c, "smol", 42)[1] == png
    assert curve_section({}, "smol", 42) == ("", None)  # a record from before curves


def test_the_evaluator_recomputes_a_modelled_phase6_curve_and_names_a_forged_point():
    config, window = _config("smollm2-135m-instruct.json")
    cfg = config.to_dict()
    c = npu2_curve(config, ALL_ON, ALL_ON, max_positions=window)
    assert _curve_problems(c, cfg) == []
    forged = json.loads(json.dumps(c))
    point(forged, "decode", 4096)["decode_tokens_per_sec"] *= 1.5
    problems = _curve_problems(forged, cfg)
    assert len(problems) == 1 and "curve decode at 4096" in problems[0]


def test_phase6s_own_points_keep_their_figures_past_a_short_context_window_and_say_so():
    config, _ = _config("smollm2-135m-instruct.json")
    c = npu2_curve(config, ALL_ON, ALL_ON, max_positions=100)  # shorter than both Phase 6 points
    own_pre, own_dec = point(c, "prefill", NPU2_PREFILL_SEQ), point(c, "decode", NPU2_DECODE_CTX)
    assert own_pre["ttft_s"] == predict(config).ttft_s and "Phase 6's compiled length" in own_pre["detail"]
    assert own_dec["decode_tokens_per_sec"] == predict(config).decode_tokens_per_s and "Phase 6" in own_dec["detail"]
    others = [p for axis in ("prefill", "decode") for p in c[axis]["points"] if p not in (own_pre, own_dec)]
    assert others and all(p["status"] == "beyond_context_window" for p in others)


def test_the_4_bit_fused_decode_curve_stops_at_its_template_window_and_names_its_weights(tmp_path):
    png = tmp_path / "c.png"
    r = CliRunner().invoke(cli, ["predict", str(CONFIGS / "llama-3.2-1b.json"), "--curve", "--weights", "q4nx-device",
                                 "--json", "--png", str(png)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    curve = out.get("curve", out)
    assert "q4nx-device" in curve["label"]
    for p in curve["decode"]["points"]:
        if p["context_len"] > 2048:  # past ATTN_MAXL: the modelled build holds no more positions
            assert p["status"] == "beyond_decode_window" and p["decode_tokens_per_sec"] is None
        else:
            assert p["status"] == "ok" and p["decode_tokens_per_sec"] > 0
    # bf16 has no such window
    bf16 = json.loads(CliRunner().invoke(cli, ["predict", str(CONFIGS / "llama-3.2-1b.json"), "--curve", "--json",
                                               "--png", str(png)]).output)
    bf16 = bf16.get("curve", bf16)
    assert not any(p["status"] == "beyond_decode_window" for p in bf16["decode"]["points"])


def test_a_longrope_model_s_curve_stops_where_its_short_factor_tables_stop(tmp_path):
    out = json.loads(CliRunner().invoke(cli, ["predict", str(CONFIGS / "phi-4-mini-instruct.json"), "--curve", "--json",
                                              "--png", str(tmp_path / "c.png")]).output)
    limit = json.loads((CONFIGS / "phi-4-mini-instruct.json").read_text())["original_max_position_embeddings"]
    for axis, key, fig in (("prefill", "prefill_len", "ttft_ms"), ("decode", "context_len", "decode_tokens_per_sec")):
        for p in out[axis]["points"]:
            beyond = p[key] > limit
            assert (p["status"] == "beyond_rope_tables") == beyond and (p[fig] is None) == beyond, p
