"""The registry's tables for the 4-bit (Q4NX) kernels: their pages, columns, fallback tolerances, lookups."""

from ledger.events import KernelVerified
from registry.catalog import canonical_kernel
from registry.projections import project_registry
from registry.synthetic import record


def kv(kernel, shape, **kw):
    return KernelVerified(kernel=kernel, shape=shape, contract="bf16-out", executor="emulated", verdict="PASS",
                          rtol=1.6e-2, atol=4e-2, mean_rel_L1=3.6e-3, source="emulated", **kw)


def test_the_4_bit_kernels_get_their_own_pages_with_m_k_columns():
    files = project_registry(record([
        ("deployment:q", kv("gemv_q4nx", {"M": 2048, "K": 2048}, latency_us=100.0)),
        ("deployment:q", kv("dequant_q4nx", {"M": 512, "K": 2048}, latency_us=50.0)),
    ]))
    gemv = files["kernel_registry/details/GEMV_Q4NX_bf16.md"].decode()
    assert "ledger kernel run gemv_q4nx --shape M=2048,K=2048" in gemv
    dq = files["kernel_registry/details/Dequant_Q4NX_bf16.md"].decode()
    assert "ledger kernel run dequant_q4nx --shape M=512,K=2048" in dq
    index = files["kernel_registry/supported_kernels.md"].decode()
    assert "GEMV (Q4NX 4-bit weights, BF16)" in index and "Q4NX dequant" in index


def test_without_events_the_4_bit_pages_show_the_thresholds_tolerances_and_no_npu2_figure():
    files = project_registry([])
    dq = files["kernel_registry/details/Dequant_Q4NX_bf16.md"].decode()
    assert "| bf16 | 1e-1 | 5e-2 | 0 | docs/numerics.md (no events yet) |" in dq  # dequant_q4nx.py's run_test bounds
    assert "not measured" in dq


def test_upstream_spellings_land_on_the_4_bit_rows():
    assert canonical_kernel("Dequant_Q4NX") == "dequant_q4nx" and canonical_kernel("GEMV-Q4NX") == "gemv_q4nx"
