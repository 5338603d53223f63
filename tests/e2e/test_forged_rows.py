"""Issue #35 items 1-2 end to end, on copies of the session's deployed tiny Llama (tests/e2e/conftest.py).

Attacks that got past the tool at 66301c1 and must not now:
* a `KernelVerified` appended by raw SQL with a valid chain hash (1e7 GFLOP/s, mean_rel_L1 -1): the rebuilt registry
  must not make it best or verified, and `ledger audit` must report it naming its seq;
* a self-contradictory harness transcript (50000 us for a 2048x512x512 GEMM printed as 49000 GFLOP/s): refused by
  `ledger record harness`, nothing recorded;
* a nightly line that claims to be this tool's own measurement: refused by `perf import-history`.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest

from ledger.canonical import chain_hash, dumps, loads
from tests.e2e.cli import ledger, ledger_json


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, tiny_snapshots):
    """The session's deployed tiny Llama, copied once for the module; each test copies this."""
    return shutil.copytree(tiny_snapshots[7], tmp_path_factory.mktemp("forged") / "ws")


def _db(ws: Path) -> Path:
    return ws / ".ledger" / "ledger.db"


def _append_raw(ws: Path, stream: str, type_: str, payload: dict) -> int:
    """What anyone with write access to the database file can do without dropping a trigger: INSERT one row whose
    prev_hash / hash continue the chain (ledger.canonical.chain_hash), so `verify` finds the chain intact."""
    conn = sqlite3.connect(_db(ws))
    seq, prev, at = conn.execute("SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    version = conn.execute("SELECT COALESCE(MAX(version), 0) FROM events WHERE stream_id = ?", (stream,)).fetchone()[0]
    seq, version, event_id, body = seq + 1, version + 1, str(uuid.uuid4()), dumps(payload)
    digest = chain_hash(prev, seq, stream, version, event_id, type_, body, at)
    conn.execute("INSERT INTO events (seq, stream_id, version, event_id, type, payload, recorded_at, prev_hash, hash) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (seq, stream, version, event_id, type_, body, at, prev, digest))
    conn.commit()
    conn.close()
    return seq


def _forged_kernel_row(ws: Path) -> dict:
    """One of tiny's own Phase 1 GEMM rows, restated as a hardware harness row with impossible figures."""
    conn = sqlite3.connect(_db(ws))
    rows = [loads(p) for (p,) in conn.execute(
        "SELECT payload FROM events WHERE type = 'KernelVerified' AND stream_id = 'deployment:tiny' ORDER BY seq")]
    conn.close()
    row = next(p for p in rows if p["kernel"] == "gemm")
    return {**row, "executor": "mlir-air", "source": "harness", "verdict": "PASS", "gflops": 1e7, "latency_us": None,
            "mean_rel_L1": -1.0}


def test_a_raw_appended_kernel_row_is_never_best_and_the_audit_reports_it(deployed, tmp_path):
    ws = shutil.copytree(deployed, tmp_path / "ws")
    forged = _forged_kernel_row(ws)
    seq = _append_raw(ws, "deployment:tiny", "KernelVerified", forged)
    assert ledger(ws, "verify").returncode == 0  # the chain alone cannot tell

    built = ledger(ws, "registry", "build", "--out", str(tmp_path / "reg"))
    assert built.returncode == 0, built.stderr
    md = (tmp_path / "reg" / "kernel_registry" / "supported_kernels.md").read_text()
    details = tmp_path / "reg" / "kernel_registry" / "details"
    assert "10000000" not in md and "1e+07" not in md and "1.0e+07" not in md
    for path in details.glob("GEMM_*.json"):
        assert "10000000" not in path.read_text()
    detail = "\n".join(p.read_text() for p in details.glob("GEMM_*.md"))
    assert f"seq {seq} refused as implausible" in detail and "refused: implausible" in detail
    assert "mean_rel_L1=-1.0 is negative" in detail or "exceeds npu2's peak" in detail

    proc = ledger(ws, "audit", "tiny", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["verdict"] == "FAIL"
    found = [f for f in report["findings"] if f["severity"] == "error"]
    assert found and all(f["seq"] == seq for f in found)  # the deployment's own rows still pass
    assert any(f"seq {seq} has implausible figures" in f["message"] for f in found)


def test_a_transcript_whose_latency_and_throughput_disagree_is_refused_and_nothing_recorded(deployed, tmp_path):
    ws = shutil.copytree(deployed, tmp_path / "ws")
    forged = tmp_path / "forged.txt"
    # 2 * 2048 * 512 * 512 FLOP in 50000 us is 21.47 GFLOP/s, not 49000 (99.7 % of NPU2's peak)
    forged.write_text("[precision] Output 0 (1048576 elements): mean_rel_L1=9.312e-03 | rel_err max=3.906e-01 | "
                      "abs_err max=6.104e-04 | rtol=1.6e-02 atol=1.5e-03\n"
                      "Latency (us): 50000.0 | Throughput: 4.900000e+04 GFLOP/s\nPASS!\n")
    head = ledger(ws, "head").stdout
    proc = ledger(ws, "record", "harness", "tiny", "--kernel", "gemm", "--shape", "M=2048,K=512,N=512",
                  "--contract", "bf16-out-high", "--file", str(forged))
    assert proc.returncode == 1 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert "latency 50000.0 us and throughput 4.900000e+04 GFLOP/s contradict each other" in line
    assert ledger(ws, "head").stdout == head


def test_a_nightly_line_claiming_this_tools_measurement_is_refused(deployed, tmp_path):
    ws = shutil.copytree(deployed, tmp_path / "ws")
    line = {"date": "2026-08-22", "timestamp_utc": "2026-08-22T06:30:21Z", "run_id": 32551845844, "air_sha": "",
            "aie_hash": "", "peano": "", "model": "tiny", "runner": "npu-ledger/measured-npu2", "ttft_ms": 1870.0,
            "decode_tokens_per_sec": 7.79, "context_len": 2048, "verify_status": "pass"}
    path = tmp_path / "history.ndjson"
    path.write_text(json.dumps(line) + "\n")
    head = ledger(ws, "head").stdout
    proc = ledger(ws, "perf", "import-history", str(path))
    assert proc.returncode == 1
    assert "history.ndjson:1: runner \"npu-ledger/measured-npu2\" claims this tool's own figure" in proc.stderr
    assert ledger(ws, "head").stdout == head
    assert all(r.get("runner") != "npu-ledger/measured-npu2" or r["run_id"] != 32551845844
               for r in ledger_json(ws, "perf", "export-history"))
