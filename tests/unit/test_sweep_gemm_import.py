"""New-M GEMM rows (issue #38 item 5): `ledger registry import` reads what mlir-air's kernel_registry/sweep_gemm.py
(@14f5590) writes - its results list (--out: one row per config run, `ok`, GFLOP/s, mean_rel_L1) and its --emit
entries (registry-shaped) - and `ledger plan --seq 4096` follows those rows where measured and says heuristic
where not.

The results file here is test input written the way sweep_gemm.py's `plan` (seed mode) and `main` write it: each
M=2048 winner of the fixture registry (e972f29) carried to M=4096. Its GFLOP/s are the seeds' own figures, a
stand-in: the test needs a figure to carry, not a measurement (no M=4096 sweep of mlir-air's was stored)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from npu_kernels.model.plan import HEURISTIC
from registry.importer_sweep_gemm import events_from_sweep_gemm, is_sweep_gemm
from tests.e2e.cli import in_process

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "fixtures" / "upstream_registry"
LLAMA = ROOT / "tests" / "fixtures" / "configs" / "llama-3.2-1b.json"
SWEPT = [(2048, 2048), (2048, 512), (2048, 8192)]  # Q/O, K/V, Gate/Up of Llama-3.2-1B; Down (8192, 2048) left out


def _results_rows() -> list[dict]:
    """sweep_gemm.py's --out rows for M=4096 seeded from the fixture's M=2048 winners (see the module docstring),
    plus a pruned config (ok false) and a slower duplicate of one (the script keeps the fastest in `emit`)."""
    reg = json.loads((UPSTREAM / "GEMM_bf16_in_bf16_out.json").read_text())
    seeds = {(s["K"], s["N"]): s for s in reg["shapes"] if s["M"] == 2048}
    rows = []
    for k, n in SWEPT:
        for method, m in seeds[(k, n)]["methods"].items():
            rows.append({"M": 4096, "K": k, "N": n, "method": method, "tile": m["tile"], "used_by": seeds[(k, n)].get(
                "used_by", ""), "ok": True, "gflops": m["gflops"], "mean_rel_L1": m["mean_rel_L1"], "seconds": 61.0,
                "note": ""})
    slow = {**rows[0], "tile": {**rows[0]["tile"], "tile_n": 64}, "gflops": rows[0]["gflops"] / 2}
    pruned = {**rows[0], "tile": {**rows[0]["tile"], "tile_m": 128}, "ok": False, "gflops": None,
              "mean_rel_L1": None, "note": "build/run failed"}
    return rows + [slow, pruned]


def test_sweep_gemm_rows_import_and_plan_at_4096_follows_them_where_measured(tmp_path):
    details = tmp_path / "details"
    shutil.copytree(UPSTREAM, details, ignore=shutil.ignore_patterns("*.md"))
    rows = _results_rows()
    (details / "m4096.json").write_text(json.dumps(rows, indent=2))
    ws = tmp_path / "ws"
    done = in_process(ws, "registry", "import", str(details), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    account = next(a for a in json.loads(done.stdout) if a["file"] == "m4096.json")
    methods = len(rows) - 2
    assert (account["read"], account["imported"], account["skipped"]) == (len(rows), methods, 0)
    assert in_process(ws, "registry", "import", str(details)).returncode == 0  # idempotent

    plan = json.loads(in_process(ws, "plan", str(LLAMA), "--seq", "4096", "--json").stdout)
    gemm = {(r["shape"]["K"], r["shape"]["N"]): r for r in plan if r["kernel"] == "gemm" and r["shape"]["M"] == 4096}
    assert set(SWEPT) < set(gemm)
    for k, n in SWEPT:
        row = gemm[(k, n)]
        assert row["source"].startswith("registry: ") and f"4096x{k}x{n}" in row["source"], row
        fastest = max((r for r in rows if (r["K"], r["N"], r["method"]) == (k, n, row["method"]) and r["ok"]),
                      key=lambda r: r["gflops"])
        assert {x: row["tile"]["tile"][x] for x in fastest["tile"]} == fastest["tile"]
    assert gemm[(8192, 2048)]["source"] == HEURISTIC  # Down: not swept at 4096
    at_2048 = json.loads(in_process(ws, "plan", str(LLAMA), "--json").stdout)
    assert all(r["shape"].get("M") != 4096 for r in at_2048 if r["kernel"] == "gemm")


def test_the_emitted_entries_read_the_same_and_a_bad_figure_refuses_the_file(tmp_path):
    rows = _results_rows()
    results = tmp_path / "out.json"
    results.write_text(json.dumps(rows))
    from_results, _ = events_from_sweep_gemm(results)
    emitted = []  # sweep_gemm.py `emit`: one entry per shape, each method's fastest ok row
    for ev in (e for _, e in from_results):
        entry = next((x for x in emitted if (x["K"], x["N"]) == (ev.shape["K"], ev.shape["N"])), None)
        if entry is None:
            entry = {"M": 4096, "K": ev.shape["K"], "N": ev.shape["N"], "used_by": ev.role, "methods": {}, "best": {}}
            emitted.append(entry)
        entry["methods"][ev.method] = {"tile": ev.tile, "gflops": ev.gflops, "mean_rel_L1": ev.mean_rel_L1,
                                       "tier": ev.tier}
    path = tmp_path / "emit.json"
    path.write_text(json.dumps(emitted))
    assert is_sweep_gemm(emitted) and is_sweep_gemm(rows) and not is_sweep_gemm({"kernel": "GEMM"})
    from_emit, _ = events_from_sweep_gemm(path)
    key = lambda e: (e.shape["K"], e.shape["N"], e.method, json.dumps(e.tile, sort_keys=True), e.gflops)  # noqa: E731
    assert sorted(map(key, (e for _, e in from_emit))) == sorted(map(key, (e for _, e in from_results)))
    rows[0]["gflops"] = 1e9  # past NPU2's peak: the whole file is refused, naming the row
    results.write_text(json.dumps(rows))
    done = in_process(tmp_path / "ws", "registry", "import", str(tmp_path))
    assert done.returncode != 0 and "out.json" in done.stdout + done.stderr
