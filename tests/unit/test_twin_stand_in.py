"""The stand-in model script reads the prompt's token ids with the `tokenizers` library (no transformers import);
they must be the ids the model's AutoTokenizer gives (what mlir-air's inference scripts encode with)."""

from __future__ import annotations

import pytest

from npu_kernels.mlir_air.twin.stand_in import encode_prompt
from npu_kernels.model.hf_reference import load_tokenizer

PROMPTS = ("The history of computing is a story of machines that became smaller, faster and cheaper.",
           "What is the capital of France?", "  leading spaces, tabs\tand a newline\n", "naïve café — 東京 🚀", "")


@pytest.mark.parametrize("which", ["tiny_llama", "smollm2_dir"])
def test_the_stand_ins_prompt_ids_are_the_autotokenizers(which, request):
    folder = request.getfixturevalue(which)
    tok = load_tokenizer(folder)
    for text in PROMPTS:
        assert encode_prompt(str(folder), text) == list(tok.encode(text)), text


@pytest.mark.parametrize("which", ["tiny_llama", "smollm2_dir"])
def test_the_stand_ins_tokenizer_decodes_as_the_autotokenizer(which, request):
    """The twin's verify runner writes decoded text into mlir-air's report fields (`*_text_at_div`,
    `agreed_prefix_text`): the same strings AutoTokenizer's decode gives, special tokens and byte pieces included."""
    import numpy as np

    from npu_kernels.mlir_air.twin.stand_in import FastTokenizer, stand_in_tokenizer

    folder = request.getfixturevalue(which)
    tok, fast = load_tokenizer(folder), stand_in_tokenizer(folder)
    assert isinstance(fast, FastTokenizer)  # both test models are BPE with a tokenizer.json
    rng = np.random.default_rng(7)
    sequences = [list(tok.encode(text)) for text in PROMPTS] + [[0], list(range(40))]
    sequences += [rng.integers(0, tok.vocab_size, size=n).tolist() for n in (1, 2, 5, 17, 64) for _ in range(4)]
    for ids in sequences:
        assert fast.decode(ids) == tok.decode(ids), ids
