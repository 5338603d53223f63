"""`ledger registry build [--check]` and `import` through the click group, on a real SQLite ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from handlers.cli.registry import registry
from handlers.registry_ops import build_projections
from ledger import NewEvent, open_ledger
from registry.synthetic import realistic_deployment, record, synthetic_kernel_events


@pytest.fixture()
def events():
    return record(list(synthetic_kernel_events(120)) + realistic_deployment("smollm2_135m_instruct"))


def test_check_reports_a_hand_edited_file_and_a_deleted_one(tmp_path, events):
    build_projections(events, tmp_path)
    assert build_projections(events, tmp_path, check=True).clean
    edited = tmp_path / "kernel_registry" / "supported_kernels.md"
    edited.write_text(edited.read_text() + "\nhand edit\n")
    deleted = tmp_path / "llms" / "smollm2_135m_instruct" / "TODO.md"
    deleted.unlink()
    result = build_projections(events, tmp_path, check=True)
    assert set(result.differing) == {"kernel_registry/supported_kernels.md", "llms/smollm2_135m_instruct/TODO.md"}
    assert result.missing == ("llms/smollm2_135m_instruct/TODO.md",)
    assert not deleted.exists() and "hand edit" in edited.read_text()  # check mode writes nothing
    rebuilt = build_projections(events, tmp_path)
    assert set(rebuilt.written) == set(result.differing)
    assert build_projections(events, tmp_path, check=True).clean


def _cli_obj(tmp_path: Path):
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    return ledger, {"open_ledger": lambda: ledger, "workspace": tmp_path / "ws"}


def test_cli_build_then_check_fails_after_a_hand_edit(tmp_path):
    ledger, obj = _cli_obj(tmp_path)
    try:
        for stream, event in synthetic_kernel_events(30):
            ledger.append(stream, ledger.stream_version(stream), [NewEvent(event=event)])
        runner = CliRunner()
        built = runner.invoke(registry, ["build"], obj=obj)
        assert built.exit_code == 0, built.output
        assert runner.invoke(registry, ["build", "--check"], obj=obj).exit_code == 0
        page = tmp_path / "ws" / "kernel_registry" / "details" / "GEMM_bf16_in_bf16_out.json"
        page.write_text(page.read_text().replace('"high"', '"low"', 1))
        checked = runner.invoke(registry, ["build", "--check"], obj=obj)
        assert checked.exit_code == 1
        assert "differs: kernel_registry/details/GEMM_bf16_in_bf16_out.json" in checked.output
    finally:
        ledger.close()


def test_cli_import_of_a_directory_without_registry_json_is_a_clear_error(tmp_path):
    ledger, obj = _cli_obj(tmp_path)
    try:
        (tmp_path / "empty").mkdir()
        out = CliRunner().invoke(registry, ["import", str(tmp_path / "empty")], obj=obj)
        assert out.exit_code == 1 and "no registry JSON files" in out.output
    finally:
        ledger.close()
