"""Issue #38 item 1: mlir-air's nightly files as they are. Real lines of the perf-history branch (tests/fixtures/
nightly_history/: prefill_sweep_history.ndjson at e1c524ce, the 2026-08-28 run with its failed model and part of
2026-08-29; history / sweep_history.ndjson at 98c63fa) import and export byte for byte; the prefill file's schema is
the contract's (npu_kernels/mlir_air/contract.toml [nightly.prefill_sweep]); the perf page merges the rows as mlir-air's
generate_readme.py does (registry.nightly_merge) and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from handlers.nightly_ops import export_history, import_history
from npu_kernels.mlir_air.contract import NIGHTLY
from ledger import open_ledger
from ledger.events import NightlyPerfImported
from registry.nightly_history import FILES, NIGHTLY_STREAM, BadLine, parse_lines
from registry.nightly_merge import RULES, cell, merged_curves, merged_history
from registry.perf_history import FILE_MD, project_history
from registry.synthetic import record

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "nightly_history"


def _lines(name: str) -> list[str]:
    return (REAL / name).read_text().splitlines()


def _imported(series: str) -> list:
    rows = [json.loads(x) for x in _lines(FILES[series])]
    return record([(NIGHTLY_STREAM, NightlyPerfImported(series=series, row=r, file=FILES[series], line=i + 1))
                   for i, r in enumerate(rows)])


@pytest.mark.parametrize("series", ["history", "sweep", "prefill_sweep"])
def test_the_real_lines_import_and_export_byte_for_byte(series, tmp_path):
    path = REAL / FILES[series]
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    done = import_history(ledger, path)
    assert done["added"] == done["read"] == len(_lines(FILES[series])) and set(done["series"]) == {series}
    assert "".join(x + "\n" for x in export_history(ledger.read_all(), series)) == path.read_text()


def test_the_failed_models_lines_are_kept_as_the_nightly_wrote_them():
    failed = [json.loads(x) for x in _lines(FILES["prefill_sweep"]) if '"lfm2_1_2b_q4nx"' in x and "2026-08-28" in x]
    assert len(failed) == 4 and all(r["ttft_ms"] is None and r["npu_dispatch_ms"] is None
                                    and r["prefill_tokens_per_sec"] is None and r["first_token_gate"] == ""
                                    and r["status"] == "fail: error: expected operation name in quotes"
                                    for r in failed)
    exported = [json.loads(x) for x in export_history(_imported("prefill_sweep"), "prefill_sweep")]
    assert [r for r in exported if r["model"] == "lfm2_1_2b_q4nx" and r["date"] == "2026-08-28"] == failed


def test_the_prefill_schema_is_the_contracts_and_the_files_own_order():
    first = json.loads(_lines(FILES["prefill_sweep"])[0])
    assert [f.split(":")[0] for f in NIGHTLY["prefill_sweep"]["fields"]] == list(first)


@pytest.mark.parametrize("change, says", [
    ({"host_ms": 4.0}, "field(s) host_ms are not in prefill_sweep_history.ndjson's schema"),
    ({"detail": None}, "detail is null, not str"),
    ({"status": "fine"}, 'status "fine" is not one of prefill_sweep_history.ndjson\'s statuses'),
    ({"first_token_gate": "PARIS"}, 'first_token_gate "PARIS" is not one of'),
    ({"npu_dispatch_ms": 1100.0}, "npu_dispatch_ms 1100 exceeds ttft_ms 1039"),
    ({"prefill_tokens_per_sec": 49.28}, "prefill_tokens_per_sec 49.28 is not prefill_len 512 over ttft_ms 1039"),
])
def test_a_prefill_line_off_the_contract_is_refused_naming_it(change, says):
    first = json.loads(_lines(FILES["prefill_sweep"])[0])
    with pytest.raises(BadLine, match="p.ndjson:1: ") as e:
        parse_lines(json.dumps({**first, **change}) + "\n", "p.ndjson")
    assert says in str(e.value)
    missing = {k: v for k, v in first.items() if k != "detail"}
    with pytest.raises(BadLine, match="prefill_sweep_history.ndjson row without detail"):
        parse_lines(json.dumps(missing) + "\n", "p.ndjson")


def test_a_status_with_a_free_text_cause_is_read_by_its_prefix():
    first = json.loads(_lines(FILES["prefill_sweep"])[0])
    for status in ("wrong_seq_len: engines built at 2048", "expected_fail", "timeout", "fail: rc=2"):
        parse_lines(json.dumps({**first, "ttft_ms": None, "npu_dispatch_ms": None, "prefill_tokens_per_sec": None,
                                "first_token_gate": "", "status": status}) + "\n", "p.ndjson")


def test_the_merge_is_the_dashboards_newest_point_measured_first_verify_from_the_newest_row():
    rows = [json.loads(x) for x in _lines(FILES["prefill_sweep"])]
    curves = {c.model: c for c in merged_curves("prefill_sweep", rows)}
    llama = curves["llama32_1b_q4nx"]
    # 2026-08-29 measured 512-2048 (newer) but hit bd_exhaustion at 4096: the 2026-08-28 figure stays there
    assert [(n, p["date"], cell("prefill_sweep", p)) for n, p in sorted(llama.points.items())] == [
        (512, "2026-08-29", "292"), (1024, "2026-08-29", "483"), (2048, "2026-08-29", "918"),
        (4096, "2026-08-28", "1870")]
    assert llama.verify == "pass"  # the newest row's (2026-08-29), not the 2026-08-28 point's "fail"
    lfm2 = curves["lfm2_1_2b_q4nx"]  # failed on 2026-08-28, measured on 2026-08-29
    assert [cell("prefill_sweep", p) for p in lfm2.points.values()] == ["411", "624", "1079", "81877"]
    failed_only = [r for r in rows if r["model"] == "lfm2_1_2b_q4nx" and r["date"] == "2026-08-28"]
    [alone] = merged_curves("prefill_sweep", failed_only)
    assert {cell("prefill_sweep", p) for p in alone.points.values()} == {"✗"} and alone.verify == "fail"
    assert cell("prefill_sweep", {**failed_only[0], "status": "expected_fail"}) == "—"
    sweep = {c.model: c for c in merged_curves("sweep", [json.loads(x) for x in _lines(FILES["sweep"])])}
    assert cell("sweep", sweep["qwen25_3b_q4"].points[32768]) == "✗"  # build_fail
    assert cell("sweep", sweep["qwen25_3b_q4"].points[65536]) == "—"  # expected_fail
    assert cell("sweep", sweep["gemma3_4b_q4nx"].points[1024]) == "20.65"
    history = merged_history(json.loads(x) for x in _lines(FILES["history"]))
    assert history["llama32_1b"]["date"] == "2026-07-28"  # its 2026-08-05 row measured nothing


def test_the_perf_page_shows_the_merged_rows_and_says_which_rules():
    events = _imported("prefill_sweep")
    md = project_history(events, "llama32_1b_q4nx", "llama32_1b_q4nx")[FILE_MD].decode()
    assert RULES in md and "generate_readme.py" in md
    merged = md[md.index("prefill_sweep_history.ndjson merged"):]
    assert "verify badge, from the newest row: pass" in merged
    assert "| 4096 | 1870 | ok | 2026-08-28 |" in merged and "| 512 | 292 | ok | 2026-08-29 |" in merged
    assert "| bd_exhaustion |" in md  # the raw row is listed above the merge, with its status


def test_a_decode_sweep_status_is_one_of_the_sweepers():
    row = json.loads(_lines(FILES["sweep"])[0])  # a build_fail point, null figures
    for status in ("host_oom", "xrt_incomplete", "timeout", "no_number", "fail: rc=1", "stale_template", "run_fail"):
        parse_lines(json.dumps({**row, "status": status}) + "\n", "s.ndjson")
    with pytest.raises(BadLine, match="s.ndjson:1: status \"oom\" is not one of sweep_history.ndjson's statuses"):
        parse_lines(json.dumps({**row, "status": "oom"}) + "\n", "s.ndjson")
