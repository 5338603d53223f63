"""The NPU2 performance model: determinism, switches, LOO accuracy, Llama-3.2-1B calibration, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.config import ModelConfig
from npu_kernels.perf import NPU2_PEAK_BF16_FLOPS, SWITCHES, modelled_kernel_figures, predict, render_table, write_png
from npu_kernels.perf.anchors import kernel_rows, profile
from npu_kernels.perf.constants import EVIDENCE, FITTED
from npu_kernels.perf.fit import fit, loo, loo_table
from npu_kernels.perf.kernel_model import kernel_features, kernel_latency_s

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
LLAMA = resolve(load_raw_config(CONFIGS / "llama-3.2-1b.json"))
TINY = [ModelConfig(n_layers=2, emb_dim=512, n_heads=8, n_kv_heads=4, head_dim=64, hidden_dim=1024, vocab_size=1000),
        ModelConfig(n_layers=2, emb_dim=512, n_heads=4, n_kv_heads=2, head_dim=128, hidden_dim=1024, vocab_size=1000,
                    qk_norm=True, architecture="Qwen3ForCausalLM"),
        ModelConfig(n_layers=2, emb_dim=512, n_heads=8, n_kv_heads=2, head_dim=64, hidden_dim=1536, vocab_size=1000,
                    qkv_bias=True, architecture="Qwen2ForCausalLM")]


def test_the_same_inputs_give_the_same_figures():
    a, b = predict(LLAMA).to_dict(), predict(LLAMA).to_dict()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize("config", [LLAMA] + TINY, ids=["llama", "tiny64", "tiny128_qk", "tiny_bias"])
@pytest.mark.parametrize("switch", SWITCHES)
def test_turning_a_switch_off_never_makes_the_model_faster(config, switch):
    on, off = predict(config), predict(config, switches={switch: False})
    assert off.ttft_s >= on.ttft_s and off.ms_per_token >= on.ms_per_token


def test_each_switch_changes_the_plan_the_way_it_changes_hardware_work():
    on = predict(LLAMA)
    no_merge = predict(LLAMA, switches={"fusion": False})
    assert (on.prefill_calls_per_layer, on.decode_calls_per_layer) == (3, 2)
    assert no_merge.prefill_calls_per_layer > 3 and no_merge.decode_calls_per_layer > 2
    assert no_merge.ttft_s > on.ttft_s
    no_static = predict(LLAMA, switches={"weight_residency": False})  # weights written every call
    assert no_static.totals["prefill"]["bo_write"] > 3 * on.totals["prefill"]["bo_write"]
    assert no_static.totals["prefill"]["npu"] == on.totals["prefill"]["npu"]
    no_inter = predict(LLAMA, switches={"intermediate_bos": False})  # overwritten buffers re-synced
    assert no_inter.totals["prefill"]["bo_write"] > on.totals["prefill"]["bo_write"]
    head_first = predict(LLAMA, switches={"seq_first": False})  # host transposes around attention
    assert "seq<->head transpose" in head_first.host["prefill"] and "seq<->head transpose" not in on.host["prefill"]
    hd128 = TINY[1]  # head_dim 128 always runs head-first with the host transpose: the switch cannot help
    assert predict(hd128, switches={"seq_first": False}).ttft_s == predict(hd128).ttft_s


def test_leave_one_out_accuracy_is_reported_and_gemm_meets_its_target():
    table = loo_table(loo())
    assert set(table) == {"gemm", "gemv", "rmsnorm", "layernorm", "rope", "flash_attention", "eltwise_add",
                          "silu_mul", "gelu", "conv1d", "eltwise_mul"}
    for k, t in table.items():  # Element-wise Multiply: the two rows supported_kernels.md@0b499c9 measured
        assert t["rows"] >= (2 if k == "eltwise_mul" else 4)
        assert t["median_abs_error"] >= 0 and t["worst_abs_error"] >= t["median_abs_error"]
    assert table["gemm"]["median_abs_error"] <= 0.15


def test_the_shipped_constants_are_the_fit_of_the_shipped_rows_and_each_has_evidence():
    refit = fit(kernel_rows())
    assert set(refit) == set(FITTED) == set(EVIDENCE)
    for k, v in refit.items():
        assert FITTED[k] == pytest.approx(v, rel=2e-3, abs=1e-15), k


def test_the_short_convolution_kernels_are_costed_on_their_own_measured_rows_not_on_element_wise_adds():
    """Issue 46: supported_kernels.md@0b499c9 measured Conv1D (594.6 us, 28.2 GB/s at 2048x2048, herd 8x1 tile_s 8)
    and Element-wise Multiply (451.6 us, 55.7 GB/s at N=4194304) on an idle NPU2; both kernels now have constants
    of their own, fitted on those rows (anchors.toml), where they used to borrow Element-wise Add's."""
    rows = {(r["kernel"], r["latency_us"]): r for r in kernel_rows() if r["kernel"] in ("conv1d", "eltwise_mul")}
    assert ("conv1d", 594.6) in rows and ("eltwise_mul", 451.6) in rows
    assert all("supported_kernels.md@0b499c9" in r["src"] for r in rows.values())
    conv = kernel_features("conv1d", {"seq": 2048, "C": 2048}, {"herd_x": 8, "herd_y": 1, "tile_s": 8})
    mul = kernel_features("eltwise_mul", {"N": 4194304})
    assert not any(k.startswith("eltwise_add") for k in (*conv, *mul))
    assert {"conv1d_s_per_byte_per_tile", "eltwise_mul_s_per_byte_per_tile"} <= set(FITTED)
    # the fit reproduces the measured best of each within 5 % (the herd 8x1 rows; herd_x 4 is the worst row)
    assert kernel_latency_s("conv1d", {"seq": 2048, "C": 2048}, {"herd_x": 8, "herd_y": 1, "tile_s": 8}) * 1e6 \
        == pytest.approx(594.6, rel=0.05)
    assert kernel_latency_s("eltwise_mul", {"N": 4194304}, {"herd_x": 8, "herd_y": 1}) * 1e6 == pytest.approx(451.6, rel=0.05)


def test_no_modelled_gemm_beats_the_physical_peak():
    for r in kernel_rows("gemm"):
        assert modelled_kernel_figures("gemm", r["shape"], r["tile"])["gflops"] * 1e9 < NPU2_PEAK_BF16_FLOPS
    assert 4.0e13 < NPU2_PEAK_BF16_FLOPS < 6.0e13


def test_llama_3_2_1b_end_to_end_is_within_15_percent_of_its_profile():
    p = predict(LLAMA, profiled=True)  # the deployment as profile.md measured it (eight-launch o_gemv_ffn)
    assert p.ttft_s == pytest.approx(1.27, rel=0.15)
    assert p.ms_per_token == pytest.approx(92.0, rel=0.15)
    assert (p.prefill_calls_per_layer, p.decode_calls_per_layer) == (3, 2)


# flash_attn is NOT within the target: the registry's standalone kernel is 15.4-16.1 ms (FlashAttention_bf16.md:149)
# while the profiled ELF call is 21.6 ms; its 12 MB BO write explains ~1 ms. The model (16.1 ms/call) misses by ~26%.
# lm_head_gemv is NOT within it either, the other way: at the tile the ELF is built with (8/4/8,
# lm_head_gemv_multi.py:43-45) the model reproduces the registry's standalone 16384x2048 row, but the profiled
# 8-partition ELF takes 13.6-14.0 ms, 1.7-1.75 ms a partition, ~20% under that standalone row (2193 us,
# GEMV_bf16.md:96): a multi-launch speed-up no registry row shows. Both are measured gaps, reported by `make bench`
# and in the closing note, not fitted away (no constant may be tuned to one ELF) and not hidden by a wider band:
# the test below holds every other ELF to 25% and the two after it state each miss.
KNOWN_MISS = "prefill:flash_attn"
KNOWN_MISS_ELFS = {KNOWN_MISS, "prefill:lm_head_gemv", "decode:lm_head_gemv"}


def test_llama_3_2_1b_per_elf_per_call_times_are_within_25_percent_but_flash_attention_and_the_lm_head():
    p, prof = predict(LLAMA, profiled=True), profile()
    checked = 0
    for phase, table in (("prefill", prof["prefill_per_call_ms"]), ("decode", prof["decode_per_call_ms"])):
        for elf, measured in table.items():
            key = f"{phase}:{elf}"
            if elf == "src" or key in KNOWN_MISS_ELFS:
                continue
            assert p.per_elf[key]["per_call_ms"] == pytest.approx(measured, rel=0.25), key
            checked += 1
    assert checked == 4  # rms_gemms_rope, o_ffn, o_gemv_ffn, rms_gemv_rope


def test_the_flash_attention_elf_is_modelled_short_of_its_profile_as_reported():
    p, prof = predict(LLAMA, profiled=True), profile()
    ratio = p.per_elf[KNOWN_MISS]["per_call_ms"] / prof["prefill_per_call_ms"]["flash_attn"]
    assert ratio < 0.75  # when this fails the gap has closed: move flash_attn back under the 25% test above


def test_the_lm_head_miss_is_the_profiled_elf_beating_the_registrys_own_standalone_row():
    row = next(r for r in kernel_rows("gemv") if r["shape"] == {"M": 16384, "K": 2048})  # GEMV_bf16.md:96
    modelled = modelled_kernel_figures("gemv", row["shape"], row["tile"])["latency_us"]
    assert modelled == pytest.approx(row["latency_us"], rel=0.05)  # the model reproduces the standalone row
    prof = profile()
    for phase in ("prefill", "decode"):
        per_partition_us = prof[f"{phase}_per_call_ms"]["lm_head_gemv"] * 1e3 / 8
        assert per_partition_us < 0.82 * row["latency_us"], phase  # the ELF is faster than the row it is made of
        assert predict(LLAMA, profiled=True).per_elf[f"{phase}:lm_head_gemv"]["per_call_ms"] > \
            1.15 * prof[f"{phase}_per_call_ms"]["lm_head_gemv"]  # when this fails the gap has closed


def test_the_per_call_dispatch_cost_is_the_playbooks_and_merging_saves_it_per_call():
    from npu_kernels.perf.host import PLAYBOOK_DISPATCH_S, host_constants

    h = host_constants()
    assert h["xrt_call_s"] >= 0 and 0 <= h["dispatch_share_s"] < FITTED["launch_s"]
    assert h["xrt_call_s"] + h["dispatch_share_s"] == pytest.approx(PLAYBOOK_DISPATCH_S)
    assert 50e-6 <= PLAYBOOK_DISPATCH_S <= 200e-6  # "~50-200 us per call", opt-merge-multi-launch-kernels/SKILL.md:3
    # the profiled call that splits it is reproduced (its measured time is what fixes the split)
    assert predict(LLAMA, profiled=True).per_elf["decode:rms_gemv_rope"]["per_call_ms"] == pytest.approx(0.9, rel=1e-3)
    # unmerging the decode layers: every launch its own call, so each extra call costs the playbook's figure on the
    # NPU run + XRT side (the BO traffic of the now-visible intermediates comes on top, in BO write / read)
    for config in (LLAMA, TINY[2]):
        on, off = predict(config), predict(config, switches={"fusion": False})
        layer = [e for k, e in on.per_elf.items() if k.startswith("decode:") and k != "decode:lm_head_gemv"]
        extra_calls = sum(e["calls"] * (e["launches"] - 1) for e in layer)  # the LM head stays one ELF
        assert extra_calls > 0
        saved = sum(off.totals["decode"][k] - on.totals["decode"][k] for k in ("npu", "xrt"))
        assert saved == pytest.approx(extra_calls * PLAYBOOK_DISPATCH_S * 1e3, rel=1e-3)


@pytest.mark.parametrize("config", TINY, ids=["tiny64", "tiny128_qk", "tiny_bias"])
def test_tiny_model_shapes_are_predicted(config, tmp_path):
    p = predict(config, seq=128)
    assert p.ttft_s > 0 and p.decode_tokens_per_s > 0
    assert "prefill:flash_attn" in p.per_elf
    assert "TTFT" in render_table(p)
    assert Path(write_png(p, str(tmp_path / "b.png"))).stat().st_size > 0


def _cli(args):
    from handlers.cli import cli

    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_the_cli_prints_json_for_smollm2(tmp_path, monkeypatch):
    monkeypatch.setenv("LEDGER_HOME", str(tmp_path))
    r = _cli(["predict", str(CONFIGS / "smollm2-135m-instruct.json"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for k in ("ttft_s", "decode_tokens_per_s", "prefill_calls_per_layer", "decode_calls_per_layer", "breakdown"):
        assert k in d
    assert d["breakdown"]["per_elf"]


def test_the_cli_takes_switches_and_seq(tmp_path, monkeypatch):
    monkeypatch.setenv("LEDGER_HOME", str(tmp_path))
    cfg = str(CONFIGS / "llama-3.2-1b.json")
    on = json.loads(_cli(["predict", cfg, "--json"]).output)
    off = json.loads(_cli(["predict", cfg, "--json", "--switches", "weight_residency,intermediate_bos,seq_first",
                           "--seq", "2048"]).output)
    assert off["prefill_calls_per_layer"] > on["prefill_calls_per_layer"] and off["ttft_s"] > on["ttft_s"]


@pytest.mark.parametrize("name", ["mixtral-8x7b.json", "t5-small.json", "gpt2.json"])
def test_the_cli_refuses_an_out_of_scope_config_in_one_line(name, tmp_path, monkeypatch):
    monkeypatch.setenv("LEDGER_HOME", str(tmp_path))
    r = CliRunner().invoke(__import__("handlers.cli", fromlist=["cli"]).cli, ["predict", str(CONFIGS / name)])
    assert r.exit_code != 0
    assert "out of scope" in r.output and len(r.output.strip().splitlines()) == 1


def test_predict_sets_mlir_air_s_published_bf16_figure_beside_its_own():
    # issue 48 item 5 / docs/design.md "the README figures `predict` sets beside its prediction": at dd99c44 a bf16
    # prediction of Qwen3-0.6B showed no published figure, in the text or the JSON
    from handlers.cli.main import cli
    from npu_kernels.perf.readme import matching_readme_row, readme_rows

    qwen3 = str(CONFIGS / "qwen3-0.6b.json")
    runner = CliRunner()
    out = json.loads(runner.invoke(cli, ["predict", qwen3, "--json"]).output)
    assert out["source"] == "modelled NPU2"
    assert out["measured"]["provenance"] == "imported:mlir-air-readme" and out["measured"]["role"] == "held-out"
    assert (out["measured"]["ttft_s"], out["measured"]["decode_tokens_per_s"]) == (1.52, 11.7)
    text = runner.invoke(cli, ["predict", qwen3]).output
    line = next(x for x in text.splitlines() if "published by mlir-air" in x)
    assert "TTFT 1.52 s, 11.7 tok/s" in line and f"modelled TTFT {out['ttft_s']:.3f} s" in line
    at_512 = runner.invoke(cli, ["predict", qwen3, "--seq", "512"]).output
    assert "not compared with this prediction at --seq 512" in at_512
    # every README row names a fixture's architecture; a model mlir-air published nothing for gets no line
    assert all(matching_readme_row(resolve(load_raw_config(CONFIGS / f))) is not None for f in
               ("llama-3.2-1b.json", "smollm2-1.7b.json", "qwen2.5-3b.json", "qwen3-4b.json", "llama-3.2-3b.json"))
    assert len(readme_rows()) == 9
    assert "published by mlir-air" not in runner.invoke(cli, ["predict", str(CONFIGS / "qwen2.5-0.5b.json"),
                                                               "--weights", "q4nx-host"]).output
