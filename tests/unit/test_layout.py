"""The layout promises: the phase gates reach whole models only through the backend seam."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Phase 0 checks the weight files (kernels.model.weights) and runs the HF reference, which it takes from the seam
FORBIDDEN = ("kernels.model.pipeline", "kernels.model.hf_reference", "kernels.executors.emulated",
             "kernels.executors.torch_exec", "kernels.executors.base", "kernels.mlir_air.executor")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_phase_gates_import_no_pipeline_reference_or_executor_class():
    offenders = {}
    for path in sorted((ROOT / "handlers" / "gates").glob("*.py")):
        bad = sorted(m for m in _imports(path) if m.startswith(FORBIDDEN))
        if bad:
            offenders[path.name] = bad
    assert not offenders, offenders


def test_the_old_flat_kernel_modules_are_gone():
    for old in ("modelconfig", "architecture", "weights", "pipeline", "hf_reference", "smollm2", "prompts", "plan",
                "runner", "gates", "harness"):
        assert not (ROOT / "kernels" / f"{old}.py").exists(), old
    assert not (ROOT / "kernels" / "executors" / "mlir_air.py").exists()
