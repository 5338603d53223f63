"""A 4-bit deployment end to end (issue #26): `ledger quantize` a tiny model, `ledger init BUNDLE --base`,
`ledger advance` 0 -> 7 on the emulated executor, audit PASS; the evaluation report shows the implementation
(vs the dequantised reference) and the quantisation (vs bf16) apart. One from-scratch deployment for the
whole file (`q4nx_snapshot`, shared by the xdist workers); the drill runs on a copy of it. Not `slow` (that mark is
for the real SmolLM2): `make test-fast` deploys the tiny 4-bit model too (issue #26, "a tiny model in the fast
suite")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.cli import ledger, ledger_json
from tests.e2e.workspaces import clone_stream, copy_workspace, requesting, workspace_ledger
from tests import prebuilt


@pytest.fixture(scope="session")
def q4nx_bundle(tmp_path_factory, tiny_llama) -> Path:
    return prebuilt.q4nx_bundle(tmp_path_factory)


@pytest.fixture(scope="session")
def q4nx_snapshot(tmp_path_factory, tiny_llama, q4nx_bundle) -> Path:
    """A workspace where `tq` (the tiny Llama's Q4NX bundle on its bf16 base) is deployed (never hand it out)."""
    return prebuilt.q4nx_snapshot(tmp_path_factory)


def _events(ws: Path, type_: str) -> list[dict]:
    return [e.payload for e in workspace_ledger(ws).read_stream("deployment:tq") if e.type == type_]


def test_a_quantized_tiny_model_deploys_to_deployed_and_the_audit_passes(q4nx_snapshot, tmp_path):
    ws = copy_workspace(q4nx_snapshot, tmp_path / "ws")
    assert ledger_json(ws, "status", "tq")["status"] == "deployed"
    [read] = _events(ws, "QuantisedBundleRead")
    assert read["layout"] == "llama" and read["padded"] == [] and len(read["dequantised_sha256"]) == 64
    [budget] = _events(ws, "QuantisationBudgetMeasured")
    assert budget["passed"] and budget["n_prompts"] == 16 and budget["kl_mean"] > 0  # 4 bits do move the model
    [evaluation] = _events(ws, "EvaluationRecorded")
    assert evaluation["verdict"] == "PASS", evaluation["findings"]
    report = (ws / "llms" / "tq" / "docs" / "evaluation_report.md").read_text()
    assert "vs dequantised; quantisation: KL mean" in report and "| implementation |" in report
    assert f"{budget['kl_mean']:.4f} vs bf16" in report


def test_the_wrong_group_drill_fails_every_instruct_prompt_while_the_budget_stays_green(q4nx_snapshot, tmp_path):
    ws = copy_workspace(q4nx_snapshot, tmp_path / "ws")
    proc = ledger(ws, "verify-model", "tq", "--full", "--inject", "q4nx_group_scale_shift", "--json")
    drill = json.loads(proc.stdout)
    prompts = drill["prompts"]
    assert len(prompts) == 8 and all(p["prompt"] for p in prompts)
    assert drill["caught"] == 8 and not any(p["passed"] for p in prompts)  # the Phase 3 gate, every instruct prompt
    assert all(p["pipeline"]["faults"] == ["q4nx_group_scale_shift"] for p in prompts)
    [budget] = _events(ws, "QuantisationBudgetMeasured")
    assert budget["passed"] and not budget["problems"]  # the quantisation itself is fine: the implementation is not


def test_init_refuses_a_bundle_the_config_disagrees_with_a_wrong_scale_dtype_and_fp16(tiny_llama, q4nx_bundle, tmp_path):
    base = tmp_path / "wider"
    shutil.copytree(tiny_llama, base)
    cfg = json.loads((base / "config.json").read_text())
    cfg["intermediate_size"] *= 2
    (base / "config.json").write_text(json.dumps(cfg))
    ws = tmp_path / "ws"
    cases = {"shapes": ("init", str(q4nx_bundle), "--base", str(base), "--name", "a"),
             "fp16": ("init", str(tiny_llama), "--dtype", "fp16", "--name", "b"),
             "no base": ("init", str(q4nx_bundle), "--dtype", "q4nx", "--name", "c")}
    said = {}
    for what, args in cases.items():
        proc = ledger(ws, *args)
        assert proc.returncode == 1, what
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: "), (what, proc.stderr)
        said[what] = proc.stderr
    assert "gate_proj" in said["shapes"] and "fp16 is not implemented" in said["fp16"] and "--base" in said["no base"]
    assert not (ws / ".ledger" / "ledger.db").exists() or not workspace_ledger(ws).streams("deployment:")


# --- the on-device style (llama32_1b_q4nx: 4-bit decode GEMVs, fused one-dispatch decode) -------------------


@pytest.fixture(scope="session")
def q4nx_device_snapshot(tmp_path_factory, tiny_llama, q4nx_bundle) -> Path:
    """A workspace where `tqd` (the bundle in the on-device style) is deployed (never hand it out)."""
    return prebuilt.q4nx_device_snapshot(tmp_path_factory)


def _stream(ws: Path, name: str, type_: str) -> list[dict]:
    return [e.payload for e in workspace_ledger(ws).read_stream(f"deployment:{name}") if e.type == type_]


def test_an_on_device_4_bit_deployment_verifies_the_4_bit_kernels_fuses_its_decode_and_passes_the_audit(
        q4nx_device_snapshot, tmp_path):
    ws = copy_workspace(q4nx_device_snapshot, tmp_path / "ws")
    assert ledger_json(ws, "status", "tqd")["status"] == "deployed"
    [read] = _stream(ws, "tqd", "QuantisedBundleRead")
    assert read["style"] == "device" and len(read["decode_sha256"]) == 64
    rows = _stream(ws, "tqd", "KernelVerified")
    stages = {(r["kernel"], r["stage"]) for r in rows}
    assert {("dequant_q4nx", "load"), ("gemv_q4nx", "decode")} <= stages  # Phase 1 verified the 4-bit kernels
    assert not any(r["kernel"] == "gemv" for r in rows)  # the bf16 decode GEMVs are not in this plan
    assert all(r["verdict"] == "PASS" for r in rows)
    tried = {(t["phase"], t["optimisation"]): t["outcome"] for t in _stream(ws, "tqd", "OptimizationTried")}
    assert tried[(5, "decode:fusion")] == "applied"  # one dispatch per token: the fused decode
    [final] = [p for p in _stream(ws, "tqd", "PerformanceMeasured") if p["phase"] == 6]
    assert list(final["profile"]["npu2"]["per_elf"]["decode"]) == ["fused_decode"]
    [evaluation] = _stream(ws, "tqd", "EvaluationRecorded")
    assert evaluation["verdict"] == "PASS", evaluation["findings"]
    report = (ws / "llms" / "tqd" / "docs" / "evaluation_report.md").read_text()
    assert "decode's re-quantised ones (on-device style" in report and "dequantised + re-quantised vs original" in report


def test_a_changed_decode_requant_fails_the_audit_naming_it(q4nx_device_snapshot, tmp_path):
    ws = copy_workspace(q4nx_device_snapshot, tmp_path / "ws")
    [decode] = list((ws / ".ledger" / "q4nx").glob("*/decode.requant"))
    # the recorded model_path is the snapshot's own folder: a clone of the stream points at this copy of it
    clone_stream(ws, "tqd", "tqd2", requesting(model_path=str(decode.parent)))
    assert ledger_json(ws, "audit", "tqd2")["verdict"] == "PASS"  # untouched, the copy audits as the original
    raw = bytearray(decode.read_bytes())
    raw[-2] ^= 0x01  # one bf16 weight of the last tensor, one mantissa bit: the file stays a valid container
    decode.write_bytes(bytes(raw))
    proc = ledger(ws, "audit", "tqd2", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["verdict"] == "FAIL"
    said = [f["message"] for f in report["findings"] if f["check"] == "quantisation"]
    assert any("decode.requant" in m for m in said), report["findings"]


def test_init_refuses_the_device_style_where_it_cannot_run_in_one_line(tiny_llama, q4nx_bundle, tmp_path):
    ws = tmp_path / "ws"
    cases = {"mlir-air": ("init", str(q4nx_bundle), "--base", str(tiny_llama), "--q4nx-style", "device",
                          "--executor", "mlir-air", "--name", "d1"),
             "bf16": ("init", str(tiny_llama), "--q4nx-style", "device", "--name", "d2")}
    for what, args in cases.items():
        proc = ledger(ws, *args)
        assert proc.returncode == 1, what
        assert len(proc.stderr.strip().splitlines()) == 1 and "--q4nx-style device" in proc.stderr, (what, proc.stderr)
    assert not (ws / ".ledger" / "ledger.db").exists() or not workspace_ledger(ws).streams("deployment:")


def test_quantize_says_how_many_projections_it_quantised_of_how_many(tmp_path, tiny_lfm2):
    # issue 48 item 5: on LFM2 dd99c44 printed "3 4-bit projections" and left 14 of its 17 in bf16 unsaid
    proc = ledger(tmp_path, "quantize", str(tiny_lfm2), "--to", "q4nx", str(tmp_path / "lfm2.q4nx"))
    assert proc.returncode == 0, proc.stderr
    assert "17 of 17 projections 4-bit" in proc.stdout
    out = json.loads(ledger(tmp_path, "quantize", str(tiny_lfm2), "--to", "q4nx", str(tmp_path / "b.q4nx"),
                            "--json").stdout)
    assert out["n_projections"] == out["n_projections_total"] == 17
