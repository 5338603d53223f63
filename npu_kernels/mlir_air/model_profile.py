"""Parser for what a model directory's `make profile` / `make bench` prints: TTFT, decode speed, context length.

mlir-air's nightly reads these figures with `programming_examples/llms/bench/extract_perf.py`
(e972f29 extract_perf.py:17-75, unchanged since d395847), which accepts every model driver's line format. This
module accepts the same formats, written from the forms that script documents (its comments and patterns), not
from its code. Each metric takes the first format, in the script's order, that appears anywhere in the text:

TTFT (milliseconds)
  1. `warm_ttft`     `Warm time to first token (TTFT): 0.931s`  (a driver that also times a warm prefill; preferred,
                     the cold one carries the one-time weight load)                      -> seconds x 1000
  2. `ttft`          `Time to first token (TTFT): 1.27s` at the start of a line (qwen, llama3b, int4, smollm, q4nx)
                                                                                         -> seconds x 1000
  3. `e2e_prefill`   `End-to-end (prefill, per query)   1270.5 ms` (llama32_1b's profile) -> ms
  4. `action_chunk`  `Action chunk (50 steps): 824.3 ms` (smolvla: no token; its first usable output) -> ms
Decode (tokens per second)
  1. `tok_s`         `... (10.84 tok/s)` (qwen family, llama3b)                          -> as printed
  2. `e2e_token`     `End-to-end (per token)   92.25 ms` (llama32_1b)                    -> 1000 / ms (None at 0 ms)
  3. `tokens_second` `Tokens/second: 16.17` (the int4 driver)                            -> as printed
Context
  `prompt_len=N` / `prompt_len: N` (every driver's `... Inference: prompt_len=N, n_tokens=...`), the first one.

Both metrics are rounded to 2 decimals, as the script publishes them. Where the script leaves a metric null this
parser says None too; it raises `TranscriptError` (one sentence) only when the text holds no TTFT and no decode
line at all, or a number that is not one (`1.2.3`, where the script would crash).

The End-to-end lines are kept on their own (`prefill_ms`, `ms_per_token`) as well: Phases 4-5 on the mlir-air path
judge the prefill without the LM head, which only llama32_1b's End-to-end line states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from npu_kernels.mlir_air.output import TranscriptError

_NUM = r"([\d.]+)"
TTFT_FORMATS: tuple[tuple[str, re.Pattern, float], ...] = (
    ("warm_ttft", re.compile(rf"Warm time to first token \(TTFT\):\s*{_NUM}\s*s"), 1e3),
    ("ttft", re.compile(rf"^\s*Time to first token \(TTFT\):\s*{_NUM}\s*s", re.M), 1e3),
    ("e2e_prefill", re.compile(rf"End-to-end \(prefill, per query\)\s+{_NUM}\s*ms"), 1.0),
    ("action_chunk", re.compile(rf"Action chunk \([^)]*\):\s*{_NUM}\s*ms"), 1.0),
)
DECODE_FORMATS: tuple[tuple[str, re.Pattern], ...] = (
    ("tok_s", re.compile(rf"\({_NUM}\s*tok/s\)")),
    ("e2e_token", re.compile(rf"End-to-end \(per token\)\s+{_NUM}\s*ms")),
    ("tokens_second", re.compile(rf"Tokens/second:\s*{_NUM}")),
)
CONTEXT_FORMAT = re.compile(r"prompt_len[=:]\s*(\d+)")


@dataclass(frozen=True)
class ModelProfile:
    """The figures of one `make profile` / `make bench` transcript, and which format each came from."""

    ttft_ms: float | None
    ttft_format: str | None
    decode_tokens_per_sec: float | None
    decode_format: str | None
    context_len: int | None
    prefill_ms: float | None = None  # the `End-to-end (prefill, per query)` line, when printed
    ms_per_token: float | None = None  # the `End-to-end (per token)` line, when printed

    def as_json(self) -> dict:
        return dict(self.__dict__)


def _number(m: re.Match, text: str) -> float:
    try:
        return float(m.group(1))
    except ValueError:
        raise TranscriptError(f"{m.group(0)!r} holds no number.", text) from None


def parse_model_profile(text: str) -> ModelProfile:
    """See the module docstring."""
    if not text or not text.strip():
        raise TranscriptError("the profile transcript is empty.", text)
    ttft = ttft_fmt = None
    for name, rx, scale in TTFT_FORMATS:
        if m := rx.search(text):
            ttft, ttft_fmt = round(_number(m, text) * scale, 2), name
            break
    tps = tps_fmt = None
    for name, rx in DECODE_FORMATS:
        if m := rx.search(text):
            value = _number(m, text)
            tps_fmt = name
            tps = (round(1e3 / value, 2) if value else None) if name == "e2e_token" else round(value, 2)
            break
    if ttft_fmt is None and tps_fmt is None:
        raise TranscriptError("the text matches none of extract_perf.py's TTFT or decode formats (no `Time to first "
                              "token (TTFT)`, `End-to-end (...)`, `Action chunk`, `(... tok/s)` or `Tokens/second` "
                              "line).", text)
    ctx = CONTEXT_FORMAT.search(text)
    pre = TTFT_FORMATS[2][1].search(text)
    tok = DECODE_FORMATS[1][1].search(text)
    return ModelProfile(ttft_ms=ttft, ttft_format=ttft_fmt, decode_tokens_per_sec=tps, decode_format=tps_fmt,
                        context_len=int(ctx.group(1)) if ctx else None,
                        prefill_ms=_number(pre, text) if pre else None,
                        ms_per_token=_number(tok, text) if tok else None)
