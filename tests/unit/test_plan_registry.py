"""Registry-first planning (issue #24): a planned row whose exact shape the registry measured takes the
registry's best row, the same answer `ledger registry lookup` gives; an unseen shape says `heuristic`; a
method whose only measured rows for a shape FAIL is not planned; the record PhaseStarted keeps rebuilds the
plan and re-derives from the registry it cites (the evaluator's check)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from handlers.cli.main import cli as cli_main
from handlers.evaluator.plan_sources import plan_source_findings
from handlers.triage import triage_evidence
from handlers.triage.registry_check import check_fixes
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.plan import HEURISTIC, plan
from npu_kernels.model.plan_record import plan_sources, replan
from tests.npu2_facts import NPU2_PROVENANCE
from ledger.events import KernelVerified, PhaseStarted
from registry.importer import IMPORT_STREAM, events_from_upstream
from registry.lookup import PlanningRegistry
from registry.synthetic import record

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "fixtures" / "upstream_registry"
CONFIGS = ROOT / "tests" / "fixtures" / "configs"


def _imported():
    items = []
    for path in sorted(UPSTREAM.glob("*.json")):
        items += [(IMPORT_STREAM, event, event_id) for event_id, event in events_from_upstream(path)]
    return items


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A workspace whose ledger holds the imported upstream registry, its projections built."""
    ws = tmp_path_factory.mktemp("ws")
    r = CliRunner().invoke(cli_main, ["--workspace", str(ws), "registry", "import", str(UPSTREAM)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli_main, ["--workspace", str(ws), "registry", "build"])
    assert r.exit_code == 0, r.output
    return ws


def _lookup(ws: Path, M: int, K: int, N: int, tier: str) -> dict | None:
    r = CliRunner().invoke(cli_main, ["--workspace", str(ws), "registry", "lookup", "gemm", str(M), str(K), str(N),
                                      "--precision", tier, "--json"])
    return json.loads(r.output) if r.exit_code == 0 else None


@pytest.mark.parametrize("config", ["llama-3.2-1b", "qwen2.5-0.5b", "smollm2-1.7b"])
def test_every_planned_gemm_row_is_the_registry_lookup_answer(workspace, config):
    r = CliRunner().invoke(cli_main, ["--workspace", str(workspace), "plan", str(CONFIGS / f"{config}.json"), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    seen = 0
    for row in (x for x in rows if x["kernel"] == "gemm"):
        s = row["shape"]
        planned_tier = "low" if s["K"] < 1024 else "high"
        answers = {t: _lookup(workspace, s["M"], s["K"], s["N"], t) for t in ("high", "low")}
        answer = answers[planned_tier] or answers["low" if planned_tier == "high" else "high"]
        if answer is None:
            assert row["source"] == HEURISTIC, row
            continue
        seen += 1
        assert row["source"].startswith("registry: "), row
        assert f"{s['M']}x{s['K']}x{s['N']}" in row["source"]
        tile = row["tile"]["tile"]
        assert {k: tile[k] for k in answer["tile"]} == answer["tile"], (row, answer)
        assert row["method"] == answer["method"]
        assert [tile["herd_m"], tile["herd_n"]] == answer.get("herd", [8, 4])
        assert row["contract"] == {"high": "bf16-out-high", "low": "bf16-out-low"}[row["tier"]]
    assert seen >= 3  # every one of these models has measured projection shapes


def test_the_issue_examples(workspace):
    """Llama-3.2-1B Q/O 2048^3 at tile_k_l2 512, Gate/Up 2048x2048x8192 at 256; Qwen2.5-0.5B Q/O at 128 (drain)."""
    llama = {tuple(r["shape"].values()): r for r in _plan_json(workspace, "llama-3.2-1b") if r["kernel"] == "gemm"}
    assert llama[(2048, 2048, 2048)]["tile"]["tile"]["tile_k_l2"] == 512
    assert llama[(2048, 2048, 8192)]["tile"]["tile"]["tile_k_l2"] == 256
    qwen = {tuple(r["shape"].values()): r for r in _plan_json(workspace, "qwen2.5-0.5b") if r["kernel"] == "gemm"}
    assert qwen[(2048, 896, 896)]["tile"]["tile"]["tile_k_l2"] == 128
    assert qwen[(2048, 896, 4864)]["method"] == "direct" and qwen[(2048, 896, 4864)]["tier"] == "low"


def _plan_json(ws: Path, config: str) -> list[dict]:
    r = CliRunner().invoke(cli_main, ["--workspace", str(ws), "plan", str(CONFIGS / f"{config}.json"), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


TINY = ModelConfig(n_layers=2, emb_dim=64, n_heads=4, n_kv_heads=2, head_dim=16, hidden_dim=128, vocab_size=256)


def test_unseen_shapes_are_heuristic_and_unchanged():
    registry = PlanningRegistry(record(_imported()))
    with_registry = plan(TINY, registry=registry)
    assert {r.source for r in with_registry} == {HEURISTIC}
    assert [r.to_json() for r in with_registry] == [r.to_json() for r in plan(TINY)]


def _hardware_fail(M: int, K: int, N: int, method: str) -> KernelVerified:
    return KernelVerified(
        kernel="gemm", shape={"M": M, "K": K, "N": N}, contract="bf16-out-high", executor="mlir-air", verdict="FAIL",
        rtol=4e-2, atol=1.5e-3, mean_rel_L1=0.8, max_abs=3.0, max_rel=10.0, mismatches=900, n_elements=1000,
        tile={"tile_m": 64, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 128, "herd_m": 8, "herd_n": 4, "method": method},
        method=method, tier="high", herd=[8, 4], tiles_in_flight=32, tiles_target=32, source="harness", role="x",
        provenance=NPU2_PROVENANCE)


def test_a_method_that_only_failed_on_a_shape_is_not_planned():
    cfg = ModelConfig(n_layers=1, emb_dim=2048, n_heads=32, n_kv_heads=8, head_dim=64, hidden_dim=5632,
                      vocab_size=32000)  # Gate/Up 2048x2048x5632: no registry row
    shape = {"M": 2048, "K": 2048, "N": 5632}
    heuristic = next(r for r in plan(cfg) if r.kernel == "gemm" and r.shape == shape)
    registry = PlanningRegistry(record([("deployment:x", _hardware_fail(2048, 2048, 5632, heuristic.method))]))
    row = next(r for r in plan(cfg, registry=registry) if r.kernel == "gemm" and r.shape == shape)
    assert row.source == HEURISTIC and row.method != heuristic.method
    assert any("records it only failing" in w for w in row.warnings)


def test_the_recorded_plan_rebuilds_and_re_derives(workspace):
    cfg = resolve(load_raw_config(CONFIGS / "llama-3.2-1b.json"))
    events = record(_imported())
    registry = PlanningRegistry(events)
    rows = plan(cfg, registry=registry)
    sources = {**registry.record(), "rows": plan_sources(rows)}
    assert [r.to_json() for r in replan(cfg, "npu2", sources)] == [r.to_json() for r in rows]
    started = record([("deployment:d", PhaseStarted(phase=1, attempt=1, plan_sources=sources))])
    assert plan_source_findings(started, events, cfg, "npu2") == []
    forged = json.loads(json.dumps(sources))
    row = next(r for r in forged["rows"] if r["source"].startswith("registry: "))
    row["source"], row["tile"]["tile_k_l2"] = HEURISTIC, 64
    bad = record([("deployment:d", PhaseStarted(phase=1, attempt=1, plan_sources=forged))])
    findings = plan_source_findings(bad, events, cfg, "npu2")
    assert len(findings) == 1 and findings[0].severity == "error" and "records source='heuristic'" in findings[0].message


def test_an_mlir_air_registry_is_read_when_set(tmp_path):
    details = tmp_path / "programming_examples" / "kernel_registry" / "details"
    details.mkdir(parents=True)
    for f in UPSTREAM.glob("*.json"):
        (details / f.name).write_bytes(f.read_bytes())
    registry = PlanningRegistry((), tmp_path)
    cfg = resolve(load_raw_config(CONFIGS / "llama-3.2-1b.json"))
    row = next(r for r in plan(cfg, registry=registry) if r.kernel == "gemm" and r.shape["N"] == 8192)
    assert row.source.startswith(f"registry: {details / 'GEMM_bf16_in_bf16_out.json'} (sha256 ")
    assert row.plan.tile["tile_k_l2"] == 256


def test_triage_does_not_offer_a_fix_the_registry_records_failing():
    """`aie.dma_bd Stride ... exceeds` at 2048x2560x9728: the registry's note records fused-cast failing with it
    (tile_k_l2 >= 128), so the rule's fused-cast fix is not offered and the next one is."""
    registry = PlanningRegistry(record(_imported()))
    text = "error: 'aie.dma_bd' op Stride 2490368 exceeds [1:1048576]"
    evidence = {"kernel": "gemm", "shape": {"M": 2048, "K": 2560, "N": 9728}}
    plain = next(m for m in triage_evidence(evidence, text) if m.rule_id == "gemm-b-stride-cap")
    assert "fused-cast" in plain.remedy
    checked = next(m for m in check_fixes(triage_evidence(evidence, text), evidence, registry)
                   if m.rule_id == "gemm-b-stride-cap")
    assert checked.remedy.startswith("Lower tile_k_l2")
    assert any("records fused-cast failing" in c and "2048x2560x9728" in c for c in checked.fix_checks)
    unseen = {"kernel": "gemm", "shape": {"M": 2048, "K": 2048, "N": 20480}}
    kept = next(m for m in check_fixes(triage_evidence(unseen, text), unseen, registry) if m.rule_id == "gemm-b-stride-cap")
    assert kept.remedy == plain.remedy and "no recorded failure" in kept.fix_checks[0]
