"""Lookups raise on what was never measured, naming what exists and how to add it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from handlers.cli.registry import registry
from handlers.registry_ops import build_projections
from tests.npu2_facts import NPU2_PROVENANCE, npu2_provenance
from ledger.events import KernelVerified
from registry.lookup import gemm_config, gemm_config_method, kernel_rows
from registry.synthetic import record


def kv(kernel="gemm", shape=None, contract="bf16-out-high", executor="mlir-air", source="harness", gflops=1000.0,
       method="drain", **kw):
    return KernelVerified(kernel=kernel, shape=shape or {"M": 256, "K": 576, "N": 576}, contract=contract,
                          executor=executor, verdict="PASS", rtol=1.6e-2, atol=1.5e-3, mean_rel_L1=9.4e-3, gflops=gflops,
                          source=source, method=method,
                          tile={"tile_m": 32, "tile_k_l2": 192, "tile_k_l1": 32, "tile_n": 64},
                          **npu2_provenance(source, kw))


@pytest.fixture()
def events():
    return record([
        ("deployment:smollm2", kv(role="Q/O proj")),
        ("deployment:smollm2", kv(shape={"M": 256, "K": 576, "N": 192}, executor="emulated", source="emulated", method="")),
        ("deployment:smollm2", kv(kernel="rmsnorm", shape={"M": 256, "N": 576}, contract="bf16", gflops=None,
                                  latency_us=50.0, method="")),
        ("deployment:smollm2", kv(kernel="rope", shape={"rows": 2304, "D": 64}, contract="bf16", gflops=None, method="")),
    ])


@pytest.fixture()
def details(tmp_path, events):
    build_projections(events, tmp_path)
    return tmp_path / "kernel_registry" / "details"


def test_gemm_config_returns_upstreams_answer_shape(details):
    assert gemm_config(256, 576, 576, registry_dir=details) == {
        "method": "drain", "tile": {"tile_m": 32, "tile_k_l2": 192, "tile_k_l1": 32, "tile_n": 64},
        "gflops": 1000, "mean_rel_L1": 9.4e-3,
    }
    assert gemm_config_method(256, 576, 576, "bf16", "drain", registry_dir=details)["method"] == "drain"


def test_an_unmeasured_shape_raises_naming_the_measured_shapes_and_the_command(details):
    with pytest.raises(KeyError) as e:
        gemm_config(512, 576, 576, registry_dir=details)
    msg = e.value.args[0]
    assert "(256, 576, 576)" in msg and "ledger kernel run gemm --shape M=512,K=576,N=576 --contract bf16-out-high" in msg


def test_an_unmeasured_tier_raises_naming_the_tiers_there_are(details):
    with pytest.raises(KeyError) as e:
        gemm_config(256, 576, 576, precision="low", registry_dir=details)
    assert "available: ['high']" in e.value.args[0] and "--contract bf16-out-low" in e.value.args[0]


def test_emulated_evidence_alone_never_answers_a_gemm_lookup(details):
    with pytest.raises(KeyError, match="not in registry"):
        gemm_config(256, 576, 192, registry_dir=details)


def test_an_unknown_dtype_is_a_value_error_and_a_missing_file_names_the_build(tmp_path, details):
    with pytest.raises(ValueError):
        gemm_config(256, 576, 576, output_dtype="fp8", registry_dir=details)
    with pytest.raises(FileNotFoundError, match="ledger registry build"):
        gemm_config(256, 576, 576, registry_dir=tmp_path / "nowhere")


def test_kernel_rows_match_any_spelling_and_raise_with_the_fix(events):
    (row,) = kernel_rows("rmsnorm", events, M=256, N=576)
    assert row.status == "verified" and row.best.throughput == pytest.approx((2 * 256 * 576 + 576) * 2 / 50e3)
    assert kernel_rows("RoPE", events, head_dim=64)[0].shape == (("rows", 2304), ("head_dim", 64))
    assert len(kernel_rows("gemm", events, K=576)) == 2
    with pytest.raises(KeyError) as e:
        kernel_rows("rmsnorm", events, M=2048, N=576)
    assert "M=256,N=576" in e.value.args[0] and "ledger kernel run rmsnorm --shape M=2048,N=576" in e.value.args[0]
    with pytest.raises(KeyError, match="unknown kernel"):
        kernel_rows("conv2d", events)


def test_cli_lookup_gemm_and_other_kernels(details, events, tmp_path):
    obj = {"open_ledger": lambda: type("L", (), {"read_all": lambda self: events})(), "workspace": tmp_path}
    runner = CliRunner()
    out = runner.invoke(registry, ["lookup", "gemm", "256", "576", "576", "--json"], obj=obj)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["method"] == "drain"
    out = runner.invoke(registry, ["lookup", "gemm", "256", "576", "576", "--precision", "low"], obj=obj)
    assert out.exit_code == 1 and "no 'low'-precision best" in out.output
    out = runner.invoke(registry, ["lookup", "rmsnorm", "M=256,N=576", "--json"], obj=obj)
    assert out.exit_code == 0 and json.loads(out.output)[0]["shape"] == {"M": 256, "N": 576}
    out = runner.invoke(registry, ["lookup", "rope", "rows=1"], obj=obj)
    assert out.exit_code == 1 and "ledger kernel run rope" in out.output


def test_lookup_without_a_tier_and_plan_agree_on_the_tier_of_a_shape(tmp_path):
    """Issue #40: `registry lookup gemm 2048 576 576` suggested bf16-out-high where `plan` runs the shape on the low
    tier. Without --precision the lookup asks what the plan asks (registry.lookup.planned_tiers): an unmeasured
    K < 1024 shape names bf16-out-low, a shape measured on the high tier only answers high, as the plan takes it."""
    from npu_kernels.model.config import ModelConfig
    from npu_kernels.model.plan import plan
    from registry.lookup import PlanningRegistry

    cfg = ModelConfig(n_layers=1, emb_dim=576, n_heads=9, n_kv_heads=3, head_dim=64, hidden_dim=1536, vocab_size=49152)
    # a high-tier row whose tile the planner accepts at the full herd (tile_n x herd_n = 48 x 4 divides 576)
    events = record([("deployment:smollm2", kv(role="Q/O proj").model_copy(
        update={"tile": {"tile_m": 32, "tile_k_l2": 192, "tile_k_l1": 32, "tile_n": 48}}))])
    build_projections(events, tmp_path)
    obj = {"open_ledger": lambda: type("L", (), {"read_all": lambda self: events})(), "workspace": tmp_path}
    runner = CliRunner()
    for seq in (2048, 256):
        [row] = [r for r in plan(cfg, seq=seq, registry=PlanningRegistry(events, None))
                 if r.kernel == "gemm" and r.shape == {"M": seq, "K": 576, "N": 576}]
        out = runner.invoke(registry, ["lookup", "gemm", str(seq), "576", "576", "--json"], obj=obj)
        if seq == 2048:  # unmeasured: the plan's heuristic tier, and the lookup's hint names its contract
            assert row.contract == "bf16-out-low" and row.source == "heuristic"
            assert out.exit_code == 1 and "--contract bf16-out-low" in out.output
        else:  # measured high only: both take the measured high row
            assert row.tier == "high" and row.source.startswith("registry:")
            assert out.exit_code == 0 and json.loads(out.output)["precision"] == row.tier
