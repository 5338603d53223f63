"""`ledger registry import` accounts for every row it reads (issue #25 item 1): the later kernels' tables
(Conv1D's pad gate and placement sweep, several rows per shape; Element-wise Multiply) are imported, a table
with a header no schema knows is refused and named (exit 1, nothing appended) unless --allow-skip, GEMM JSON
rows with `mean_rel_L1: null` still import, and `measured_at` comes from the file, never a constant."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from handlers.registry_ops import SkippedRows, import_registry_accounted
from ledger import open_ledger
from registry.fold import fold_registry
from registry.render_markdown import render_all_markdown
from tests.e2e.cli import ledger as cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
UNKNOWN = """
## Tested shapes

| seq | heads | best config | latency | Status |
|---|---|---|---|---|
| 2048 | 32 | 8/4 | 1.2 ms | ✅ |
| 4096 | 32 | 8/4 | 2.5 ms | ✅ |
"""


@pytest.fixture
def kernel_registry(tmp_path) -> Path:
    """mlir-air's kernel_registry/ as of e972f29 (shared fixtures) plus the two later kernels' pages."""
    root = tmp_path / "mlir-air" / "programming_examples" / "kernel_registry"
    shutil.copytree(FIXTURES / "upstream_registry_tables", root)
    shutil.copytree(FIXTURES / "upstream_registry_later" / "details", root / "details", dirs_exist_ok=True)
    for f in (FIXTURES / "upstream_registry").glob("*.json"):
        shutil.copy(f, root / "details" / f.name)
    return root


def _ledger(tmp_path):
    return open_ledger(f"sqlite:///{tmp_path / 'l.db'}")


def test_the_later_kernels_are_imported_row_by_row_with_their_config_sweep(tmp_path, kernel_registry):
    lg = _ledger(tmp_path)
    result = import_registry_accounted(lg, kernel_registry)
    assert result.skipped == 0
    by = {(a.kernel, a.header.split(" | ")[0]): a for a in result.accounts}
    assert (by["conv1d", "pad"].read, by["conv1d", "pad"].imported) == (4, 4)
    assert (by["conv1d", "hx×hy"].read, by["conv1d", "hx×hy"].imported) == (5, 5)
    assert (by["eltwise_mul", "N"].read, by["eltwise_mul", "N"].imported) == (3, 3)
    events = [e.payload for e in lg.read_stream("registry:import")]
    conv = [p for p in events if p["kernel"] == "conv1d"]
    # two pad rows per shape and six sweep configs (one row names two herds), all kept apart
    assert len(conv) == 4 + 6
    at = [p for p in conv if p["shape"] == {"seq": 1024, "C": 1024}]
    assert {p["tile"].get("pad") for p in at} == {"zero", "nonzero", None} and len(at) == 2 + 6
    sweep = {(p["tile"]["herd_x"], p["tile"]["herd_y"], p["tile"]["tile_s"]): p for p in at if "herd_x" in p["tile"]}
    assert sweep[8, 1, 8]["verdict"] == "PASS" and sweep[8, 1, 8]["latency_us"] == 210
    assert sweep[8, 1, 16]["latency_us"] is None
    assert sweep[2, 1, 64]["verdict"] == "FAIL" and sweep[4, 2, 16]["verdict"] == "FAIL"
    bad_pad = next(p for p in conv if p["shape"] == {"seq": 16, "C": 1024} and p["tile"]["pad"] == "nonzero")
    assert bad_pad["verdict"] == "FAIL" and bad_pad["mean_rel_L1"] == pytest.approx(2.912e-3)
    mul = {p["shape"]["N"]: p for p in events if p["kernel"] == "eltwise_mul"}
    assert sorted(mul) == [524288, 2097152, 8388608] and mul[2097152]["latency_us"] == 151
    assert mul[8388608]["caveat"] == "upstream-warning"
    assert all(p["measured_at"] == "unknown" for p in events if p["kernel"] not in ("gemm",))
    assert import_registry_accounted(lg, kernel_registry).added == 0
    data = fold_registry(lg.read_all())
    files = render_all_markdown(data)  # the later kernels' rows are rendered back in their own tables' columns
    page = files["details/conv1d_bf16.md"].decode()
    assert "| pad | seq×C | mean_rel_L1 | verdict |" in page and "| 8×2, 4×2 | 16 | — | TIMEOUT | — |" in page
    assert "| hx×hy | tile_s | L1 | verdict | latency |" in page
    assert "| 2097152 | 1024×2048 | 151 µs | 83.3 GB/s | 2.745e-3 | ✅ correctness |" in (
        files["details/eltwise_mul_bf16.md"].decode())


def test_a_table_with_an_unknown_header_is_never_lost_silently(tmp_path, kernel_registry):
    page = kernel_registry / "details" / "Mamba_bf16.md"
    page.write_text("# Mamba scan (BF16)\n" + UNKNOWN)
    lg = _ledger(tmp_path)
    with pytest.raises(SkippedRows) as e:
        import_registry_accounted(lg, kernel_registry)
    assert "details/Mamba_bf16.md" in str(e.value) and "2 row(s) not imported" in str(e.value)
    account = next(a for a in e.value.result.accounts if a.file == "details/Mamba_bf16.md")
    assert account.header == "seq | heads | best config | latency | Status" and account.read == 2
    assert len(account.skipped) == 2 and "no schema" in account.why
    assert lg.read_stream("registry:import") == []  # refused: nothing appended
    allowed = import_registry_accounted(lg, kernel_registry, allow_skip=True)
    assert allowed.skipped == 2 and allowed.added > 0
    assert not [e for e in lg.read_stream("registry:import") if e.payload["kernel"].lower().startswith("mamba")]


def test_the_cli_prints_the_table_and_exits_1_on_a_skip_unless_allowed(tmp_path, kernel_registry):
    (kernel_registry / "supported_kernels.md").write_text(
        (kernel_registry / "supported_kernels.md").read_text() + "\n## Mamba — tested shapes\n" + UNKNOWN[18:])
    db = f"sqlite:///{tmp_path / 'c.db'}"
    refused = cli(tmp_path, "registry", "import", str(kernel_registry), db=db)
    assert refused.returncode == 1
    assert "Mamba" in refused.stderr and "no schema for this header" in refused.stderr
    assert "rror: 2 row(s) not imported, in supported_kernels.md (Mamba: 2 of 2)" in refused.stderr
    ok = cli(tmp_path, "registry", "import", str(kernel_registry), "--allow-skip", db=db)
    assert ok.returncode == 0, ok.stderr
    assert "conv1d" in ok.stdout and "2 row(s) skipped (--allow-skip)" in ok.stdout
    js = cli(tmp_path, "registry", "import", str(kernel_registry), "--allow-skip", "--json", db=db)
    rows = json.loads(js.stdout)
    assert {r["kernel"] for r in rows} >= {"conv1d", "eltwise_mul", "gemm", "Mamba"}


def test_gemm_json_rows_with_a_null_mean_rel_l1_still_import(tmp_path, kernel_registry):
    path = kernel_registry / "details" / "GEMM_bf16_in_bf16_out.json"
    doc = json.loads(path.read_text())
    doc["shapes"].append({"M": 4096, "K": 2048, "N": 2048, "used_by": "sweep",
                          "methods": {"drain": {"tile": {"tile_m": 32, "tile_k_l2": 512, "tile_k_l1": 32,
                                                         "tile_n": 128}, "gflops": 5000.0, "mean_rel_L1": None}}})
    path.write_text(json.dumps(doc))
    lg = _ledger(tmp_path)
    assert import_registry_accounted(lg, kernel_registry).skipped == 0
    row = next(e.payload for e in lg.read_stream("registry:import") if e.payload["role"] == "sweep")
    assert row["shape"] == {"M": 4096, "K": 2048, "N": 2048} and row["gflops"] == 5000.0
    assert row["mean_rel_L1"] is None


def test_measured_at_is_the_files_last_commit_date_in_a_git_checkout(tmp_path, kernel_registry):
    checkout = kernel_registry.parents[1]
    env = {"GIT_AUTHOR_DATE": "2026-09-03T10:00:00Z", "GIT_COMMITTER_DATE": "2026-09-03T10:00:00Z",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "registry"]):
        subprocess.run(["git", *args], cwd=checkout, env=env, check=True)
    lg = _ledger(tmp_path)
    import_registry_accounted(lg, kernel_registry)
    dates = {e.payload["measured_at"] for e in lg.read_stream("registry:import") if e.payload["kernel"] != "gemm"}
    assert dates == {"2026-09-03"}


def test_a_later_index_imports_the_measured_conv1d_and_element_wise_multiply_rows(tmp_path, kernel_registry):
    """Issue 46: supported_kernels.md at 0b499c9 gained tested-shapes tables for Conv1D and Element-wise Multiply with
    the idle-NPU2 figures (594.6 us / 28.2 GB/s at 2048x2048 herd 8x1 tile_s 8; 451.6 us / 55.7 GB/s at N=4194304).
    Their headers have schemas (registry.mlir_air_tables.LATER `index`), so a later checkout imports with nothing
    skipped (before, both tables were refused: exit 1 unless --allow-skip)."""
    index = kernel_registry / "supported_kernels.md"
    later = (FIXTURES / "upstream_registry_later" / "supported_kernels_0b499c9.md").read_text(encoding="utf-8")
    index.write_text(index.read_text(encoding="utf-8") + "\n---\n\n" + later, encoding="utf-8")
    lg = _ledger(tmp_path)
    result = import_registry_accounted(lg, kernel_registry)
    assert result.skipped == 0
    rows = {a.kernel: a for a in result.accounts
            if a.file == "supported_kernels.md" and a.kernel in ("conv1d", "eltwise_mul")}
    assert (rows["conv1d"].read, rows["conv1d"].imported) == (7, 7)
    assert (rows["eltwise_mul"].read, rows["eltwise_mul"].imported + rows["eltwise_mul"].duplicate) == (2, 2)
    events = [e.payload for e in lg.read_stream("registry:import")]
    conv = {(p["shape"]["seq"], p["tile"].get("herd_x"), p["tile"].get("tile_s")): p for p in events
            if p["kernel"] == "conv1d" and p["provenance"]["file"] == "supported_kernels.md"}
    best = conv[2048, 8, 8]
    assert best["latency_us"] == 594.6 and best["verdict"] == "PASS" and best["mean_rel_L1"] == pytest.approx(2.8e-3)
    assert best["provenance"]["schema_commit"].startswith("0b499c9") and conv[2048, 1, 4]["latency_us"] == 4367
    assert conv[8, 8, 8]["latency_us"] is None  # the decode-scale row has no latency
    mul = [p for p in events if p["kernel"] == "eltwise_mul" and p["shape"] == {"N": 4194304}]
    assert [p["latency_us"] for p in mul] == [451.6]
