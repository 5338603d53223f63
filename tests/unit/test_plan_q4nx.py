"""The plan of an on-device 4-bit deployment: 4-bit GEMVs in decode, load-time dequant, bf16 prefill unchanged."""

import pytest

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.plan import plan


def cfg(name):
    return resolve(load_raw_config(f"tests/fixtures/configs/{name}.json"))


def rows(p):
    return {(r.phase, r.kernel, tuple(sorted(r.shape.items())), r.role) for r in p}


def test_bf16_and_host_dequant_plan_the_same_rows():
    c = cfg("llama-3.2-1b")
    assert rows(plan(c)) == rows(plan(c, weights="q4nx-host")) == rows(plan(c, weights="bf16"))


def test_on_device_4_bit_swaps_the_decode_gemvs_for_4_bit_gemvs_and_keeps_the_prefill():
    c = cfg("llama-3.2-1b")
    bf16, q4 = plan(c), plan(c, weights="q4nx-device")
    assert {r for r in rows(bf16) if r[0] == "prefill"} == {r for r in rows(q4) if r[0] == "prefill"}
    assert not [r for r in q4 if r.kernel == "gemv"]
    decode = {(r.role, r.shape["M"], r.shape["K"]) for r in q4 if r.kernel == "gemv_q4nx"}
    assert decode == {("Q/O proj", 2048, 2048), ("K/V proj", 512, 2048), ("Gate/Up proj", 8192, 2048),
                      ("Down proj", 2048, 8192), ("LM head", 129024, 2048)}
    load = {(r.role, r.shape["M"], r.shape["K"]) for r in q4 if r.kernel == "dequant_q4nx"}
    assert load == {("Q/O proj", 2048, 2048), ("K/V proj", 512, 2048), ("Gate/Up proj", 8192, 2048),
                    ("Down proj", 2048, 8192)}
    assert all(r.phase == "load" for r in q4 if r.kernel == "dequant_q4nx")
    for r in q4:
        assert r.plan.legal, (r.kernel, r.shape, r.plan.warnings)
        assert r.contract == "bf16-out" if "q4nx" in r.kernel else True


def test_a_576_wide_model_plans_its_4_bit_gemvs_zero_padded_and_says_so():
    q4 = plan(cfg("smollm2-135m-instruct"), weights="q4nx-device")
    qo = next(r for r in q4 if r.kernel == "gemv_q4nx" and r.role == "Q/O proj")
    assert qo.shape == {"M": 576, "K": 768}
    assert qo.workarounds["logical"] == {"M": 576, "K": 576} and "zero-padded to 576x768" in qo.warnings[0]
    head = next(r for r in q4 if r.role == "LM head")
    assert head.workarounds["pad_vocab_to"] == 49536 and head.shape == {"M": 49536, "K": 768}


def test_an_unknown_weight_format_is_refused():
    with pytest.raises(ValueError, match="unknown weights"):
        plan(cfg("llama-3.2-1b"), weights="int4")


def test_a_4_bit_gemv_measured_on_npu2_is_planned_from_the_registry_first():
    from ledger.events import KernelVerified
    from tests.npu2_facts import NPU2_PROVENANCE
    from registry.lookup import PlanningRegistry
    from registry.synthetic import record

    measured = KernelVerified(kernel="gemv_q4nx", shape={"M": 8192, "K": 2048}, contract="bf16-out",
                              executor="mlir-air", verdict="PASS", rtol=1.6e-2, atol=4e-2, mean_rel_L1=3.6e-3,
                              source="harness", latency_us=400.0, tile={"herd_x": 4, "herd_y": 1}, herd=[4, 1],
                              provenance=NPU2_PROVENANCE)
    registry = PlanningRegistry(record([("deployment:q", measured)]))
    q4 = plan(cfg("llama-3.2-1b"), weights="q4nx-device", registry=registry)
    gate_up = next(r for r in q4 if r.kernel == "gemv_q4nx" and r.role == "Gate/Up proj")
    assert gate_up.source.startswith("registry: ") and gate_up.plan.tile["herd_x"] == 4
    others = [r for r in q4 if r.kernel == "gemv_q4nx" and r.role != "Gate/Up proj"]
    assert others and all(r.source == "heuristic" for r in others)


def test_ledger_plan_lists_the_4_bit_rows_for_an_on_device_4_bit_deployment(tmp_path):
    import json

    from click.testing import CliRunner

    from handlers.cli.main import cli

    base = ["--workspace", str(tmp_path), "plan", "tests/fixtures/configs/llama-3.2-1b.json", "--json"]
    r = CliRunner().invoke(cli, base + ["--weights", "q4nx-device"])
    assert r.exit_code == 0, r.output
    kernels = {row["kernel"] for row in json.loads(r.output)}
    assert {"gemv_q4nx", "dequant_q4nx", "gemm"} <= kernels and "gemv" not in kernels
    plain = CliRunner().invoke(cli, base)
    assert "gemv_q4nx" not in plain.output and '"gemv"' in plain.output
