"""Importing mlir-air's registry JSON, and the round trip back to JSON that mlir-air's lookup reads.

The fixtures are mlir-air's own `GEMM_bf16_in_{bf16,fp32}_out.json` (shared fixtures, `upstream_registry/`).
Done-when (issue #7): importing both and rebuilding gives JSON on which `gemm_config` answers exactly as on
the originals, for every shape, dtype and tier, and every field upstream's lookup reads is identical.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from handlers.registry_ops import build_projections, import_registry
from ledger import open_ledger
from registry.importer import IMPORT_STREAM, UpstreamFormatError, events_from_upstream
from registry.lookup import gemm_config
from registry.render_json import GEMM_JSON
from registry.synthetic import record

ROOT = Path(__file__).resolve().parents[2]


def _upstream_dir() -> Path | None:
    """tests/fixtures/upstream_registry, else $NPU_LEDGER_SHARED/fixtures/..., else a shared/ beside the checkout."""
    candidates = [ROOT / "tests" / "fixtures" / "upstream_registry"]
    if os.environ.get("NPU_LEDGER_SHARED"):
        candidates.append(Path(os.environ["NPU_LEDGER_SHARED"]) / "fixtures" / "upstream_registry")
    candidates += [p / "shared" / "fixtures" / "upstream_registry" for p in (ROOT, *ROOT.parents)]
    return next((c for c in candidates if (c / GEMM_JSON["bf16"]).is_file()), None)


UPSTREAM = _upstream_dir()
pytestmark = pytest.mark.skipif(UPSTREAM is None, reason="upstream registry fixtures not found")


def _imported_events():
    items = []
    for path in sorted(UPSTREAM.glob("*.json")):
        items += [(IMPORT_STREAM, event, event_id) for event_id, event in events_from_upstream(path)]
    return record(items)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rebuilt")
    build_projections(_imported_events(), out)
    return out / "kernel_registry" / "details"


def _answer(directory: Path, *args):
    try:
        return "ok", gemm_config(*args, registry_dir=directory)
    except KeyError:
        return "KeyError", None


def _cases():
    for dtype, name in sorted(GEMM_JSON.items()):
        doc = json.loads((UPSTREAM / name).read_text()) if UPSTREAM else {"shapes": []}
        for s in doc["shapes"]:
            for precision in ("high", "low"):
                yield dtype, s["M"], s["K"], s["N"], precision


def test_importing_the_same_file_twice_gives_the_same_event_ids_and_events():
    for path in sorted(UPSTREAM.glob("*.json")):
        first, second = events_from_upstream(path), events_from_upstream(path)
        assert [i for i, _ in first] == [i for i, _ in second]
        assert [e for _, e in first] == [e for _, e in second]
        assert len({i for i, _ in first}) == len(first)


def test_imported_rows_carry_provenance_notes_and_numerics_tolerances():
    events = dict(events_from_upstream(UPSTREAM / GEMM_JSON["bf16"]))
    rows = list(events.values())
    assert all(e.source == "imported" and e.verdict == "PASS" and e.executor == "mlir-air" for e in rows)
    assert {e.provenance["file"] for e in rows} == {GEMM_JSON["bf16"]}  # a base name, never a machine path
    assert all(len(e.provenance["sha256"]) == 64 for e in rows)
    low = [e for e in rows if e.tier == "low"]
    assert low and all(e.contract == "bf16-out-low" and e.atol == 4e-3 for e in low)
    assert any("NUMFAIL" in e.note for e in rows)  # upstream's _note kept


def test_import_into_a_real_ledger_twice_adds_nothing_the_second_time(tmp_path):
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        added = import_registry(ledger, UPSTREAM)
        assert added == sum(len(events_from_upstream(p)) for p in UPSTREAM.glob("*.json"))
        assert import_registry(ledger, UPSTREAM) == 0
        assert len(ledger.read_all()) == added
    finally:
        ledger.close()


@pytest.mark.parametrize("dtype,M,K,N,precision", list(_cases()))
def test_gemm_config_answers_the_same_on_the_rebuilt_registry(rebuilt, dtype, M, K, N, precision):
    assert _answer(rebuilt, M, K, N, dtype, precision) == _answer(UPSTREAM, M, K, N, dtype, precision)


def test_every_field_upstream_lookup_reads_is_identical_after_the_round_trip(rebuilt):
    for name in GEMM_JSON.values():
        original = json.loads((UPSTREAM / name).read_text())
        again = json.loads((rebuilt / name).read_text())
        assert [(s["M"], s["K"], s["N"]) for s in again["shapes"]] == [(s["M"], s["K"], s["N"]) for s in original["shapes"]]
        for a, b in zip(original["shapes"], again["shapes"]):
            assert ("best" in a) == ("best" in b) and a.get("best") == b.get("best")
            assert set(a["methods"]) == set(b["methods"])
            for method, m in a["methods"].items():
                n = b["methods"][method]
                for key in ("tile", "gflops", "mean_rel_L1", "tier"):
                    assert n[key] == m[key], (name, a["M"], a["K"], a["N"], method, key)
                assert ("herd" in m) == ("herd" in n) and m.get("herd") == n.get("herd")
        # beyond what the lookup reads: nothing upstream wrote is lost (only our own _comment differs)
        original.pop("_comment"), again.pop("_comment")
        assert again == original


def test_rebuilt_json_is_indented_with_a_trailing_newline(rebuilt):
    text = (rebuilt / GEMM_JSON["f32"]).read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "_comment"')


def test_a_file_that_is_not_an_upstream_gemm_registry_is_refused(tmp_path):
    (tmp_path / "x.json").write_text('{"kernel": "RMSNorm", "shapes": []}')
    with pytest.raises(UpstreamFormatError, match="not an mlir-air GEMM registry"):
        events_from_upstream(tmp_path / "x.json")
