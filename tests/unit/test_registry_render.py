"""Registry projections: JSON schema and best choice, markdown tables, byte-identical rebuilds."""

from __future__ import annotations

import json

from handlers.registry_ops import build_projections
from tests.npu2_facts import npu2_provenance
from ledger.events import KernelVerified
from registry.fold import fold_registry
from registry.projections import project_all, project_registry
from registry.render_json import gemm_document
from registry.synthetic import realistic_deployment_resolved, record, synthetic_kernel_events

GEMM = {"M": 2048, "K": 576, "N": 576}


def kv(kernel="gemm", shape=None, contract="bf16-out-high", executor="mlir-air", source="harness", verdict="PASS",
       gflops=None, method="", mean_rel_L1=9.4e-3, **kw) -> KernelVerified:
    return KernelVerified(kernel=kernel, shape=shape or GEMM, contract=contract, executor=executor, verdict=verdict,
                          rtol=1.6e-2, atol=1.5e-3, mean_rel_L1=mean_rel_L1, gflops=gflops, source=source, method=method,
                          **npu2_provenance(source, kw))


def test_json_shapes_hold_npu2_methods_only_and_the_rest_are_listed_apart_by_provenance():
    doc = gemm_document(fold_registry(record([
        ("deployment:a", kv(executor="emulated", source="emulated", gflops=99999, tile={"tile_m": 64})),
        ("deployment:a", kv(executor="torch", source="torch", gflops=88888, method="drain")),
        ("deployment:a", kv(gflops=4000, method="drain", tile={"tile_m": 32, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 64})),
        ("deployment:a", kv(gflops=5000, method="drain", tile={"tile_m": 32, "tile_k_l2": 512, "tile_k_l1": 32, "tile_n": 64})),
        ("deployment:a", kv(contract="bf16-out-low", gflops=6000, method="direct", herd=[4, 4])),
        ("deployment:a", kv(gflops=7000, method="fused-cast", verdict="FAIL")),
    ])), "bf16")
    (shape,) = doc["shapes"]
    assert list(shape["methods"]) == ["drain", "direct"]  # NPU2 rows only (mlir-air's lookup reads methods), FAIL out
    assert shape["best"] == {"high": "drain", "low": "direct"}
    assert shape["methods"]["drain"]["gflops"] == 5000 and shape["methods"]["drain"]["tile"]["tile_k_l2"] == 512
    assert shape["methods"]["direct"]["herd"] == [4, 4] and "herd" not in shape["methods"]["drain"]
    assert shape["used_by"] == "a"
    assert list(doc) == ["_comment", "kernel", "output_dtype", "target", "measured", "herd", "shapes",
                         "_not_measured_on_npu2"]
    apart = doc["_not_measured_on_npu2"]
    assert [(e["method"], e["provenance"]) for e in apart] == [("emulated", "cpu-emulator"), ("torch:drain", "cpu-emulator")]
    assert all("gflops" not in e for e in apart)


def test_a_shape_with_emulated_evidence_only_is_not_in_the_shapes_mlir_air_reads():
    doc = gemm_document(fold_registry(record([("deployment:a", kv(executor="emulated", source="emulated", gflops=10))])), "bf16")
    assert doc["shapes"] == [] and [e["method"] for e in doc["_not_measured_on_npu2"]] == ["emulated"]


def test_a_harness_row_without_device_and_toolchain_is_unattested_and_never_in_shapes():
    row = KernelVerified(kernel="gemm", shape=GEMM, contract="bf16-out-high", executor="mlir-air", verdict="PASS",
                         rtol=1.6e-2, atol=1.5e-3, mean_rel_L1=9.4e-3, gflops=4000.0, source="harness", method="drain")
    data = fold_registry(record([("deployment:a", row)]))
    (shape_row,) = data.page("gemm_bf16").rows
    assert shape_row.status == "unattested" and not shape_row.best.on_hardware
    doc = gemm_document(data, "bf16")
    assert doc["shapes"] == [] and doc["_not_measured_on_npu2"][0]["provenance"] == "unattested"


def test_a_hardware_pass_without_gflops_derives_it_from_latency():
    doc = gemm_document(fold_registry(record([("deployment:a", kv(latency_us=1000.0, method="drain"))])), "bf16")
    m = doc["shapes"][0]["methods"]["drain"]
    assert m["gflops"] == round(2 * 2048 * 576 * 576 / 1e6) and doc["shapes"][0]["best"] == {"high": "drain"}


def test_markdown_uses_each_kernels_natural_columns_and_marks_emulated_rows():
    files = project_registry(record([
        ("deployment:m", kv(kernel="rmsnorm", shape={"M": 2048, "N": 576}, contract="bf16", executor="emulated",
                            source="emulated", latency_us=100.0)),
        ("deployment:m", kv(kernel="flash_attention", shape={"lq": 2048, "lk": 2048, "dk": 64, "heads": 9,
                                                             "kv_heads": 3, "causal": True}, contract="bf16", gflops=900)),
        ("deployment:m", kv(kernel="gemv", shape={"M": 576, "K": 576}, contract="bf16", gflops=20)),
        ("deployment:m", kv(kernel="eltwise_add", shape={"N": 1179648}, contract="bf16", latency_us=90.0)),
    ]))
    index = files["kernel_registry/supported_kernels.md"].decode()
    assert "| M | N | best method |" in index
    assert "| lq | lk | dk | heads | kv_heads | causal |" in index
    assert "| M | K | best method |" in index and "| N | best method |" in index
    assert "🧪 CPU emulator, not NPU2" in index
    rms = files["kernel_registry/details/RMSNorm_bf16.md"].decode()
    assert "ledger kernel run rmsnorm --shape M=2048,N=576 --contract bf16" in rms
    assert "| bf16 | 1.6e-2 | 1.5e-3 | 1 | recorded in events |" in rms  # tolerance as recorded in the event


def test_a_kernel_without_events_falls_back_to_the_numerics_tolerances():
    gelu = project_registry([])["kernel_registry/details/GELU_bf16.md"].decode()
    assert "| bf16 | 1.6e-2 | 5e-2 | 0 | docs/numerics.md (no events yet) |" in gelu


def test_non_finite_numbers_render_without_breaking_json():
    files = project_registry(record([
        ("deployment:a", kv(verdict="FAIL", mean_rel_L1=float("nan"), gflops=1)),
        ("deployment:a", kv(shape={"M": 64, "K": 64, "N": 64}, mean_rel_L1=float("inf"), gflops=1, method="drain")),
    ]))
    doc = json.loads(files["kernel_registry/details/GEMM_bf16_in_bf16_out.json"])
    # a PASS whose mean_rel_L1 is infinite is implausible (npu_kernels.perf.evidence.check_stored_row): never listed
    assert doc["shapes"] == []
    md = files["kernel_registry/details/GEMM_bf16_in_bf16_out.md"].decode()
    assert "| nan |" in md and "| inf |" in md and "refused: implausible" in md


def test_rebuilding_into_two_empty_directories_gives_identical_bytes_including_the_png(tmp_path):
    events = record(list(synthetic_kernel_events(400)) + realistic_deployment_resolved("smollm2_135m_instruct"))
    first, second = tmp_path / "one", tmp_path / "two"
    r1, r2 = build_projections(events, first), build_projections(events, second)
    assert r1.written == r2.written and len(r1.written) == r1.total
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert any(p.suffix == ".png" for p in files)
    for rel in files:
        assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel
    assert build_projections(events, first).written == ()  # nothing changed, nothing rewritten


def test_projection_does_not_depend_on_the_order_streams_interleave_beyond_seq():
    events = record(synthetic_kernel_events(300))
    assert project_all(events) == project_all(list(events))


def test_a_gemm_row_under_no_method_mlir_airs_lookup_knows_is_kept_apart_and_never_best():
    """Issue #45 item 2: mlir-air's lookup and builders key a GEMM row by its method (registry_lookup.py:51,
    gemm_builder.py:61-101 at e972f29); a row already in the ledger without one (an older `record harness`), or
    with another name, is neither a method nor `best` in the JSON, and is listed apart with why."""
    tile = {"tile_m": 32, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 64}
    data = fold_registry(record([
        ("deployment:a", kv(gflops=9000, tile=tile)),  # no method recorded: would be filed as "mlir-air"
        ("deployment:a", kv(gflops=8500, method="direct", tile=tile)),  # direct is the low tier's, not high's
        ("deployment:a", kv(gflops=4000, method="drain", tile=tile)),
    ]))
    (row,) = data.page("gemm_bf16").rows
    assert row.best.method == "drain" and row.best.seq == 3
    assert [m.seq for m in row.measurements if m.unkeyed] == [1, 2]
    assert any(c.startswith("seq 1 kept apart, never best and not in the JSON: no method recorded") and
               "fused-cast / drain" in c and "--method" in c for c in row.caveats)
    doc = gemm_document(data, "bf16")
    (shape,) = doc["shapes"]
    assert list(shape["methods"]) == ["drain"] and shape["best"] == {"high": "drain"}
    assert [(e["seq"], e["contract"]) for e in doc["_method_unknown_to_lookup"]] == [(1, "bf16-out-high"),
                                                                                      (2, "bf16-out-high")]
    alone = gemm_document(fold_registry(record([("deployment:a", kv(gflops=9000, tile=tile))])), "bf16")
    assert alone["shapes"] == [] and [e["seq"] for e in alone["_method_unknown_to_lookup"]] == [1]
