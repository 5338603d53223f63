"""`ledger reverify --all` on a workspace with two deployed tiny models (real CLI subprocesses).

The tiny Llama and Qwen2 plans are identical row for row (same E, F, heads, head_dim, vocab), so no kernel
row could tell them apart; the tiny Qwen3 (head_dim 128) is the second model: its RoPE rows are
`head_dim=128`, the Llama's (deployment `tiny`, the session's deployed snapshot, tests/e2e/conftest.py)
`head_dim=64`. The declared stand-in fault `rope:head_dim=128` (npu_kernels.numerics.executors.standin) makes that
harness fail.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.cli import ledger, ledger_json, read_in_process
from tests.e2e.workspaces import clone_stream, copy_workspace

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_deployed(tmp_path_factory, tiny_snapshots, tiny_qwen3):
    ws = copy_workspace(tiny_snapshots[7], tmp_path_factory.mktemp("reverify") / "ws")  # `tiny`: the Llama, deployed
    assert ledger(ws, "init", str(tiny_qwen3), "--name", "qwen3").returncode == 0
    proc = ledger(ws, "advance", "qwen3", timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ws


def test_reverify_with_nothing_changed_keeps_both_green_and_re_runs_only_the_token_gates(two_deployed):
    rows = {r["name"]: r for r in ledger_json(two_deployed, "reverify", "--all")}
    assert {r["verdict"] for r in rows.values()} == {"green"}
    assert all(r["rows_rerun"] == 0 and r["token_prompts"] == 2 for r in rows.values())
    assert {r["status"] for r in rows.values()} == {"deployed"}


def test_a_broken_stand_in_harness_blocks_exactly_the_deployment_that_uses_it_and_says_why(two_deployed):
    proc = ledger(two_deployed, "reverify", "--all", "--standin-fault", "rope:head_dim=128", "--json")
    assert proc.returncode == 1, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["tiny"]["verdict"] == "green" and rows["tiny"]["rows_rerun"] == 0
    assert rows["qwen3"]["verdict"] == "REGRESSED" and rows["qwen3"]["rows_rerun"] == 4  # Q and K RoPE, prefill and decode
    assert all("rope" in r and "standin_fault: None -> rope:head_dim=128" in r for r in rows["qwen3"]["regressions"])
    status = {s["name"]: s for s in ledger_json(two_deployed, "status")}
    assert status["tiny"]["status"] == "deployed"
    assert status["qwen3"]["status"] == "needs_human_review"
    assert status["qwen3"]["blockers"][0]["reason"].startswith("reverify regression: Phase 1 rope")
    table = ledger(two_deployed, "reverify", "--all").stdout  # the table: tiny green, qwen3 skipped (blocked)
    assert "tiny" in table and "green" in table and "not deployed" in table
    assert read_in_process(two_deployed, "verify").returncode == 0


def test_reverify_compares_the_phase6_curve_and_blocks_a_point_slower_than_recorded(tiny_at):
    """`tiny` as deployed: every curve point compared, green. `fast`: its stream with one prefill point of the Phase 6
    curve recorded faster than the model gives (Phase 6's own 2048 point untouched): that point regressed."""
    ws = tiny_at(7)
    forged: list[int] = []

    def change(t, p, seq):
        if t == "PerformanceMeasured" and p["phase"] == 6 and p.get("curve"):
            pt = next(pt for pt in p["curve"]["prefill"]["points"]
                      if pt["ttft_ms"] is not None and pt["prefill_len"] != p["profile"]["npu2"]["seq"])
            pt["ttft_ms"] = round(pt["ttft_ms"] * 0.9, 3)
            forged.append(pt["prefill_len"])
        return p

    clone_stream(ws, "tiny", "fast", change)
    assert forged
    proc = ledger(ws, "reverify", "--all", "--json")
    assert proc.returncode == 1, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["tiny"]["verdict"] == "green" and rows["tiny"]["curve_points"] > 2
    assert rows["fast"]["verdict"] == "REGRESSED" and rows["fast"]["status"] == "needs_human_review"
    assert rows["fast"]["regressions"] == [r for r in rows["fast"]["regressions"] if "Phase 6 curve TTFT at" in r]
    assert len(rows["fast"]["regressions"]) == 1, rows["fast"]["regressions"]
