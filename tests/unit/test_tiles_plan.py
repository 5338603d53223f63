"""The tile planner's hard rules and the kernel x shape plan derived from a model config."""

import json
from pathlib import Path

import pytest

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.plan import plan
from npu_kernels.numerics.kernels.gemm import gemm_tile_n
from npu_kernels.numerics.tiles import TileRuleViolation, check_tile, plan_tile

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
G = {"M": 2048, "K": 2048, "N": 2048}
FA = {"lq": 2048, "lk": 2048, "dk": 64, "dv": 64, "heads_q": 32, "heads_kv": 8, "causal": True}


def _config(name: str) -> ModelConfig:
    return resolve(load_raw_config(CONFIGS / f"{name}.json"))


# --- hard rules ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kernel,shape,tile,rule",
    [
        ("gemm", G, {"tile_n": 96}, "gemm.N_divisible_by_tile_n_herd_n"),
        ("gemm", G, {"tile_m": 48}, "gemm.M_divisible_by_tile_m_herd_m"),
        ("gemm", {"M": 2048, "K": 2304, "N": 2048}, {"tile_k_l2": 512}, "gemm.K_divisible_by_tile_k_l2"),
        ("gemm", G, {"tile_k_l2": 256, "tile_k_l1": 96}, "gemm.tile_k_l2_divisible_by_tile_k_l1"),
        ("gemm", {"M": 2048, "K": 2048, "N": 8192}, {"tile_k_l2": 256}, "gemm.b_tile_dma_stride"),
        ("gemm", G, {"method": "drain", "tile_m": 64}, "gemm.drain_tile_m_le_32"),
        ("gemm", G, {"tile_k_l1": 36, "tile_k_l2": 288}, "gemm.K_divisible_by_tile_k_l2"),
        ("gemm", G, {"herd_n": 8, "tile_n": 64}, "gemm.herd_fits_array"),
        ("gemv", {"M": 2048, "K": 2048}, {"tile_m": 6}, "gemv.M_divisible_by_tile_m_herd_m"),
        ("gemv", {"M": 2048, "K": 2048}, {"tile_m": 1, "m_input": 1, "herd_m": 8}, "gemv.tile_m_even"),
        ("gemv", {"M": 2048, "K": 2048}, {"tile_m": 16, "m_input": 16}, "gemv.l2_budget"),
        ("gemv", {"M": 32768, "K": 2048}, {"tile_m": 8}, "gemv.bd_repeat_le_255"),
        ("eltwise_add", {"N": 4194304}, {"herd_y": 2}, "eltwise_add.herd_y_eq_1"),
        ("silu_mul", {"N": 16777216}, {"herd_y": 2}, "silu_mul.herd_y_eq_1"),
        ("gelu", {"N": 4194304}, {"herd_y": 4}, "gelu.tiles_le_16"),
        ("rope", {"rows": 65536, "head_dim": 64}, {"herd_x": 8, "herd_y": 2}, "rope.three_dma_tiles_le_columns"),
        ("rmsnorm", {"M": 2047, "N": 2048}, {"herd_x": 8}, "rmsnorm.M_divisible_by_herd_x"),
        ("gemv", {"M": 2048, "K": 2048}, {"m_input": 3}, "gemv.tile_m_divisible_by_m_input"),
        ("flash_attention", FA, {"tile_q": 32, "lqp": 128}, "flash_attention.causal_tile_q_eq_lkp_eq_64"),
        ("flash_attention", FA, {"num_heads_per_unroll": 4, "num_q_tiles": 2, "lqp": 128},
         "flash_attention.heads_per_unroll_le_2"),
        ("flash_attention", FA, {"lkp": 32}, "flash_attention.lkp_equals_head_dim"),
        ("flash_attention", {**FA, "heads_q": 9, "heads_kv": 3}, {"num_heads_per_unroll": 2},
         "flash_attention.heads_divisible_by_unroll"),
    ],
)
def test_a_tile_breaking_a_rule_is_refused_by_that_rules_name(kernel, shape, tile, rule):
    with pytest.raises(TileRuleViolation) as e:
        plan_tile(kernel, shape, "npu2", tile)
    assert str(e.value).startswith(rule + ":"), str(e.value)
    assert e.value.rule == rule


def test_the_n_rule_is_checked_first_and_every_broken_rule_is_listed():
    with pytest.raises(TileRuleViolation) as e:
        plan_tile("gemm", G, tile={"tile_n": 96, "tile_m": 48})
    rules = [r for r, _ in e.value.violations]
    assert rules[0] == "gemm.N_divisible_by_tile_n_herd_n" and "gemm.M_divisible_by_tile_m_herd_m" in rules
    assert "silently" in str(e.value)


def test_force_returns_the_illegal_plan_with_warnings():
    p = plan_tile("gemm", G, tile={"tile_n": 96}, force=True)
    assert p.tile["tile_n"] == 96
    assert any(w.startswith("forced tile breaks gemm.N_divisible_by_tile_n_herd_n") for w in p.warnings)


def test_a_shape_without_any_legal_tile_is_planned_with_warnings_not_refused():
    p = plan_tile("gemv", {"M": 2048, "K": 2000})
    assert not p.legal and any("gemv.K_divisible_by_64" in w and "pad" in w for w in p.warnings)
    tiny = plan_tile("rope", {"rows": 4096, "head_dim": 16})
    assert not tiny.legal and any("rope.head_dim_multiple_of_32" in w for w in tiny.warnings)
    narrow = plan_tile("gemm", {"M": 2048, "K": 64, "N": 32})  # a tiny model's K/V projection
    assert narrow.legal and narrow.herd == [8, 2] and narrow.tile["tile_n"] == 16 and narrow.justification


def test_unknown_tile_keys_are_refused():
    with pytest.raises(TileRuleViolation, match=r"^gemm\.tile_keys: unknown tile key\(s\) tile_q"):
        plan_tile("gemm", G, tile={"tile_q": 64})


def test_recommended_gemm_tiles():
    p = plan_tile("gemm", G)
    assert p.tile == {"tile_m": 64, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 128, "herd_m": 8, "herd_n": 4,
                      "method": "fused-cast"}
    assert (p.herd, p.tiles_in_flight, p.tiles_target, p.justification) == ([8, 4], 32, 32, "")
    small = plan_tile("gemm", {"M": 2048, "K": 2048, "N": 512})
    assert small.tile["method"] == "drain" and small.tile["tile_m"] == 32  # M*K*N < 4e9
    wide = plan_tile("gemm", {"M": 2048, "K": 2048, "N": 8192})
    assert wide.tile["tile_k_l2"] * 8192 <= 1_048_576
    assert not check_tile("gemm", G, p.tile)


def test_tile_n_shrinks_to_keep_four_tiles_dividing_n():
    assert [gemm_tile_n(n) for n in (2048, 896, 960, 576, 256, 8960)] == [128, 32, 80, 48, 64, 64]


def test_gemv_lm_head_partition_uses_256_iterations_and_down_shrinks_tile_m():
    head = plan_tile("gemv", {"M": 16384, "K": 2048})
    assert head.tile == {"tile_m": 8, "m_input": 8, "herd_m": 8}  # the registry's 8/8/8
    down = plan_tile("gemv", {"M": 2048, "K": 8192})
    assert down.tile["tile_m"] == 2  # L2 budget: the registry's 8/2/2


def test_tiles_below_target_carry_a_justification():
    decode_norm = plan_tile("rmsnorm", {"M": 1, "N": 2048})
    assert decode_norm.tiles_in_flight == 1 and decode_norm.tiles_target == 8
    assert "no row parallelism" in decode_norm.justification
    add = plan_tile("eltwise_add", {"N": 4194304})
    assert add.herd == [8, 1] and add.tiles_in_flight == add.tiles_target == 8
    gelu = plan_tile("gelu", {"N": 3145728})
    assert gelu.herd == [8, 2] and gelu.tiles_in_flight == 16
    fa = plan_tile("flash_attention", {**FA, "heads_q": 9, "heads_kv": 3})
    assert fa.tiles_in_flight == 16 and fa.tiles_target == 32 and "odd" in fa.justification
    assert plan_tile("flash_attention", FA).tiles_in_flight == 32


def test_npu1_is_a_four_by_four_array():
    p = plan_tile("gemm", G, "npu1")
    assert p.herd == [4, 4] and p.tiles_in_flight == p.tiles_target == 16
    with pytest.raises(TileRuleViolation, match="^gemm.herd_fits_array"):
        plan_tile("gemm", G, "npu1", tile={"herd_m": 8})


def test_tile_plans_serialise():
    assert json.loads(json.dumps(plan_tile("rope", {"rows": 8, "head_dim": 64}).to_json()))["herd"] == [8, 1]


# --- the plan --------------------------------------------------------------------------------------------

# docs/numerics.md's worked example for Llama-3.2-1B, as (kernel, shape, phase)
LLAMA_WORKED_EXAMPLE = [
    ("gemm", {"M": 2048, "K": 2048, "N": 2048}, "prefill"),
    ("gemm", {"M": 2048, "K": 2048, "N": 512}, "prefill"),
    ("gemm", {"M": 2048, "K": 2048, "N": 8192}, "prefill"),
    ("gemm", {"M": 2048, "K": 8192, "N": 2048}, "prefill"),
    ("gemv", {"M": 2048, "K": 2048}, "decode"),
    ("gemv", {"M": 512, "K": 2048}, "decode"),
    ("gemv", {"M": 16384, "K": 2048}, "decode"),
    ("rmsnorm", {"M": 2048, "N": 2048}, "prefill"),
    ("rope", {"rows": 65536, "head_dim": 64}, "prefill"),
    ("rope", {"rows": 16384, "head_dim": 64}, "prefill"),
    ("rope", {"rows": 32, "head_dim": 64}, "decode"),
    ("rope", {"rows": 8, "head_dim": 64}, "decode"),
    ("flash_attention", FA, "prefill"),
    ("eltwise_add", {"N": 4194304}, "prefill"),
    ("silu_mul", {"N": 16777216}, "prefill"),
]


def test_llama_3_2_1b_plan_is_the_worked_example_plus_the_two_table_mandated_gemvs():
    rows = plan(_config("llama-3.2-1b"))
    got = [(r.kernel, r.shape, r.phase) for r in rows]
    for row in LLAMA_WORKED_EXAMPLE:
        assert row in got, row
    extra = [row for row in got if row not in LLAMA_WORKED_EXAMPLE]
    # NUMERICS' table lists decode Gate/Up (F x E) and Down (E x F) GEMVs; its worked example leaves them
    # out. The plan follows the table, so these two - and nothing else - are extra.
    assert extra == [("gemv", {"M": 8192, "K": 2048}, "decode"), ("gemv", {"M": 2048, "K": 8192}, "decode")]
    roles = {(r.kernel, tuple(r.shape.values())): r.role for r in rows}
    assert roles[("gemm", (2048, 2048, 2048))] == "Q/O proj"
    assert roles[("gemm", (2048, 2048, 512))] == "K/V proj"
    assert roles[("gemv", (16384, 2048))] == "LM head partition"
    assert all(r.plan.tiles_in_flight == r.plan.tiles_target for r in rows)


def test_smollm2_plan_warns_that_576_is_not_512_aligned():
    rows = plan(_config("smollm2-135m-instruct"))
    gemms = {tuple(r.shape.values()): r for r in rows if r.kernel == "gemm"}
    assert set(gemms) == {(2048, 576, 576), (2048, 576, 192), (2048, 576, 1536), (2048, 1536, 576)}
    qo = gemms[(2048, 576, 576)]
    assert qo.role == "Q/O proj" and qo.plan.tile["tile_n"] == 48
    assert any("N=576 is not 512-aligned" in w for w in qo.warnings)
    assert not any("512-aligned" in w for w in gemms[(2048, 576, 1536)].warnings)
    assert any("not 1024-aligned" in w for w in gemms[(2048, 576, 1536)].warnings)  # K=576: BD risk flagged
    assert any("K=576 < 1024" in w for w in qo.warnings)
    assert not any("< 1024" in w for w in gemms[(2048, 1536, 576)].warnings)
    fa = next(r for r in rows if r.kernel == "flash_attention")
    assert fa.shape["heads_q"] == 9 and fa.plan.tiles_in_flight == 16 and fa.plan.justification
    head = next(r for r in rows if r.role == "LM head partition")
    assert head.shape == {"M": 16384, "K": 576} and not any("vocab" in w for w in head.warnings)  # 3 x 16384
    assert head.workarounds["lm_head_partitions"] == 3 and "pad_vocab_to" not in head.workarounds
    assert json.loads(json.dumps([r.to_json() for r in rows]))[0]["tile"]["tile"]["tile_n"] == 48


def test_qwen3_qk_norm_is_rmsnorm_seq_by_head_dim_per_head_as_mlir_air_runs_it():
    """kernel_registry/details/RMSNorm_bf16.md:104: `2048x128 ... Qwen3-0.6B + Qwen3-1.7B QK-norm (per-head)`."""
    cfg = _config("qwen3-0.6b")
    rows = plan(cfg, seq=2048)
    norms = [(r.shape, r.role) for r in rows if r.kernel == "rmsnorm"]
    assert ({"M": 2048, "N": 128}, "q/k norm (per head, 16+8 calls)") in norms
    assert not any(shape["M"] > 2048 for shape, _ in norms)
    head = next(r for r in rows if r.role == "LM head partition")
    # mlir-air runs Qwen's 151936-row vocabulary as 19 partitions of 8192 (qwen3_0_6b/ARCHITECTURE.md:30, e972f29)
    assert head.shape == {"M": 8192, "K": 1024}
    assert any("vocab 151936 padded with 3712 zero rows to 19x8192" in w for w in head.warnings)
    assert head.workarounds == {"pad_vocab_to": 155648, "lm_head_partitions": 19}
    assert all(r.contract for r in rows)


def test_an_odd_vocab_below_one_partition_is_padded_to_a_legal_tile():
    cfg = ModelConfig(n_layers=2, emb_dim=64, n_heads=2, n_kv_heads=1, head_dim=32, hidden_dim=128, vocab_size=1001)
    head = next(r for r in plan(cfg) if r.role == "LM head partition")
    assert head.plan.legal and head.shape["M"] >= 1001 and head.workarounds["pad_vocab_to"] == head.shape["M"]
    assert plan_tile("gemv", {"M": 1001, "K": 64}).legal is False  # unpadded, it would not run


def test_unaligned_dims_are_flagged_before_compile_with_gqa_aware_padding():
    rows = plan(_config("qwen2.5-0.5b"))  # E=896 (14 q heads, 2 kv heads, D=64), F=4864
    q = next(r for r in rows if r.kernel == "gemm" and r.role == "Q/O proj")
    assert q.workarounds["gqa_reindexed_padding"] == {"n_heads": 16, "q_dim": 1024, "per_kv_group": 8}
    assert q.workarounds["pad_hidden_dim_to"] == 5120
    assert any("not 1024-aligned" in w and "Allocator exhausted" in w for w in q.warnings)
    assert not any("gqa_reindexed_padding" in r.workarounds for r in plan(_config("llama-3.2-1b")))


def test_a_decode_gemv_with_k_beyond_the_repeat_limit_names_its_k_split():
    down = next(r for r in plan(_config("llama-3.2-1b")) if r.kernel == "gemv" and r.role == "Down proj")
    assert down.shape == {"M": 2048, "K": 8192} and down.workarounds["k_split"] == 2
    assert any("k_split=2" in w for w in down.warnings)


def test_seq_and_target_change_the_plan():
    rows = plan(_config("llama-3.2-1b"), target="npu1", seq=256)
    gemm = next(r for r in rows if r.kernel == "gemm")
    assert gemm.shape["M"] == 256 and gemm.plan.tiles_target == 16
    with pytest.raises(ValueError):
        plan(_config("llama-3.2-1b"), seq=0)
