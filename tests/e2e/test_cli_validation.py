"""Issue #12 items 3-4 through the real CLI: what is refused on the way in, and what survives failures.

Every refusal is one `error: ...` line, a non-zero exit, and a ledger left as it was."""

import json
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.cli import ledger, ledger_json
from tests.postgres import execute, needs_pg, schema_url

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"
TRANSCRIPTS = Path(__file__).parents[1] / "fixtures" / "transcripts"

BOGUS = """[precision] Output 0 (10 elements): mean_rel_L1=9.000e-01 | rel_err max=1.0e-01 | abs_err max=1.0e-01 | rtol=5.0e-01 atol=5.0e-01
Latency (us): 2017.3 | Throughput: 9.900e+12 GFLOP/s
PASS!
"""


def _transcript(tmp_path, text, name="run.txt"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _gemm_pass(elements, rtol="1.6e-02", atol="1.5e-03", gflops="6.871948e+03"):  # 2*4096*8192*4096 FLOP / 40000 us
    return (f"[precision] Output 0 ({elements} elements): mean_rel_L1=9.312e-03 | rel_err max=3.906e-01 | "
            f"abs_err max=6.104e-04 | rtol={rtol} atol={atol}\nLatency (us): 40000.0 | Throughput: {gflops} GFLOP/s\n"
            "PASS!\n")


@pytest.fixture
def workspace(tmp_path):
    assert ledger(tmp_path, "init", str(CONFIGS / "qwen3-0.6b.json"), "--name", "m").returncode == 0
    return tmp_path


def _events(ws):
    return ledger_json(ws, "log")


def _refused(proc, says):
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].lower().startswith("error: "), proc.stderr
    assert says in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("text, shape, says", [
    (BOGUS, "M=4096,K=8192,N=4096", "printed rtol=0.5 is not the contract's rtol=0.016"),
    (_gemm_pass(10), "M=4096,K=8192,N=4096", "checked 10 elements but the output has 16777216"),
    (_gemm_pass(16777216, gflops="9.900e+12"), "M=4096,K=8192,N=4096", "exceeds npu2's peak of 4.915e+04 GFLOP/s"),
    (_gemm_pass(16777216), "M=-5,K=0,N=abc", "gemm: M=-5 must be positive"),
])
def test_record_harness_refuses_a_transcript_that_cannot_be_that_rows_evidence(workspace, text, shape, says):
    before = _events(workspace)
    proc = ledger(workspace, "record", "harness", "m", "--kernel", "gemm", "--shape", shape,
                  "--file", _transcript(workspace, text))
    _refused(proc, says)
    assert _events(workspace) == before
    assert "9900000000000" not in (workspace / "kernel_registry" / "supported_kernels.md").read_text()


def test_record_harness_accepts_one_transcript_for_one_row_only(workspace):
    path = _transcript(workspace, _gemm_pass(4096 * 4096))
    ok = ledger(workspace, "record", "harness", "m", "--kernel", "gemm", "--shape", "M=4096,K=8192,N=4096",
                "--method", "fused-cast", "--file", path)
    assert ok.returncode == 0, ok.stderr
    before = _events(workspace)
    again = ledger(workspace, "record", "harness", "m", "--kernel", "gemm", "--shape", "M=4096,K=4096,N=4096",
                   "--file", path)
    _refused(again, "is already the evidence of seq")
    assert _events(workspace) == before


def test_record_harness_refuses_a_gemm_row_without_a_method_mlir_airs_lookup_knows_in_one_line(workspace):
    """Issue #45 item 2: mlir-air's registry JSON files a GEMM row under its method and `best` names it
    (registry_lookup.py:51, gemm_builder.py:61-101 at e972f29): a row without one never reaches the ledger."""
    path = _transcript(workspace, _gemm_pass(4096 * 4096))
    before = _events(workspace)
    declared = ["--device", "NPU Strix", "--toolchain", "mlir_air_commit=e972f29,xrt_smi=2.19"]
    for extra, says in ([[], "no --method given: a GEMM bf16-out-high run is filed in mlir-air's registry under its "
                             "method, one of fused-cast, drain"],
                        [["--method", "mlir-air"], "--method 'mlir-air' is not valid:"],
                        [["--method", "direct"], "one of fused-cast, drain"],
                        [["--method", "fused-cast", "--contract", "f32-out"], "one of external, direct"],
                        [["--method", "drain", "--kernel", "gemv"], "only a GEMM run has a method"]):
        kernel = [] if "--kernel" in extra else ["--kernel", "gemm"]
        line = _refused(ledger(workspace, "record", "harness", "m", *kernel, "--shape", "M=4096,K=8192,N=4096",
                               "--file", path, *declared, *extra), says)
        assert "--method" in line
    assert _events(workspace) == before


def test_registry_import_refuses_negative_shapes_impossible_throughput_and_future_dates(tmp_path):
    doc = json.loads((Path(__file__).parents[1] / "fixtures" / "upstream_registry" / "GEMM_bf16_in_bf16_out.json")
                     .read_text())
    for change, says in [(lambda d: d["shapes"][0].update(M=-64), "M=-64 must be positive"),
                         (lambda d: next(iter(d["shapes"][0]["methods"].values())).update(gflops=1e15), "peak"),
                         (lambda d: d.update(measured="2099-01"), "in the future")]:
        bad = json.loads(json.dumps(doc))
        change(bad)
        folder = tmp_path / says.replace(" ", "_")
        folder.mkdir()
        (folder / "GEMM_bf16_in_bf16_out.json").write_text(json.dumps(bad))
        _refused(ledger(tmp_path, "registry", "import", str(folder)), says)
    assert ledger_json(tmp_path, "log") == []


@pytest.mark.parametrize("change, says", [
    ({"hidden_size": 0}, "hidden_size 0 must be positive"),
    ({"hidden_size": -512}, "hidden_size -512 must be positive"),
    ({"num_attention_heads": 0}, "num_attention_heads 0 must be positive"),
    ({"intermediate_size": 1024.7}, "intermediate_size 1024.7 is not an integer"),
    ({"vocab_size": 1e12}, "vocab_size 1000000000000.0 is not an integer"),
    ({"hidden_size": 1000, "head_dim": None}, "hidden_size 1000 is not divisible by num_attention_heads 16"),
])
def test_init_refuses_config_values_no_model_can_have(tmp_path, change, says):
    raw = json.loads((CONFIGS / "qwen3-0.6b.json").read_text())
    raw.update(change)
    raw = {k: v for k, v in raw.items() if v is not None}
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(raw))
    _refused(ledger(tmp_path, "init", str(tmp_path / "cfg")), says)
    assert ledger_json(tmp_path, "log") == []


def test_names_that_project_to_one_folder_are_refused_and_check_reports_stray_files(tmp_path):
    cfg = str(CONFIGS / "qwen3-0.6b.json")
    assert ledger(tmp_path, "init", cfg, "--name", "col b").returncode == 0
    for other in ("col:b", "col_b"):
        _refused(ledger(tmp_path, "init", cfg, "--name", other), "projects to llms/col_b/, the folder of deployment 'col b'")
    assert ledger(tmp_path, "registry", "build", "--check").returncode == 0
    (tmp_path / "llms" / "col_b" / "docs" / "notes_by_hand.md").write_text("not a projection\n")
    (tmp_path / "kernel_registry" / "details" / ".GEMM.md.123.tmp").write_text("left over\n")
    proc = ledger(tmp_path, "registry", "build", "--check")
    assert proc.returncode == 1
    assert "stray: llms/col_b/docs/notes_by_hand.md (no projection writes it)" in proc.stderr
    assert "stray: kernel_registry/details/.GEMM.md.123.tmp" in proc.stderr


def test_status_reports_an_unreplayable_stream_and_still_lists_the_others(workspace):
    assert ledger(workspace, "init", str(CONFIGS / "llama-3.2-1b.json"), "--name", "broken").returncode == 0
    from ledger import open_ledger
    from ledger.events import PhasePassed

    lg = open_ledger(f"sqlite:///{workspace / '.ledger' / 'ledger.db'}")
    lg.append("deployment:broken", lg.stream_version("deployment:broken"), [PhasePassed(phase=5, attempt=1)])
    lg.close()
    proc = ledger(workspace, "status")
    assert proc.returncode == 1
    header, row = proc.stdout.splitlines()[:2]  # the table's header, then the deployments that replay
    assert header.startswith("deployment ") and row.startswith("m ") and "phase0" in row
    assert "broken" in proc.stderr and "unreplayable: PhasePassed(phase=5)" in proc.stderr


@needs_pg
def test_read_only_commands_create_no_schema_in_an_empty_postgres_database(pg_schema):
    ws = Path(__file__).parent  # read-only: nothing is written to the workspace either
    for args in (("status",), ("log",), ("head",), ("verify",), ("history", "x")):
        ledger(ws, *args, db=schema_url(pg_schema))
    assert execute("SELECT to_regclass(%s)", (f"{pg_schema}.events",))[0][0] is None


def test_verify_names_a_dropped_sqlite_trigger(workspace):
    conn = sqlite3.connect(workspace / ".ledger" / "ledger.db")
    conn.execute("DROP TRIGGER events_no_delete")
    conn.close()
    proc = ledger(workspace, "verify")
    assert proc.returncode == 2
    assert "ledger BROKEN: immutability trigger events_no_delete is missing (sqlite)" in proc.stderr


def test_an_emptied_ledger_where_the_workspace_had_events_is_not_intact(workspace):
    assert ledger(workspace, "verify").returncode == 0  # prints (and keeps) the checkpoint 3:...
    db = workspace / ".ledger" / "ledger.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"")
    proc = ledger(workspace, "verify")
    assert proc.returncode == 2
    assert "ledger BROKEN at seq 1: ledger holds 0 events, checkpoint says 3: truncated" in proc.stderr


def test_a_committed_command_whose_projection_refresh_fails_succeeds_with_a_warning(workspace):
    todo = workspace / "llms" / "m" / "TODO.md"
    todo.unlink()
    todo.mkdir()  # a directory in the way: the refresh cannot replace it
    proc = ledger(workspace, "lesson", "m", "tiles of 64 fit L1")
    assert proc.returncode == 0 and "lesson recorded at seq 4" in proc.stdout
    assert proc.stderr.startswith("warning: recorded, but refreshing the projections failed")
    assert not list(workspace.rglob("*.tmp"))
    assert [e["type"] for e in _events(workspace)].count("LessonRecorded") == 1
    # the mark that makes the next refresh rebuild every deployment's docs, not only those the next command is about
    stale = workspace / ".ledger" / "projections-stale"
    assert stale.is_file()
    todo.rmdir()
    assert ledger(workspace, "lesson", "m", "second").returncode == 0  # the refresh is retried and succeeds
    assert not stale.exists()
    assert "tiles of 64 fit L1" in (workspace / "llms" / "m" / "docs" / "development_progress" / "LESSONS.md").read_text()
    assert ledger(workspace, "registry", "build", "--check").returncode == 0
