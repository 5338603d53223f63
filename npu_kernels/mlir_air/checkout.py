"""What an mlir-air checkout is to the tool: a real one, or the stand-in `ledger twin` writes (its marker file),
and the npu-ledger checkout whose code the stand-in's scripts and a scaffolded model directory call back into."""

from __future__ import annotations

from pathlib import Path

MARKER = ".npu-ledger-twin"  # written at the root of a stand-in checkout (npu_kernels.mlir_air.twin.write_twin)
ROOT = Path(__file__).resolve().parents[2]  # the npu-ledger checkout (the folder holding npu_kernels/)


def is_twin(directory: str | Path | None) -> bool:
    """True when `directory` is a stand-in checkout written by `ledger twin`."""
    return bool(directory) and (Path(directory) / MARKER).is_file()
