"""Issue #35 items 1-2 on the import paths: upstream status cells are read from a closed set, an upstream row's
figures get the same plausibility and consistency checks as a transcript, and a nightly perf line is refused when
it claims this tool's own measurement, carries an impossible figure, or gives a second figure for one run.

mlir-air's status markers (e972f29 programming_examples/kernel_registry/supported_kernels.md:14): ✅ verified on
real NPU2, ⚠️ verified with a documented caveat, ❌ broken/missing; its Status columns use ✅ and ⚠️ only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from handlers.nightly_ops import export_history, import_history
from handlers.registry_ops import SkippedRows, import_registry_accounted
from ledger import open_ledger
from ledger.events import NightlyPerfImported
from registry.fold import fold_registry
from registry.importer_tables import StatusCellError, status_of
from registry.nightly_history import NIGHTLY_STREAM, BadLine, fold_nightly, parse_lines
from registry.perf_history import project_history
from registry.render_markdown import render_all_markdown
from registry.synthetic import record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GEMV_ROW = "| 2048×2048 | 8/8/8 | 330 µs | 25.5 | 1.6e-9 | 4.4e-3 | 2.0e-3 | llama-3.2-1B Q proj | ✅ |"
LINE = {"date": "2026-08-22", "timestamp_utc": "2026-08-22T06:30:21Z", "run_id": 32551845844,
        "air_sha": "9c46db47dc75f2c5e67fd23774fb877f805c8996", "aie_hash": "7e00b57955e108fe9d8e9419f5828a0c7e650858",
        "peano": "21.0.0.2026080601+f4a72c27", "model": "tiny", "runner": "amdryzenai5pro340", "ttft_ms": 1870.0,
        "decode_tokens_per_sec": 7.79, "context_len": 2048, "verify_status": "pass"}
SWEEP = {"date": "2026-08-22", "timestamp_utc": "2026-08-22T07:53:43Z", "run_id": 32551845844, "air_sha": "9c46db4",
         "aie_hash": "7e00b57", "peano": "21.0.0", "model": "tiny", "runner": "amdryzenai5pro340",
         "context_len": 32768, "decode_tokens_per_sec": 4.55, "ms_per_token": 219.662, "status": "ok",
         "verify_status": "pass"}


@pytest.fixture
def tables(tmp_path) -> Path:
    root = tmp_path / "kernel_registry"
    shutil.copytree(FIXTURES / "upstream_registry_tables", root)
    return root


def _with_gemv_status(root: Path, cell: str) -> None:
    page = root / "details" / "GEMV_bf16.md"
    text = page.read_text()
    assert GEMV_ROW in text
    page.write_text(text.replace(GEMV_ROW, GEMV_ROW[: -len("✅ |")] + f"{cell} |"))


@pytest.mark.parametrize("cell, read", [
    ("✅", ("PASS", "")), ("✅ Qwen3-0.6B Q proj", ("PASS", "")), ("⚠️", ("PASS", "upstream-warning")),
    ("⚠️ SmolVLA vision mlp fc1 — **NOT preferred**", ("PASS", "upstream-warning")), ("❌", ("FAIL", "")),
    ("PASS", ("PASS", "")), ("**FAIL**", ("FAIL", "")),
])
def test_status_cells_are_read_from_upstreams_markers_and_the_two_verdict_words(cell, read):
    assert status_of(cell) == read


@pytest.mark.parametrize("cell", ["NUMFAIL", "not run yet", "", "⏳", "PASS?", "passed", "FAIL (numerics)"])
def test_any_other_status_cell_is_refused_naming_it(cell):
    with pytest.raises(StatusCellError, match=f"status cell {json.dumps(cell, ensure_ascii=False)[1:-1]!r}"
                       .replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        status_of(cell)


@pytest.mark.parametrize("cell", ["NUMFAIL", "not run yet", ""])
def test_registry_import_refuses_a_row_whose_status_is_not_a_verdict_and_appends_nothing(tmp_path, tables, cell):
    _with_gemv_status(tables, cell)
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    with pytest.raises(SkippedRows) as e:
        import_registry_accounted(lg, tables)
    [account] = [a for a in e.value.result.accounts if a.file == "details/GEMV_bf16.md" and a.skipped]
    [why] = account.skipped
    assert f"status cell {cell!r}" in why and "2048×2048" in why
    assert lg.read_all() == []


def test_a_fail_status_is_imported_as_a_fail_and_never_shown_verified(tmp_path, tables):
    _with_gemv_status(tables, "FAIL")
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    import_registry_accounted(lg, tables)
    [row] = [e.payload for e in lg.read_all() if e.payload["kernel"] == "gemv" and e.payload["shape"] ==
             {"M": 2048, "K": 2048}]
    assert row["verdict"] == "FAIL"
    page = fold_registry(lg.read_all()).page("gemv")
    [shape] = [r for r in page.rows if dict(r.shape) == {"M": 2048, "K": 2048}]
    assert shape.status == "failed" and shape.best is None
    md = render_all_markdown(fold_registry(lg.read_all()))["supported_kernels.md"].decode()
    assert not [line for line in md.splitlines() if line.startswith("| 2048×2048 |") and "25.5" in line and "✅" in line]


def test_an_upstream_row_whose_latency_and_throughput_disagree_is_refused(tmp_path, tables):
    # 2 * 2048 * 2048 FLOP in 330 us is 25.42 GFLOP/s: 25.5 is within the digits, 52.5 is not
    page = tables / "details" / "GEMV_bf16.md"
    page.write_text(page.read_text().replace(GEMV_ROW, GEMV_ROW.replace("| 25.5 |", "| 52.5 |")))
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    with pytest.raises(SkippedRows) as e:
        import_registry_accounted(lg, tables)
    [why] = [w for a in e.value.result.accounts for w in a.skipped]
    assert "latency 330 us and throughput 52.5 GFLOP/s contradict each other" in why


def test_a_range_row_is_recorded_at_its_slow_end_and_both_ends_must_agree(tmp_path, tables):
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    import_registry_accounted(lg, tables)
    shape = {"lq": 2048, "lk": 2048, "dk": 64, "dv": 64, "heads_q": 32, "heads_kv": 8, "causal": True}
    rows = [e.payload for e in lg.read_all() if e.payload["kernel"] == "flash_attention" and e.payload["shape"] == shape]
    # `15.4–16.1 ms | 1065–1116`: 16.1 ms pairs with 1065 GFLOP/s (and 15.4 with 1116), not 15.4 with 1065
    assert rows and all((r["latency_us"], r["gflops"]) == (16100.0, 1065.0) for r in rows)
    page = tables / "details" / "FlashAttention_bf16.md"
    page.write_text(page.read_text().replace("**1065–1116**", "**1065–1316**"))
    with pytest.raises(SkippedRows) as e:
        import_registry_accounted(open_ledger(f"sqlite:///{tmp_path / 'm.db'}"), tables)
    assert any("1316 GFLOP/s contradict each other" in w for a in e.value.result.accounts for w in a.skipped)


# --- nightly perf history ------------------------------------------------------------------------------------


@pytest.mark.parametrize("change, says", [
    ({"runner": "npu-ledger/measured-npu2"}, "runner \"npu-ledger/measured-npu2\" claims this tool's own figure"),
    ({"runner": " NPU-LEDGER/modelled-npu2"}, "claims this tool's own figure"),
    ({"run_id": "npu-ledger:tiny:12"}, "run_id \"npu-ledger:tiny:12\" is one of this tool's own"),
    ({"ttft_ms": -1870.0}, "ttft_ms is -1870.0: a time or rate is a positive number"),
    ({"decode_tokens_per_sec": 0}, "decode_tokens_per_sec is 0: a time or rate is a positive number"),
    ({"decode_tokens_per_sec": 1e12}, "decode_tokens_per_sec 1e+12 exceeds 3793"),
    ({"context_len": -4}, "context_len is -4, outside 1 .. 1048576"),
    ({"context_len": 10 ** 9}, "context_len is 1000000000, outside 1 .. 1048576"),
])
def test_a_nightly_line_that_claims_ours_or_carries_an_impossible_figure_is_refused_naming_it(change, says):
    with pytest.raises(BadLine) as e:
        parse_lines(json.dumps(SWEEP) + "\n" + json.dumps({**LINE, **change}) + "\n", "history.ndjson")
    assert str(e.value).startswith("history.ndjson:2: ") and says in str(e.value)


def test_a_sweep_line_whose_ms_per_token_is_not_the_inverse_of_its_rate_is_refused():
    parse_lines(json.dumps(SWEEP) + "\n", "sweep_history.ndjson")  # 219.662 ms x 4.55 tokens/s = 999.5
    with pytest.raises(BadLine, match="sweep_history.ndjson:1: ms_per_token 21.9662 and decode_tokens_per_sec 4.55 "
                                      "contradict each other"):
        parse_lines(json.dumps({**SWEEP, "ms_per_token": 21.9662}) + "\n", "sweep_history.ndjson")


def test_two_different_figures_under_one_run_model_and_context_are_refused_in_the_file_and_against_the_ledger(
        tmp_path):
    twice = json.dumps(LINE) + "\n" + json.dumps({**LINE, "decode_tokens_per_sec": 70.9}) + "\n"
    with pytest.raises(BadLine, match=r"history.ndjson:2: run 32551845844 of tiny at 2048 already has another "
                                      r"figure \(line 1\)"):
        parse_lines(twice, "history.ndjson")
    parse_lines(json.dumps(LINE) + "\n" + json.dumps(LINE) + "\n", "history.ndjson")  # the same line twice is fine
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    first, second = tmp_path / "history.ndjson", tmp_path / "later.ndjson"
    first.write_text(json.dumps(LINE) + "\n")
    second.write_text(json.dumps({**LINE, "ttft_ms": 187.0}) + "\n")
    assert import_history(lg, first)["added"] == 1
    head = lg.read_all()
    with pytest.raises(BadLine, match=r"later.ndjson:1: run 32551845844 of tiny at 2048 already has another figure "
                                      r"\(seq 1\)"):
        import_history(lg, second)
    assert lg.read_all() == head


def test_rows_appended_behind_the_importer_are_neither_shown_nor_exported_as_measured():
    ours = {**LINE, "run_id": 1, "runner": "npu-ledger/measured-npu2"}
    absurd = {**LINE, "run_id": 2, "decode_tokens_per_sec": 1e12}
    clash = [{**LINE, "run_id": 3}, {**LINE, "run_id": 3, "decode_tokens_per_sec": 70.9}]
    good = {**LINE, "run_id": 4}
    events = record([(NIGHTLY_STREAM, NightlyPerfImported(series="history", row=r, file="history.ndjson", line=i + 1))
                     for i, r in enumerate([ours, absurd, *clash, good])])
    flagged = {r.row["run_id"]: r.problem for r in fold_nightly(events)}
    assert "claims this tool's own figure" in flagged[1] and "exceeds" in flagged[2]
    assert "2 different figures" in flagged[3] and flagged[4] is None
    assert [json.loads(line)["run_id"] for line in export_history(events, "history")] == [4]
    text = project_history(events, "tiny", "tiny")["docs/perf_history.md"].decode()
    shown = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| ") and "nightly" in line]
    assert shown == ["| 5"]  # only the good line (seq 5) is shown, as the nightly's


def test_real_nightly_lines_all_pass_the_checks():
    """Lines as mlir-air's nightly writes them (perf-history branch, run 32551845844): tokens/s from 1.53 to 68.6,
    contexts to 131072, a build_fail point with null figures."""
    points = [{**SWEEP, "context_len": 131072, "decode_tokens_per_sec": 1.53, "ms_per_token": 653.45},
              {**SWEEP, "context_len": 1024, "decode_tokens_per_sec": 68.6, "ms_per_token": 14.578},
              {**SWEEP, "context_len": 2048, "decode_tokens_per_sec": None, "ms_per_token": None,
               "status": "build_fail"}]
    parse_lines("\n".join(json.dumps(p) for p in points) + "\n", "sweep_history.ndjson")


def test_an_imported_line_is_exported_verbatim_with_its_own_runner():
    events = record([(NIGHTLY_STREAM, NightlyPerfImported(series="history", row=LINE, file="history.ndjson", line=1))])
    [line] = export_history(events, "history")
    assert json.loads(line) == LINE and json.loads(line)["runner"] == "amdryzenai5pro340"
