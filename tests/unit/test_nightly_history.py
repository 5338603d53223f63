"""mlir-air's nightly perf history in and out of the ledger (issue #25 item 3): an `export-history` line has the
fields, order and types `append_history.py` writes (e972f29 programming_examples/llms/bench/append_history.py:
36-50 and :69-83, written out below by hand), `import-history` then `export-history` gives the imported lines back
byte for byte, bad input is one line, exit 1 and an unchanged ledger, and perf_history.md shows both sources."""

from __future__ import annotations

import json

import pytest

from handlers.nightly_ops import export_history, import_history
from ledger import open_ledger
from ledger.events import NightlyPerfImported, PerformanceMeasured, PhaseStarted, TokenGateChecked
from registry.nightly_history import NIGHTLY_STREAM, BadLine, parse_lines
from registry.perf_history import FILE_MD, FILE_PNG, project_history
from registry.synthetic import record
from tests.e2e.cli import ledger as cli

# append_history.py@e972f29 :38-49 (history.ndjson) and :70-82 (sweep_history.ndjson), in the order it writes them
HISTORY_FIELDS = ["date", "timestamp_utc", "run_id", "air_sha", "aie_hash", "peano", "model", "runner", "ttft_ms",
                  "decode_tokens_per_sec", "context_len", "verify_status"]
SWEEP_FIELDS = ["date", "timestamp_utc", "run_id", "air_sha", "aie_hash", "peano", "model", "runner", "context_len",
                "decode_tokens_per_sec", "ms_per_token", "status", "verify_status"]
# prefill_sweep_history.ndjson's order, as the file holds it (perf-history e1c524ce, its first line)
PREFILL_FIELDS = ["date", "timestamp_utc", "run_id", "air_sha", "aie_hash", "peano", "model", "runner", "prefill_len",
                  "ttft_ms", "npu_dispatch_ms", "prefill_tokens_per_sec", "first_token_gate", "status", "detail",
                  "verify_status"]
S = "deployment:tiny"
TC = {"npu_ledger": "0.6.0", "executor": "emulated", "emulated_numerics": "emulated-npu2/1", "perf_model": "npu2-perf/2"}

# lines in the nightly's own shape (our numbers): one with runner (after b26fa59), one from before it
NIGHTLY = [
    {"date": "2026-08-22", "timestamp_utc": "2026-08-22T06:30:21Z", "run_id": 32551845844,
     "air_sha": "9c46db47dc75f2c5e67fd23774fb877f805c8996", "aie_hash": "7e00b57955e108fe9d8e9419f5828a0c7e650858",
     "peano": "21.0.0.2026080601+f4a72c27", "model": "tiny", "runner": "amdryzenai5pro340", "ttft_ms": 1870.0,
     "decode_tokens_per_sec": 7.79, "context_len": 2048, "verify_status": "pass"},
    {"date": "2026-07-28", "timestamp_utc": "2026-07-28T22:53:54Z", "run_id": 30402513836, "air_sha": "9d2fca9",
     "aie_hash": "157e8b8", "peano": "21.0.0", "model": "tiny", "ttft_ms": None, "decode_tokens_per_sec": 9.14,
     "context_len": None, "verify_status": "fail"},
]
SWEEP = {"date": "2026-08-22", "timestamp_utc": "2026-08-22T07:53:43Z", "run_id": 32551845844, "air_sha": "9c46db4",
         "aie_hash": "7e00b57", "peano": "21.0.0", "model": "tiny", "context_len": 32768,
         "decode_tokens_per_sec": None, "ms_per_token": None, "status": "expected_fail"}


def _events():
    perf = PerformanceMeasured(phase=6, executor="emulated", n_prompt_tokens=2048, ttft_s=0.11734, tokens_per_s=40.123,
                               ms_per_token=24.923, toolchain=TC,
                               profile={"source": "modelled-npu2", "npu2": {"source": "modelled-npu2", "ctx": 128}})
    gate = TokenGateChecked(prompt_index=0, prompt="p", executor="emulated", n_tokens=32, passed=True, agreed_prefix=3)
    return record([(S, PhaseStarted(phase=6, attempt=1)), (S, gate), (S, perf)])


def _types_ok(row: dict, fields: list[str]) -> None:
    strings = {"date", "timestamp_utc", "air_sha", "aie_hash", "peano", "model", "runner", "verify_status", "status"}
    for k in fields:
        v = row[k]
        if k in strings:
            assert isinstance(v, str), k
        elif k == "run_id":
            assert isinstance(v, (int, str)) and not isinstance(v, bool)
        elif k == "context_len" and "status" in row:
            assert isinstance(v, int) and not isinstance(v, bool)
        elif k == "context_len":
            assert v is None or (isinstance(v, int) and not isinstance(v, bool))
        else:
            assert v is None or (isinstance(v, float) and not isinstance(v, bool)), k


def test_a_modelled_figure_is_exported_only_when_asked_and_then_names_its_class():
    assert all(export_history(_events(), s) == [] for s in ("history", "sweep", "prefill_sweep"))
    for series in ("history", "sweep", "prefill_sweep"):
        [line] = export_history(_events(), series, modelled=True)
        row = json.loads(line)
        assert row["runner"] == "npu-ledger/modelled-npu2" and row["model"] == "tiny (modelled NPU2)"
    assert export_history(_events(), "history", model="tiny", modelled=True)  # the name before its class


def test_an_exported_line_has_append_historys_fields_in_its_order_and_types():
    [line] = export_history(_events(), "history", modelled=True)
    row = json.loads(line)
    assert list(row) == HISTORY_FIELDS
    _types_ok(row, HISTORY_FIELDS)
    assert row["date"] == row["timestamp_utc"][:10] and row["timestamp_utc"].endswith("Z")
    # the figures as the nightly rounds them, the prompt length as extract_perf's prompt_len, the source named
    assert (row["ttft_ms"], row["decode_tokens_per_sec"], row["context_len"]) == (117.34, 40.12, 2048)
    assert row["runner"] == "npu-ledger/modelled-npu2" and row["verify_status"] == "pass"
    assert row["aie_hash"] == "" and row["air_sha"] == ""  # unknown: the schema's ""
    [sweep] = export_history(_events(), "sweep", modelled=True)
    srow = json.loads(sweep)
    assert list(srow) == SWEEP_FIELDS
    _types_ok(srow, SWEEP_FIELDS)
    assert (srow["context_len"], srow["decode_tokens_per_sec"], srow["ms_per_token"], srow["status"]) == \
        (128, 40.12, 24.92, "ok")
    [pre] = export_history(_events(), "prefill_sweep", modelled=True)
    prow = json.loads(pre)
    assert list(prow) == PREFILL_FIELDS
    assert (prow["prefill_len"], prow["ttft_ms"], prow["npu_dispatch_ms"], prow["prefill_tokens_per_sec"],
            prow["first_token_gate"], prow["status"], prow["detail"]) == (2048, 117.34, None, 17453.6, "", "ok", "")


def test_import_then_export_gives_the_imported_lines_back_byte_for_byte(tmp_path):
    text = "".join(json.dumps(r) + "\n" for r in NIGHTLY)
    (tmp_path / "history.ndjson").write_text(text + "\n")  # a blank line is no row
    (tmp_path / "sweep_history.ndjson").write_text(json.dumps(SWEEP) + "\n")
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    assert import_history(ledger, tmp_path / "history.ndjson") == {
        "file": "history.ndjson", "read": 2, "added": 2, "series": {"history": 2}}
    assert import_history(ledger, tmp_path / "history.ndjson")["added"] == 0  # recorded once
    import_history(ledger, tmp_path / "sweep_history.ndjson")
    events = ledger.read_all()
    assert {e.type for e in events} == {"NightlyPerfImported"} and all(e.payload["source"] == "imported" for e in events)
    assert "".join(x + "\n" for x in export_history(events, "history")) == text
    assert export_history(events, "sweep") == [json.dumps(SWEEP)]
    assert export_history(events, "history", model="other") == []


@pytest.mark.parametrize("line, why", [
    ("not json at all", "not JSON"),
    (json.dumps({**NIGHTLY[0], "ttft_ms": "fast"}), "ttft_ms is \"fast\", not number|null"),
    (json.dumps({**NIGHTLY[0], "context_len": True}), "context_len is true"),
    (json.dumps({**NIGHTLY[0], "decode_tok_s": 1.0}), "decode_tok_s are not in history.ndjson's schema"),
    (json.dumps({k: v for k, v in NIGHTLY[0].items() if k != "model"}), "row without model"),
    (json.dumps({**NIGHTLY[0], "date": "2026-08-21"}), "is not the day of timestamp_utc"),
    (json.dumps({**SWEEP, "context_len": None}), "context_len is null, not int"),
    ("[1, 2]", "not an object"),
])
def test_a_bad_line_names_itself_and_nothing_is_recorded(line, why):
    with pytest.raises(BadLine, match="history.ndjson:2: ") as e:
        parse_lines(json.dumps(NIGHTLY[0]) + "\n" + line + "\n", "history.ndjson")
    assert why in str(e.value)


def test_the_cli_refuses_a_bad_file_in_one_line_and_leaves_the_ledger_unchanged(tmp_path):
    good, bad = tmp_path / "history.ndjson", tmp_path / "bad.ndjson"
    good.write_text(json.dumps(NIGHTLY[0]) + "\n")
    bad.write_text(json.dumps(NIGHTLY[1]) + "\n" + json.dumps({**NIGHTLY[0], "run_id": 1.5}) + "\n")
    done = cli(tmp_path, "perf", "import-history", str(good), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["added"] == 1
    head = cli(tmp_path, "head").stdout
    done = cli(tmp_path, "perf", "import-history", str(bad))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == ("error: bad.ndjson:2: run_id is 1.5, not int|str; nothing was imported")
    assert cli(tmp_path, "head").stdout == head
    out = cli(tmp_path, "perf", "export-history", "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == [NIGHTLY[0]]


def test_perf_history_shows_the_nightly_beside_the_ledgers_figures_each_with_its_source():
    events = _events()
    imported = [(NIGHTLY_STREAM, NightlyPerfImported(series="history", row=r, file="history.ndjson", line=i + 1))
                for i, r in enumerate(NIGHTLY)]
    tampered = {**NIGHTLY[0], "ttft_ms": "1.0"}  # a recorded row that no longer passes its check is not shown
    imported.append((NIGHTLY_STREAM, NightlyPerfImported(series="history", row=tampered, file="x", line=9)))
    events += record(imported, start_seq=len(events) + 1)
    files = project_history(events, "tiny", "tiny")
    md = files[FILE_MD].decode()
    assert "modelled NPU2 (not measured) (modelled-npu2)" in md and "## mlir-air nightly: `tiny` (imported)" in md
    assert md.count("measured NPU2 nightly (mlir-air)") == 2 and "1870.0" in md and "9.14" in md
    assert '"1.0"' not in md and "| 1.0 |" not in md
    alone = project_history(_events(), "tiny", "tiny")
    assert "mlir-air nightly" not in alone[FILE_MD].decode()
    width = lambda png: int.from_bytes(png[16:20], "big")  # the PNG header's width
    assert width(files[FILE_PNG]) == 2 * width(alone[FILE_PNG])  # a second panel: the nightly runs
    assert project_history(events, "tiny", "tiny") == files  # rebuilt: the same bytes
    assert [json.loads(x)["ttft_ms"] for x in export_history(events, "history")] == [1870.0, None]
    assert [json.loads(x)["ttft_ms"] for x in export_history(events, "history", modelled=True)] == \
        [117.34, 1870.0, None]
