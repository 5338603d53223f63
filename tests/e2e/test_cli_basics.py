"""The ledger's read commands and bad input through the real CLI."""

import json

from tests.e2e.cli import ledger, ledger_json, read_in_process

CONFIGS = __import__("pathlib").Path(__file__).parents[1] / "fixtures" / "configs"


def test_a_fresh_workspace_verifies_and_prints_a_genesis_checkpoint_without_creating_a_database(tmp_path):
    assert ledger(tmp_path, "verify").returncode == 0
    head = ledger_json(tmp_path, "head")
    assert head["size"] == 0 and len(head["hash"]) == 64
    assert not (tmp_path / ".ledger" / "ledger.db").exists()  # read-only commands write nothing


def test_log_json_lists_events_with_their_envelope(tmp_path):
    assert ledger(tmp_path, "init", str(CONFIGS / "mixtral-8x7b.json")).returncode != 0
    events = ledger_json(tmp_path, "log")
    assert [e["type"] for e in events] == ["DeploymentRequested", "ArchitectureAssessed"]
    for e in events:
        assert set(e) == {"seq", "stream_id", "version", "event_id", "type", "payload", "recorded_at", "hash"}
        assert isinstance(e["payload"], dict)


def test_verify_against_a_checkpoint_detects_truncation(tmp_path):
    ledger(tmp_path, "init", str(CONFIGS / "qwen3-0.6b.json"))
    checkpoint = ledger(tmp_path, "head").stdout.strip()
    assert ledger(tmp_path, "verify", "--against", checkpoint).returncode == 0
    import sqlite3

    conn = sqlite3.connect(tmp_path / ".ledger" / "ledger.db")
    conn.executescript("DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq = 3;")
    conn.close()
    proc = ledger(tmp_path, "verify", "--against", checkpoint)
    assert proc.returncode != 0 and "seq 3" in proc.stderr and "truncated" in proc.stderr


def test_bad_input_gets_one_clear_line_and_a_non_zero_exit(tmp_path):
    cases = [
        ("--db", "mysql://root@localhost/x", "head"),
        ("--db", "postgresql+psycopg://postgres@127.0.0.1:1/test", "head"),
        ("verify", "--against", "not-a-checkpoint"),
        ("init", str(tmp_path / "missing" / "config.json")),
        ("advance", "no_such_model"),
    ]
    bad = tmp_path / "bad.json"
    bad.write_text("{ this is not json")
    cases.append(("init", str(bad)))
    for args in cases:
        proc = ledger(tmp_path, *args)
        assert proc.returncode != 0, args
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        assert len([line for line in proc.stderr.splitlines() if line.strip()]) <= 3, (args, proc.stderr)
    assert json.loads(read_in_process(tmp_path, "log", "--json").stdout) == []  # nothing half-written


def test_a_corrupt_ledger_file_is_refused_without_a_traceback(tmp_path):
    (tmp_path / ".ledger").mkdir()
    (tmp_path / ".ledger" / "ledger.db").write_bytes(b"garbage" * 100)
    proc = ledger(tmp_path, "verify")
    assert proc.returncode != 0 and "not a SQLite database" in proc.stderr and "Traceback" not in proc.stderr


def test_graph_prints_a_mermaid_diagram_of_the_lifecycle(tmp_path):
    out = ledger(tmp_path, "graph").stdout
    assert out.startswith("stateDiagram-v2") and "pass_phase_3" in out


def test_plan_refuses_a_moe_config_with_the_line_predict_gives(tmp_path):
    # issue 48 item 5: at dd99c44 `plan` gave a dense plan for Mixtral-8x7B while `predict` refused it
    moe = str(CONFIGS / "mixtral-8x7b.json")
    plan, predict = read_in_process(tmp_path, "plan", moe), read_in_process(tmp_path, "predict", moe)
    assert plan.returncode == predict.returncode == 1 and plan.stdout == ""
    assert plan.stderr == predict.stderr and len(plan.stderr.splitlines()) == 1
    assert plan.stderr.startswith("error: out of scope: ") and "mixture-of-experts" in plan.stderr
