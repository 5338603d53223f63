"""Issue #38 item 6: exports are honest. On a workspace whose figures are all emulated / modelled (the deployed tiny
Llama), `ledger perf export-history` writes nothing; with `--modelled` every line's model names its class, so
mlir-air's own dashboard (programming_examples/generate_readme.py, read at run time from MLIR_AIR_DIR, never copied
here) renders rows that say "modelled" instead of an NPU2 measurement. The old `--include-not-measured` is refused
in one line: it wrote modelled figures under the bare model name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cli import in_process
from tests.e2e.workspaces import copy_workspace

# series -> generate_readme.py's flag for its history file (e972f29 :1001-1011; the prefill one from a32bef3)
FLAGS = {"history": "--llm-history", "sweep": "--llm-sweep-history", "prefill_sweep": "--llm-prefill-sweep-history"}


@pytest.fixture(scope="module")
def emulated(tiny_snapshots, tmp_path_factory) -> Path:
    return copy_workspace(tiny_snapshots[7], tmp_path_factory.mktemp("nightly-export") / "ws")


def _export(ws: Path, series: str, *flags: str) -> str:
    done = in_process(ws, "perf", "export-history", "--series", series, *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_emulator_only_workspace_exports_nothing_unless_asked_and_then_says_modelled(emulated):
    assert {s: _export(emulated, s) for s in FLAGS} == {s: "" for s in FLAGS}
    for series in FLAGS:
        rows = [json.loads(x) for x in _export(emulated, series, "--modelled").splitlines()]
        assert rows, series
        assert all(r["model"].endswith(" (modelled NPU2)") and r["runner"] == "npu-ledger/modelled-npu2"
                   for r in rows), rows


def test_the_old_flag_is_refused_in_one_line(emulated):
    done = in_process(emulated, "perf", "export-history", "--include-not-measured")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: --include-not-measured is gone") and done.stderr.count("\n") == 1
    assert "use --modelled" in done.stderr


def _dashboard() -> Path:
    root = os.environ.get("MLIR_AIR_DIR")
    script = Path(root) / "programming_examples" / "generate_readme.py" if root else None
    if script is None or not script.is_file():
        pytest.skip("MLIR_AIR_DIR is unset or has no programming_examples/generate_readme.py")
    return script


def _render(script: Path, files: dict[str, Path], out: Path) -> str:
    known = script.read_text(encoding="utf-8")
    args = [a for s, path in files.items() if f'"{FLAGS[s]}"' in known for a in (FLAGS[s], str(path))]
    done = subprocess.run([sys.executable, str(script), "--section", "llm", *args, "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8")


def test_mlir_airs_dashboard_shows_the_modelled_export_as_modelled_and_the_plain_one_not_at_all(emulated, tmp_path):
    script = _dashboard()
    plain, modelled = {}, {}
    for series in FLAGS:
        plain[series] = tmp_path / f"plain-{series}.ndjson"
        plain[series].write_text(_export(emulated, series))
        modelled[series] = tmp_path / f"modelled-{series}.ndjson"
        modelled[series].write_text(_export(emulated, series, "--modelled"))
    assert "Nightly LLM Benchmark" not in _render(script, plain, tmp_path / "plain.md")  # nothing to show
    page = _render(script, modelled, tmp_path / "modelled.md")
    assert "## Nightly LLM Benchmark (NPU2)" in page
    rows = [line for line in page.splitlines() if line.startswith("| [")]  # every model row of every table
    assert rows and all("(modelled NPU2)" in row for row in rows), rows


def test_a_figure_of_zero_or_less_is_named_and_not_exported_never_divided_by(tmp_path):
    """Issue #45 item 3: a prefill_sweep line's tokens/s is its length over its TTFT; a record whose TTFT is 0, or
    0.00 ms at the two decimals a line carries, or whose tokens/s is negative writes no line: one warning each."""
    from ledger import open_ledger
    from ledger.events import NewEvent, PerformanceMeasured

    (tmp_path / ".ledger").mkdir()
    ledger = open_ledger(f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}")
    figures = [{"ttft_s": 0.0}, {"ttft_s": 1e-6}, {"ttft_s": 0.5, "tokens_per_s": -3.0}, {"ttft_s": 0.5}]
    for i, f in enumerate(figures):
        ledger.append("deployment:x", i, [NewEvent(event=PerformanceMeasured(
            phase=6, executor="emulated", n_prompt_tokens=64, tokens_per_s=f.get("tokens_per_s", 20.0),
            ms_per_token=50.0, profile={"npu2": {"ctx": 128}}, **{k: v for k, v in f.items() if k != "tokens_per_s"}))])
    for series in FLAGS:
        done = in_process(tmp_path, "perf", "export-history", "--series", series, "--modelled")
        assert done.returncode == 0, done.stderr
        assert [json.loads(x)["run_id"] for x in done.stdout.splitlines()] == ["npu-ledger:x:4"], series
        assert done.stderr.splitlines() == [
            "warning: seq 1 (x): ttft_s 0.0 is not a positive finite number; not exported",
            "warning: seq 2 (x): ttft_s 1e-06 is 0.00 ms at the two decimals a nightly line carries; not exported",
            "warning: seq 3 (x): tokens_per_s -3.0 is not a positive finite number; not exported"]
