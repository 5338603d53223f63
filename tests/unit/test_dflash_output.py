"""The reader of mlir-air's DFlash `--exactness` output (npu_kernels.mlir_air.dflash): the lines as
dflash_acceptance_device.py prints them at 43e773e (:174-178, :207, :220, :240-245), a speculative stream that
leaves the drafter-off one, and output that is cut short or contradicts itself."""

from __future__ import annotations

import math

import pytest

from npu_kernels.mlir_air.dflash import DflashOutputError, parse_exactness


def _output(sames=(32, 32), blocks=(8, 8), summary_exact=None, cut=False) -> str:
    """An --exactness run's output in the script's print format: a header, one line per prompt, the summary."""
    lines = [f"[acceptance] {len(sames)} prompts, lengths 96..120, 32 tokens each, block 8"]
    for i, (same, b) in enumerate(zip(sames, blocks)):
        lines.append(f"  prompt {i:3d} (len {96 + i:4d}): {b:3d} blocks, {32:3d} tokens, mean {32 / b:.3f}"
                     f"   exact for {same}/32")
    if cut:
        return "\n".join(lines) + "\n"
    exact = sum(s == 32 for s in sames) if summary_exact is None else summary_exact
    lines += ["", f"[acceptance] {sum(blocks)} blocks over {len(sames)} prompts",
              "  accepted-length histogram (tokens committed per verify dispatch):",
              f"     4: {sum(blocks):5d}  100.0%  {'#' * 60}", "",
              "  mean tokens per verify dispatch : 4.000 +/- 0.000  (1 s.e.; a FLOOR -- see the comment above)",
              "  speculative step                : 100.0 ms  (MEASURED here)",
              f"  exactness: {exact}/{len(sames)} prompts reproduce the non-speculative stream"]
    return "\n".join(lines) + "\n"


def test_an_exact_run_is_read_with_its_acceptance_figure():
    r = parse_exactness(_output())
    assert r.passed and r.exact_prompts == 2 and r.blocks == 16
    assert r.acceptance_mean == 4.0 and r.acceptance_sem == 0.0
    assert [(p.index, p.prompt_len, p.same, p.compared) for p in r.prompts] == [(0, 96, 32, 32), (1, 97, 32, 32)]


def test_a_prompt_that_leaves_the_drafter_off_stream_fails_the_verdict():
    r = parse_exactness(_output(sames=(32, 17)))
    assert not r.passed and r.exact_prompts == 1 and r.prompts[1].same == 17


def test_a_nan_standard_error_of_one_block_is_read_as_nan():
    text = _output(sames=(32,), blocks=(1,)).replace("+/- 0.000", "+/- nan")
    assert math.isnan(parse_exactness(text).acceptance_sem)


@pytest.mark.parametrize("text, match", [
    (_output(cut=True), "without its blocks, mean tokens per verify dispatch, exactness summary"),
    (_output(summary_exact=2, sames=(32, 5)), "summary says 2/2 prompts exact, the prompt lines 1"),
    (_output().replace("   exact for 32/32", ""), "not --exactness"),
    ("", "no per-prompt line"),
])
def test_output_cut_short_or_contradicting_itself_is_refused_in_one_line(text, match):
    with pytest.raises(DflashOutputError, match=match) as e:
        parse_exactness(text)
    assert "\n" not in str(e.value)
