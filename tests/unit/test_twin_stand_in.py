"""The stand-in model script reads the prompt's token ids with the `tokenizers` library (no transformers import);
they must be the ids the model's AutoTokenizer gives (what mlir-air's inference scripts encode with)."""

from __future__ import annotations

import pytest

from kernels.mlir_air.twin.stand_in import encode_prompt
from kernels.model.hf_reference import load_tokenizer

PROMPTS = ("The history of computing is a story of machines that became smaller, faster and cheaper.",
           "What is the capital of France?", "  leading spaces, tabs\tand a newline\n", "naïve café — 東京 🚀", "")


@pytest.mark.parametrize("which", ["tiny_llama", "smollm2_dir"])
def test_the_stand_ins_prompt_ids_are_the_autotokenizers(which, request):
    folder = request.getfixturevalue(which)
    tok = load_tokenizer(folder)
    for text in PROMPTS:
        assert encode_prompt(str(folder), text) == list(tok.encode(text)), text
