"""Every TTFT and decode format mlir-air's nightly reads (issue #25 item 3): a transcript written in each format
parses to the TTFT / tokens-per-second that `programming_examples/llms/bench/extract_perf.py` extracts
(e972f29 extract_perf.py:17-75: its patterns, precedence and 2-decimal rounding). The transcripts are ours, in the
forms the script's comments document; each expected number is worked out by hand from the printed one."""

import pytest

from npu_kernels.mlir_air.contract import contract_checks
from npu_kernels.mlir_air.model_profile import CONTEXT_FORMAT, DECODE_FORMATS, TTFT_FORMATS, parse_model_profile
from npu_kernels.mlir_air.output import TranscriptError

PROMPT = "LLAMA Inference: prompt_len=2048, n_tokens=32\n"


@pytest.mark.parametrize("fmt, line, ttft_ms", [
    ("warm_ttft", "Warm time to first token (TTFT): 0.9314s (weights resident)", 931.4),
    ("ttft", "Time to first token (TTFT): 1.87s. First token: 12366", 1870.0),
    ("ttft", "   Time to first token (TTFT): 0.12345s", 123.45),  # indented; 123.45 ms after rounding to 2 places
    ("e2e_prefill", "  End-to-end (prefill, per query)               1270.4567 ms  prompt_len=2048", 1270.46),
    ("action_chunk", "Action chunk (50 x 32 actions): 824.3 ms", 824.3),
])
def test_each_ttft_format_gives_the_scripts_ttft(fmt, line, ttft_ms):
    p = parse_model_profile(PROMPT + line + "\n")
    assert (p.ttft_format, p.ttft_ms) == (fmt, ttft_ms)
    assert p.context_len == 2048


@pytest.mark.parametrize("fmt, line, tps", [
    ("tok_s", "Decode: 32 tokens in 2.952s (10.84 tok/s)", 10.84),
    ("e2e_token", "  End-to-end (per token)                          92.2500 ms  ctx=128", 10.84),  # 1000/92.25
    ("tokens_second", "Tokens/second: 16.1749", 16.17),
])
def test_each_decode_format_gives_the_scripts_tokens_per_second(fmt, line, tps):
    p = parse_model_profile(PROMPT + line + "\n")
    assert (p.decode_format, p.decode_tokens_per_sec) == (fmt, tps)


def test_the_formats_take_the_scripts_precedence():
    """A driver printing several lines: warm TTFT over cold, cold over End-to-end; tok/s over End-to-end over
    Tokens/second (extract_perf.py:43-70), and the End-to-end figures are kept on their own."""
    text = (PROMPT + "Time to first token (TTFT): 2.50s\nWarm time to first token (TTFT): 0.95s\n"
            "  End-to-end (prefill, per query)  940.0 ms\nTokens/second: 9.00\n  End-to-end (per token)  100.0 ms\n"
            "Generated 31 tokens (11.11 tok/s)\n")
    p = parse_model_profile(text)
    assert (p.ttft_format, p.ttft_ms, p.decode_format, p.decode_tokens_per_sec) == ("warm_ttft", 950.0, "tok_s", 11.11)
    assert (p.prefill_ms, p.ms_per_token) == (940.0, 100.0)
    cold = parse_model_profile(text.replace("Warm time to first token (TTFT): 0.95s\n", ""))
    assert (cold.ttft_format, cold.ttft_ms) == ("ttft", 2500.0)
    # "Warm time ..." is not the cold format: that one must start its line
    only_warm = parse_model_profile("Warm time to first token (TTFT): 0.5s\n")
    assert (only_warm.ttft_format, only_warm.decode_format, only_warm.decode_tokens_per_sec) == ("warm_ttft", None, None)


def test_a_zero_ms_token_leaves_decode_unknown_as_the_script_does():
    p = parse_model_profile("  End-to-end (prefill, per query)  10.0 ms\n  End-to-end (per token)  0 ms\n")
    assert (p.decode_format, p.decode_tokens_per_sec, p.ttft_ms, p.context_len) == ("e2e_token", None, 10.0, None)


@pytest.mark.parametrize("text", ["", "Compilation passed.\nPASS!\n", "Time to first token (TTFT): 1.2.3s\n"])
def test_text_without_a_figure_is_one_clear_error(text):
    with pytest.raises(TranscriptError) as e:
        parse_model_profile(text)
    assert "\n" not in str(e.value).strip()


def test_every_format_parsed_is_one_the_contract_pins():
    """The contract's extract_perf.py entry (contract.toml, what `ledger doctor` looks for upstream) names each
    pattern this parser uses: a format dropped upstream shows up as a doctor difference, not a silent null."""
    [check] = [c for c in contract_checks() if c.file.endswith("bench/extract_perf.py")]
    patterns = ([rx.pattern for _, rx, _ in TTFT_FORMATS] + [rx.pattern for _, rx in DECODE_FORMATS]
                + [CONTEXT_FORMAT.pattern])
    assert len(patterns) == 8 == len(check.items)
    for pattern in patterns:
        assert [i for i in check.items if i in pattern], pattern
