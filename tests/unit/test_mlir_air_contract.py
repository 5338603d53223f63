"""The mlir-air contract (issue #25 item 2): `ledger doctor` passes on a `ledger twin` directory (the twin writes
the formats the tool reads), names the file and what is absent when a format the tool depends on changed (exit
1), lists the registry tables beyond the contract as `new` without failing, and every mlir-air toolchain records
the contract version beside the checkout's commit."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from handlers.doctor import doctor, preflight, registry_news
from npu_kernels.mlir_air.contract import CONTRACT_VERSION, check_checkout, contract_checks
from npu_kernels.mlir_air.twin import write_twin
from npu_kernels.toolchain import current_toolchain, toolchain_label
from tests.e2e.cli import ledger as cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def twin(tmp_path_factory) -> Path:
    return write_twin(tmp_path_factory.mktemp("twin") / "mlir-air")


def test_the_twin_meets_the_contract(twin, tmp_path):
    findings = doctor(twin)
    assert [f for f in findings if f.fails] == []
    assert {f.status for f in findings} <= {"ok", "n/a"}
    # every Makefile the harness table runs is checked in the twin itself, variables and targets
    makefiles = [f for f in findings if f.check.kind in ("make_vars", "targets")]
    assert makefiles and all(f.status == "ok" and f.read.startswith(str(twin)) for f in makefiles)
    done = cli(tmp_path, "doctor", str(twin))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no difference" in done.stdout and f"contract v{CONTRACT_VERSION}" in done.stdout
    js = json.loads(cli(tmp_path, "doctor", str(twin), "--json").stdout)
    assert js["clean"] and js["contract_version"] == CONTRACT_VERSION and len(js["commit"]) == 40


def test_a_changed_makefile_is_named_with_what_it_lacks_and_exits_1(twin, tmp_path):
    changed = tmp_path / "mlir-air"
    shutil.copytree(twin, changed, symlinks=True)
    make = changed / "programming_examples" / "eltwise_add" / "Makefile"
    make.write_text(make.read_text().replace("PERF_ITERS", "N_ITERS"))
    bad = [f for f in check_checkout(changed) if f.fails]
    assert [(f.check.file, f.absent) for f in bad] == [("programming_examples/eltwise_add/Makefile", ("PERF_ITERS",))]
    done = cli(tmp_path, "doctor", str(changed))
    assert done.returncode == 1
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("programming_examples/eltwise_add/Makefile")
                and "differs" in ln)
    assert "'PERF_ITERS'" in line and "1 difference(s) in 1 file(s)" in done.stdout
    assert preflight(str(changed)).startswith(f"MLIR_AIR_DIR={changed} does not meet mlir-air contract")


def test_the_registry_headers_of_e972f29_pass_and_later_pages_are_listed_as_new(tmp_path):
    root = tmp_path / "checkout"
    reg = root / "programming_examples" / "kernel_registry"
    shutil.copytree(FIXTURES / "upstream_registry_tables", reg)  # e972f29's tables, verbatim
    headers = [f for f in doctor(root) if f.check.kind == "table_headers" and "/details/" in f.check.file
               and f.status != "missing"]
    assert len(headers) == 8 and all(f.status == "ok" for f in headers)
    assert registry_news(root) == []
    shutil.copytree(FIXTURES / "upstream_registry_later" / "details", reg / "details", dirs_exist_ok=True)
    (reg / "details" / "Mamba_bf16.md").write_text("## Tested shapes\n\n| seq | Status |\n|---|---|\n| 2048 | ✅ |\n")
    news = {(f.check.file.rsplit("/", 1)[-1], f.absent[0].split("]")[0]): f for f in registry_news(root)}
    assert set(news) == {("Conv1D_bf16.md", "[pad | seq×C | mean_rel_L1 | verdict"),
                         ("Conv1D_bf16.md", "[hx×hy | tile_s | L1 | verdict | latency"),
                         ("EltwiseMul_bf16.md", "[N | (as 2-D) | latency | bandwidth | mean_rel_L1 | Status"),
                         ("Mamba_bf16.md", "[seq | Status")}
    assert all(f.status == "new" and not f.fails for f in news.values())
    assert "refuses these rows" in news["Mamba_bf16.md", "[seq | Status"].absent[0]


def test_a_contract_item_missing_from_upstream_source_is_a_difference(tmp_path):
    """The same check on a real checkout's source file: a [precision] format that lost a field differs."""
    src = tmp_path / "checkout" / "python" / "air" / "backend" / "xrt_runner.py"
    src.parent.mkdir(parents=True)
    precision = next(c for c in contract_checks() if c.file == "python/air/backend/xrt_runner.py")
    src.write_text("\n".join(i for i in precision.items if "rel_err max" not in i))
    found = next(f for f in check_checkout(tmp_path / "checkout") if f.check is precision)
    assert found.status == "differs" and found.absent == ("rel_err max={rel_err.max():.3e} | ",)


def test_the_mlir_air_toolchain_records_the_checkouts_commit_and_the_contract_version(twin):
    tc = current_toolchain("mlir-air", mlir_air_dir=str(twin))
    head = subprocess.run(["git", "-C", str(twin), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert tc["mlir_air_commit"] == head and tc["mlir_air_contract"] == str(CONTRACT_VERSION)
    assert f"mlir-air-contract {CONTRACT_VERSION}" in toolchain_label(tc)
    old = {k: v for k, v in tc.items() if k != "mlir_air_contract"}  # a row recorded before the key existed
    assert "mlir-air-contract" not in toolchain_label(old)


def test_an_attention_script_without_the_sliding_window_is_named(tmp_path):
    """Gemma3's local layers pass `--window W` to attn_npu2.py (harnesses.toml [flags]) and the twin's harness inputs
    mask the window as its reference does (attn_npu2.py:1464-1469 at e972f29): a checkout whose script lacks either
    is named by `ledger doctor` (issue #48)."""
    script = tmp_path / "programming_examples" / "flash_attention" / "kernel_fusion_based" / "attn_npu2.py"
    script.parent.mkdir(parents=True)
    (check,) = [c for c in contract_checks() if c.file.endswith("attn_npu2.py")]
    script.write_text("\n".join(check.items) + "\n")
    assert [f.status for f in check_checkout(tmp_path) if f.check is check] == ["ok"]
    script.write_text("\n".join(check.items[:-1]) + "\n")  # the flag, but a reference without the window mask
    (finding,) = [f for f in check_checkout(tmp_path) if f.check is check]
    assert finding.status == "differs" and finding.absent == (check.items[-1],)


def test_contract_v5_pins_the_prefill_bench_and_the_fused_prefill_switch_and_an_older_checkout_is_told(tmp_path):
    """Issue 46: files mlir-air added after e972f29 that decide what a prefill figure is - shared/infra/
    prefill_bench.py (f4a41dd: the TTFT / prompt_len lines model_profile.py parses) and verify/runners/
    fused_prefill.py (dc94617: $FUSED_PREFILL_DIR with a manifest.json runs the fused engine, else the per-op
    prefill) - are checked where present, n/a on a checkout that predates them, and doctor names what came later."""
    assert CONTRACT_VERSION == 5  # v4: the sliding window (#48); v5: these files
    later = {c.file: c for c in contract_checks() if c.since}
    bench = later["programming_examples/llms/shared/infra/prefill_bench.py"]
    fused = later["programming_examples/llms/verify/runners/fused_prefill.py"]
    assert bench.since.startswith("f4a41dd") and fused.since.startswith("dc94617")
    old = tmp_path / "old"  # laid out like e972f29: the verify runner, neither later file
    (old / "programming_examples" / "llms" / "verify").mkdir(parents=True)
    (old / "programming_examples" / "llms" / "verify" / "verify_runner.py").write_text("# e972f29\n")
    by_file = {f.check.file: f for f in check_checkout(old)}
    assert by_file[bench.file].status == by_file[fused.file].status == "n/a"
    assert not by_file[bench.file].fails and not by_file[fused.file].fails
    done = cli(tmp_path, "doctor", str(old))
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith(bench.file))
    assert "n/a" in line and "added upstream after e972f29 (read at f4a41dd)" in line
    js = json.loads(cli(tmp_path, "doctor", str(old), "--json").stdout)
    assert {f["file"]: f["since"] for f in js["findings"] if f["since"]}[fused.file] == fused.since
    # a later checkout whose bench lost the TTFT line differs, by name
    src = old / bench.file
    src.parent.mkdir(parents=True)
    src.write_text("\n".join(i for i in bench.items if "TTFT" not in i))
    found = next(f for f in check_checkout(old) if f.check is bench)
    assert found.status == "differs" and found.absent == ("Time to first token (TTFT): {wall:.3f}s",)


def test_a_checkout_at_the_contracts_commit_is_not_failed_for_the_later_harness_makefiles(tmp_path):
    """The Conv1D and Element-wise Multiply harness Makefiles (harnesses.toml, conv1d_depthwise@73a1160 and
    eltwise_mul@e0eee76) appeared after e972f29: on a checkout that predates them they are n/a with the commit
    named, not `missing` (`ledger doctor` on a real e972f29 checkout reported 4 differences for them before)."""
    later = {f.check.file: f for f in check_checkout(tmp_path) if f.check.kind in ("make_vars", "targets")
             and f.check.since}
    assert set(later) == {"programming_examples/conv1d_depthwise/Makefile", "programming_examples/eltwise_mul/Makefile"}
    assert all(f.status == "n/a" and not f.fails for f in later.values())
    assert later["programming_examples/eltwise_mul/Makefile"].check.at.startswith("e0eee76")
    required = [f for f in check_checkout(tmp_path) if f.check.kind == "make_vars" and not f.check.since]
    assert required and all(f.status == "missing" for f in required)  # the e972f29 harnesses stay required


def test_the_later_index_tables_are_listed_as_new_and_read_by_their_0b499c9_schema(tmp_path):
    reg = tmp_path / "checkout" / "programming_examples" / "kernel_registry"
    shutil.copytree(FIXTURES / "upstream_registry_tables", reg)
    later = (FIXTURES / "upstream_registry_later" / "supported_kernels_0b499c9.md").read_text(encoding="utf-8")
    (reg / "supported_kernels.md").write_text((reg / "supported_kernels.md").read_text(encoding="utf-8") + "\n" + later)
    news = [f for f in registry_news(tmp_path / "checkout") if f.check.file.endswith("supported_kernels.md")]
    assert len(news) == 2 and all(f.status == "new" and not f.fails for f in news)
    assert all("supported_kernels.md at 0b499c9" in f.absent[0] for f in news)
