"""The registry in mlir-air's own schemas: `ledger registry import` reads a kernel_registry/ folder as it is
(GEMM JSON plus the tested-shapes tables of the eight kernels without JSON, each row's status kept), the
projection renders each kernel's table in upstream's columns (emulated rows marked, never best), and
`ledger registry build --into-mlir-air` adds the ledger's new rows without touching anything else."""

import shutil
from pathlib import Path

import pytest

from handlers.registry_merge import merge_into_mlir_air
from handlers.registry_ops import import_registry
from ledger import open_ledger
from tests.npu2_facts import NPU2_PROVENANCE
from ledger.events import KernelVerified
from registry import mlir_air_tables as T
from registry.fold import fold_registry
from registry.render_markdown import render_all_markdown
from registry.synthetic import record
from tests.e2e.cli import ledger as cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TABLES, JSON = FIXTURES / "upstream_registry_tables", FIXTURES / "upstream_registry"
# rows per kernel in mlir-air's tables at e972f29 (details and supported_kernels.md, distinct shapes)
UPSTREAM_ROWS = {"gemv": 37, "rmsnorm": 8, "layernorm": 1, "rope": 13, "flash_attention": 16, "eltwise_add": 9,
                 "silu_mul": 11, "gelu": 5, "gemm_bf16": 76, "gemm_f32": 7}


@pytest.fixture
def kernel_registry(tmp_path) -> Path:
    """A folder shaped like mlir-air's programming_examples/kernel_registry/."""
    root = tmp_path / "mlir-air" / "programming_examples" / "kernel_registry"
    shutil.copytree(TABLES, root)
    for f in JSON.glob("*.json"):
        shutil.copy(f, root / "details" / f.name)
    return root


def test_importing_the_folder_keeps_every_kernels_rows_and_a_second_import_adds_nothing(tmp_path, kernel_registry):
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    added = import_registry(lg, kernel_registry)
    assert added == sum(UPSTREAM_ROWS[k] for k in T.NO_JSON) + len(
        [e for e in lg.read_stream("registry:import") if e.payload["kernel"] == "gemm"])
    assert import_registry(lg, kernel_registry) == 0
    data = fold_registry(lg.read_all())
    assert {k: len(data.page(k).rows) for k in UPSTREAM_ROWS} == UPSTREAM_ROWS
    fa = {tuple(dict(r.shape).values()) for r in data.page("flash_attention").rows}
    assert (2048, 2048, 64, 64, 32, 8, True) in fa
    gemv = next(e for e in lg.read_stream("registry:import") if e.payload["shape"] == {"M": 2048, "K": 2048})
    assert gemv.payload["tile"] == {"herd_m": 8, "tile_m": 8, "m_input": 8} and gemv.payload["latency_us"] == 330
    assert gemv.payload["provenance"]["row"].startswith("2048×2048 | 8/8/8 | 330 µs")


def test_a_warning_row_stays_a_warning(tmp_path, kernel_registry):
    page = kernel_registry / "details" / "RMSNorm_bf16.md"
    text = page.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 2048×128 "))
    page.write_text(text.replace(row, row.rsplit("| ✅ |", 1)[0] + "| ⚠️ coverage only |"))  # a synthetic ⚠️ row
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    import_registry(lg, kernel_registry)
    data = fold_registry(lg.read_all())
    r = next(r for r in data.page("rmsnorm").rows if dict(r.shape) == {"M": 2048, "N": 128})
    assert r.status == "caveat" and T.status_cell(r) == "⚠️ coverage only"
    assert "⚠️ coverage only" in render_all_markdown(data)["supported_kernels.md"].decode()


def test_each_kernels_table_is_rendered_in_upstreams_columns_with_emulated_rows_marked(tmp_path, kernel_registry):
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    import_registry(lg, kernel_registry)
    emulated = KernelVerified(kernel="rmsnorm", shape={"M": 4096, "N": 4096}, contract="bf16-out", executor="emulated",
                              verdict="PASS", rtol=1.6e-2, atol=5e-2, mean_rel_L1=4.1e-3, latency_us=10.0,
                              tile={"herd_x": 8}, source="emulated")
    data = fold_registry([*lg.read_all(), *record([("deployment:m", emulated)], start_seq=10_000)])
    files = render_all_markdown(data)
    index = files["supported_kernels.md"].decode()
    for key, header in T.INDEX.items():
        assert "| " + " | ".join(header) + " |" in index, key
    for key, tables in T.DETAILS.items():
        page = files[f"details/{T.PAGE_OF[key]}.md"].decode()
        for _, header in tables:
            assert "| " + " | ".join(header) + " |" in page, key
    row = next(line for line in index.splitlines() if line.startswith("| 4096×4096 | 8 |"))
    assert "🧪" in row and "**" not in row and "CPU emulator, not NPU2" in row
    upstream_row = next(line for line in index.splitlines() if line.startswith("| 2048×128 | 8 | 155 µs |"))
    assert upstream_row.endswith("| ✅ |")


def test_build_into_mlir_air_adds_new_rows_after_each_table_and_leaves_the_rest_as_it_was(tmp_path, kernel_registry):
    (tmp_path / ".ledger").mkdir()
    lg = open_ledger(f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}")
    harness = dict(executor="mlir-air", source="harness", verdict="PASS", measured_at="2026-12-01",
                   provenance=NPU2_PROVENANCE)
    new = [
        KernelVerified(kernel="gemv", shape={"M": 576, "K": 576}, contract="bf16-out", rtol=1.6e-2, atol=1e-3,
                       mean_rel_L1=2e-9, max_abs=1e-3, max_rel=4e-3, latency_us=60.0, tile={"herd_m": 8, "tile_m": 8,
                       "m_input": 8}, role="Q/O proj", **harness),
        KernelVerified(kernel="gemm", shape={"M": 2048, "K": 576, "N": 576}, contract="bf16-out-high", rtol=1.6e-2,
                       atol=1.5e-3, mean_rel_L1=9.5e-3, gflops=1500.0, method="drain", tier="high",
                       tile={"tile_m": 32, "tile_k_l2": 192, "tile_k_l1": 32, "tile_n": 48, "herd_m": 8, "herd_n": 4},
                       herd=[8, 4], role="Q/O proj", **harness),
        KernelVerified(kernel="gemv", shape={"M": 2048, "K": 2048}, contract="bf16-out", rtol=1.6e-2, atol=1e-3,
                       mean_rel_L1=2e-9, latency_us=331.0, tile={"herd_m": 8, "tile_m": 8, "m_input": 8}, **harness),
    ]
    lg.append("deployment:smollm2", 0, new)
    before = {p: p.read_bytes() for p in kernel_registry.rglob("*") if p.is_file()}
    checkout = kernel_registry.parents[1]
    proc = cli(tmp_path, "registry", "build", "--into-mlir-air", str(checkout))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    added = {line.split(": ")[0]: int(line.split(": ")[1].split()[0]) for line in proc.stdout.splitlines()
             if "row(s) added" in line and not line.startswith("added")}
    # the fixture's supported_kernels.md holds the eight non-GEMM tables only: the GEMM row goes to its JSON
    assert added == {"supported_kernels.md": 1, "details/GEMV_bf16.md": 1, "details/GEMM_bf16_in_bf16_out.json": 1}
    assert "added 3 row(s)" in proc.stdout
    for path, old in before.items():
        now = path.read_bytes()
        if path.name == "GEMM_bf16_in_bf16_out.json":
            assert now.startswith(old[:old.rindex(b"\n    }\n  ]")])  # upstream's shapes untouched, ours appended
            continue
        old_lines, new_lines = old.decode().split("\n"), now.decode().split("\n")
        kept = [line for line in new_lines if line in old_lines]
        assert kept == old_lines  # nothing upstream wrote is changed or dropped
        extra = [line for line in new_lines if line not in old_lines]
        if path.name == "GEMV_bf16.md":
            assert extra == ["| 576×576 | 8/8/8 | 60 µs | 11.1 | 2.0e-9 | 4.0e-3 | 1.0e-3 | smollm2 Q/O proj | ✅ |"]
            assert new_lines.index(extra[0]) == old_lines.index(next(l for l in old_lines[::-1] if l.startswith("|"))) + 1
    assert merge_into_mlir_air(lg.read_all(), checkout) == {}  # idempotent: the rows are there now


def test_build_into_mlir_air_never_adds_a_gemm_row_recorded_without_a_method(tmp_path, kernel_registry):
    """Issue #45 item 2: a hardware GEMM PASS with no method (appended before `record harness` required one) would
    land in mlir-air's JSON as method "mlir-air", a `best` its builders raise on (gemm_builder.py:101 at e972f29)."""
    lg = open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    row = KernelVerified(kernel="gemm", shape={"M": 2048, "K": 576, "N": 576}, contract="bf16-out-high", rtol=1.6e-2,
                         atol=1.5e-3, mean_rel_L1=9.5e-3, gflops=1500.0, tier="high", executor="mlir-air",
                         source="harness", verdict="PASS", measured_at="2026-12-01", provenance=NPU2_PROVENANCE,
                         tile={"tile_m": 32, "tile_k_l2": 192, "tile_k_l1": 32, "tile_n": 48})
    lg.append("deployment:smollm2", 0, [row])
    before = {p: p.read_bytes() for p in kernel_registry.rglob("*") if p.is_file()}
    assert merge_into_mlir_air(lg.read_all(), kernel_registry.parents[1]) == {}
    assert {p: p.read_bytes() for p in kernel_registry.rglob("*") if p.is_file()} == before
    lg.append("deployment:smollm2", 1, [row.model_copy(update={"method": "drain"})])
    assert merge_into_mlir_air(lg.read_all(), kernel_registry.parents[1]) == {"details/GEMM_bf16_in_bf16_out.json": 1}
