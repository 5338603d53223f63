"""mlir-air's published end-to-end bf16 figures beside `ledger predict`'s modelled ones (readme_bf16.toml:
programming_examples/llms/README.md's performance table, with its citation per row). A row is set beside a
prediction when its architecture is the predicted model's (layers, widths, heads, vocabulary), named as mlir-air's
(provenance imported:mlir-air-readme) and never fitted to; the differences are printed only at the README's
prefill length (seq_len=2048), the one it measured at."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

from npu_kernels.model.config import ModelConfig

HERE = Path(__file__).resolve().parent
README_SEQ = 2048  # "Performance (NPU2, seq_len=2048, bf16)"
_KEYS = ("n_layers", "emb_dim", "n_heads", "n_kv_heads", "head_dim", "hidden_dim", "vocab_size")


@functools.lru_cache(maxsize=1)
def readme_rows() -> tuple[dict, ...]:
    with open(HERE / "readme_bf16.toml", "rb") as f:
        return tuple(tomllib.load(f)["model"])


def matching_readme_row(c: ModelConfig) -> dict | None:
    """The README row whose architecture is `c`'s, if any."""
    return next((r for r in readme_rows() if all(getattr(c, k) == r["config"][k] for k in _KEYS)), None)


def readme_lines(c: ModelConfig, ttft_s: float, decode_tokens_per_s: float, seq: int) -> list[str]:
    """The line `predict` prints under its modelled figures: mlir-air's published figure, and the difference when
    the prediction is at the README's prefill length."""
    row = matching_readme_row(c)
    if row is None:
        return []
    what = ("the calibration model (its profile.md is fitted, not this row)" if row["role"] == "calibration-model"
            else "held out, not fitted")
    if seq == README_SEQ:
        vs = (f" - modelled TTFT {ttft_s:.3f} s ({ttft_s / row['ttft_s'] - 1:+.0%}), {decode_tokens_per_s:.1f} tok/s "
              f"({decode_tokens_per_s / row['decode_tok_s'] - 1:+.0%})")
    else:
        vs = f" - at seq_len {README_SEQ}, not compared with this prediction at --seq {seq}"
    return [f"published by mlir-air (imported:mlir-air-readme, {row['src']}; {what}): TTFT {row['ttft_s']:.2f} s, "
            f"{row['decode_tok_s']:.1f} tok/s, ELF/layer {row['elf_per_layer']}{vs}; conditions: {row['conditions']}"]
