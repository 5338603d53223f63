"""Every figure says where it comes from (issue #24): the registry's NPU2 columns never show a CPU-emulator
figure, `kernel run` and `ledger run` label their times, predict states its padded length and memory fit."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from handlers.cli.main import cli
from handlers.registry_ops import build_projections
from registry.synthetic import realistic_deployment, record

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
NUMBER_AFTER_GLYPH = re.compile(r"🧪 \**[\d.]+")


def test_no_npu2_column_holds_an_emulator_figure(tmp_path):
    build_projections(record(realistic_deployment()), tmp_path)
    pages = list((tmp_path / "kernel_registry").rglob("*.md")) + list((tmp_path / "llms").rglob("*.md"))
    assert pages
    bad = [(p.name, line) for p in pages for line in p.read_text(encoding="utf-8").splitlines()
           if line.startswith("|") and NUMBER_AFTER_GLYPH.search(line) and "(CPU emulator)" not in line]
    assert bad == []
    index = (tmp_path / "kernel_registry" / "supported_kernels.md").read_text(encoding="utf-8")
    assert "not measured on NPU2 (only 🧪 CPU emulator, not NPU2 rows:" in index


def test_kernel_run_labels_its_time_as_the_cpu_emulators():
    r = CliRunner().invoke(cli, ["kernel", "run", "eltwise_add", "--shape", "N=4096"])
    assert r.exit_code == 0, r.output
    time_line = next(line for line in r.output.splitlines() if line.startswith("time"))
    assert "CPU emulator (emulated, not NPU2)" in time_line


def test_predict_states_its_padded_length_and_the_memory_fit():
    r = CliRunner().invoke(cli, ["predict", str(CONFIGS / "llama-3.2-1b.json"), "--seq", "100", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["source"] == "modelled NPU2"
    assert any("prefill of 100 positions" in n and "pads every prompt" in n for n in out["notes"])
    assert out["memory"]["fits"] and out["memory"]["largest_bo_bytes"] < 4 * 2**30
    r = CliRunner().invoke(cli, ["predict", str(CONFIGS / "mistral-7b-v0.3.json"), "--host-memory-gib", "8"])
    assert r.exit_code == 0
    assert "does not fit" in r.output
