"""The registry fold: best config, evidence classes, used-by union, status, ordering."""

from __future__ import annotations

from tests.npu2_facts import npu2_provenance
from ledger.events import KernelVerified
from registry.fold import fold_registry
from registry.synthetic import record

GEMM = {"M": 2048, "K": 576, "N": 576}


def kv(verdict="PASS", executor="mlir-air", source="harness", gflops=None, method="", shape=None, kernel="gemm",
       contract="bf16-out-high", role="", **kw) -> KernelVerified:
    return KernelVerified(kernel=kernel, shape=shape or GEMM, contract=contract, executor=executor, verdict=verdict,
                          rtol=1.6e-2, atol=1.5e-3, mean_rel_L1=9.4e-3, gflops=gflops, source=source, method=method,
                          role=role, **npu2_provenance(source, kw))


def only_row(events, key="gemm_bf16"):
    page = fold_registry(events).page(key)
    assert len(page.rows) == 1
    return page.rows[0]


def test_best_config_is_the_fastest_passing_hardware_run():
    row = only_row(record([
        ("deployment:a", kv(gflops=3000, method="drain")),
        ("deployment:a", kv(gflops=5000, method="fused-cast")),
        ("deployment:a", kv(verdict="FAIL", gflops=9000, method="direct")),
    ]))
    assert (row.best.method, row.best.throughput) == ("fused-cast", 5000)
    assert row.status == "caveat"  # the direct FAIL on NPU2 is a recorded caveat
    assert any("direct" in c and "FAIL" in c for c in row.caveats)


def test_an_emulated_row_never_beats_a_hardware_measurement_however_fast():
    row = only_row(record([
        ("deployment:a", kv(executor="emulated", source="emulated", gflops=1e9)),
        ("deployment:a", kv(executor="torch", source="torch", gflops=1e8)),
        ("deployment:a", kv(gflops=100, method="drain")),
    ]))
    assert row.best.method == "drain" and row.best.evidence == "hardware"
    assert row.status == "verified"
    assert set(row.methods) == {"drain", "emulated", "torch"}


def test_a_shape_with_only_emulated_evidence_is_marked_emulated():
    row = only_row(record([("deployment:a", kv(executor="emulated", source="emulated", latency_us=900.0))]))
    assert row.status == "emulated"
    assert row.best.evidence == "emulated" and row.best.method == "emulated"


def test_a_shape_that_only_fails_has_no_best_and_is_failed():
    row = only_row(record([("deployment:a", kv(verdict="FAIL", gflops=1000))]))
    assert row.best is None and row.status == "failed"


def test_hardware_that_only_fails_is_failed_even_when_emulation_passes():
    row = only_row(record([
        ("deployment:a", kv(executor="emulated", source="emulated")),
        ("deployment:a", kv(verdict="FAIL", gflops=1000)),
    ]))
    assert row.status == "failed"


def test_used_by_is_the_union_of_deployments_with_their_roles_and_imported_text():
    row = only_row(record([
        ("deployment:smollm2_135m_instruct", kv(role="Q proj", gflops=1)),
        ("registry:import", kv(role="llama-3.2-1B Q/O proj", source="imported", gflops=2, method="drain")),
        ("deployment:smollm2_135m_instruct", kv(role="O proj", gflops=1)),
        ("deployment:other", kv(gflops=1)),
        ("deployment:smollm2_135m_instruct", kv(role="Q proj", gflops=1)),
    ]))
    assert row.used_by == ("smollm2_135m_instruct Q proj, O proj", "llama-3.2-1B Q/O proj", "other")


def test_only_the_low_tier_verified_is_a_caveat_for_bf16_gemm():
    row = only_row(record([("deployment:a", kv(contract="bf16-out-low", gflops=4000, method="direct"))]))
    assert row.status == "caveat" and "only the low-precision tier is verified" in row.caveats


def test_tiles_below_target_without_justification_is_a_caveat():
    row = only_row(record([("deployment:a", kv(gflops=10, method="drain", tiles_in_flight=16, tiles_target=32))]))
    assert row.status == "caveat"
    justified = only_row(record([("deployment:a", kv(gflops=10, method="drain", tiles_in_flight=16, tiles_target=32,
                                                      tile_justification="M=64 forces herd_m=4"))]))
    assert justified.status == "verified"


def test_kernel_and_shape_spellings_land_on_one_row_and_pages_split_by_output_dtype():
    data = fold_registry(record([
        ("deployment:a", kv(kernel="GEMM", shape={"m": 2048, "k": 576, "n": 576}, gflops=1)),
        ("deployment:a", kv(kernel="gemm", gflops=2)),
        ("deployment:a", kv(kernel="gemm", contract="f32-out", gflops=3)),
        ("deployment:a", kv(kernel="RoPE", shape={"rows": 64, "D": 64}, contract="bf16", gflops=None)),
    ]))
    assert len(data.page("gemm_bf16").rows) == 1 and len(data.page("gemm_bf16").rows[0].measurements) == 2
    assert len(data.page("gemm_f32").rows) == 1
    assert data.page("rope").rows[0].shape == (("rows", 64), ("head_dim", 64))


def test_rows_follow_first_measurement_and_dates_come_from_measured_at_else_recorded_at():
    data = fold_registry(record([
        ("deployment:a", kv(shape={"M": 64, "K": 64, "N": 64}, gflops=1)),
        ("deployment:a", kv(shape={"M": 32, "K": 32, "N": 32}, gflops=1, measured_at="2026-05")),
        ("deployment:a", kv(shape={"M": 64, "K": 64, "N": 64}, gflops=1)),
    ]))
    rows = data.page("gemm_bf16").rows
    assert [dict(r.shape)["M"] for r in rows] == [64, 32]
    assert rows[0].measured == "2026-06-18" and rows[1].measured == "2026-05"


def test_npu1_rows_stay_out_of_the_npu2_registry():
    data = fold_registry(record([("deployment:a", kv(gflops=1, target="npu1"))]))
    assert data.page("gemm_bf16").rows == () and data.n_events == 0


def test_unknown_kernels_get_their_own_page_instead_of_vanishing():
    data = fold_registry(record([("deployment:a", kv(kernel="softmax", shape={"N": 8}, contract="bf16"))]))
    assert data.page("softmax").rows[0].shape == (("N", 8),)
