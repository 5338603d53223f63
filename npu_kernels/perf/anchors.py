"""The measured NPU2 figures the performance model is calibrated on, read from the data files beside it.

`kernel_rows()` -> the registry rows of anchors.toml (kernel, shape, tile, latency_us, src = path:line in
Xilinx/mlir-air); `profile()` -> the Llama-3.2-1B profile figures of profile_llama32_1b.toml, each
`{value, unit, src}`. Both are cached, read-only views; nothing here fits or models anything.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def _load(name: str) -> dict:
    with open(HERE / name, "rb") as f:
        return tomllib.load(f)


def kernel_rows(kernel: str | None = None) -> list[dict]:
    rows = _load("anchors.toml")["row"]
    return [r for r in rows if kernel is None or r["kernel"] == kernel]


def profile() -> dict[str, dict]:
    return _load("profile_llama32_1b.toml")
