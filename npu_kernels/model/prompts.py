"""Prompt sets for the gates.

CANONICAL_PROMPT is the Phase 0 baseline and Phase 2 block-gate prompt (plain text, no chat template).
The token gate (Phases 3, 6, 7) uses `prompts_for(tokenizer_or_folder)`: a model whose tokenizer has a
chat template gets the instruction prompts rendered through that template (with the generation prompt),
any other model the base-model continuations. The default gate runs the first 2, the full gate all 8.
`mlir_air_prompts` reads an mlir-air checkout's own prompt file instead, when MLIR_AIR_DIR has one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from npu_kernels.model.hf_reference import load_tokenizer
from npu_kernels.thresholds import TOKEN_GATE_PROMPTS, TOKEN_GATE_PROMPTS_FULL
from npu_kernels.settings import env_get

CANONICAL_PROMPT = (
    "The history of computing is a story of machines that became smaller, faster and cheaper. "
    "The first electronic computers filled whole rooms, yet today a phone in your pocket"
)

INSTRUCT_PROMPTS = (
    "What is the capital of France? Answer in one sentence.",
    "Write a haiku about a lighthouse in the fog.",
    "Explain in two sentences why the sky looks blue during the day.",
    "List three healthy breakfast ideas.",
    "Translate 'good morning, my friend' into Spanish.",
    "What is 17 multiplied by 3? Show your reasoning briefly.",
    "Give me a short tip for staying focused while studying.",
    "Write a Python function that returns the square of a number.",
)

BASE_PROMPTS = (
    "Once upon a time, in a small village at the edge of a forest, there lived",
    "The three primary colours are red, blue and",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Water boils at a temperature of",
    "The quick brown fox jumps over the lazy dog. The lazy dog",
    "In 1969, the first humans to walk on the Moon were",
    "A recipe for pancakes: mix flour, eggs and milk, then",
    "The most important rule of writing clear code is",
)

DEFAULT_COUNT = TOKEN_GATE_PROMPTS
FULL_COUNT = TOKEN_GATE_PROMPTS_FULL
# mlir-air's verify prompt files (programming_examples/llms/verify/prompts/{instruct,base}.txt @ e972f29)
MLIR_AIR_PROMPTS_DIR = "programming_examples/llms/verify/prompts"


@dataclass(frozen=True)
class Prompt:
    index: int
    text: str  # the prompt as written (before any chat template)
    tokens: list[int]  # what the model is fed
    kind: str  # "instruct" | "base" | "mlir-air"
    # drawn from the full set (the gate's --full prompts): a backend that judges a whole set in one run (mlir-air's
    # `make verify-full` against `make verify`) runs that set's targets for it, whatever else it was asked before
    full: bool = False


def _tokenizer(tokenizer_or_folder: Any):
    if isinstance(tokenizer_or_folder, (str, Path)):
        return load_tokenizer(tokenizer_or_folder)
    return tokenizer_or_folder


def token_ids(encoded: Any) -> list[int]:
    """Token ids from whatever a tokenizer's apply_chat_template / __call__ returned (a list, a BatchEncoding, a
    tensor; a batch of one is unwrapped), as plain ints."""
    if isinstance(encoded, dict) or hasattr(encoded, "keys"):
        encoded = encoded["input_ids"]
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    if encoded and isinstance(encoded[0], list):
        encoded = encoded[0]
    return [int(t) for t in encoded]


def canonical_tokens(tokenizer_or_folder: Any) -> list[int]:
    """The canonical prompt's token ids (plain text, no chat template)."""
    return token_ids(_tokenizer(tokenizer_or_folder)(CANONICAL_PROMPT))


def prompts_for(tokenizer_or_folder: Any, full: bool = False) -> list[Prompt]:
    """The token-gate prompts for a model: instruct set through its chat template, else the base set."""
    tok = _tokenizer(tokenizer_or_folder)
    kind = "instruct" if getattr(tok, "chat_template", None) else "base"
    return [replace(p, full=full) for p in prompt_set(tok, kind, FULL_COUNT if full else DEFAULT_COUNT)]


def prompt_set(tokenizer_or_folder: Any, kind: str, count: int = FULL_COUNT) -> list[Prompt]:
    """The first `count` prompts of one set: "instruct" through the model's chat template (which it must
    have), "base" as raw text. Measurements over both sets of an instruct model use this."""
    tok = _tokenizer(tokenizer_or_folder)
    if kind == "instruct":
        if not getattr(tok, "chat_template", None):
            raise ValueError("the instruct prompts need a tokenizer with a chat template")
        out = []
        for i, text in enumerate(INSTRUCT_PROMPTS[:count]):
            ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                          tokenize=True)
            out.append(Prompt(i, text, token_ids(ids), "instruct"))
        return out
    if kind == "base":
        return [Prompt(i, text, token_ids(tok(text)), "base") for i, text in enumerate(BASE_PROMPTS[:count])]
    raise ValueError(f"unknown prompt set {kind!r}; known: instruct, base")


def mlir_air_prompts(tokenizer, full: bool, mlir_air_dir: str | None = None) -> list[Prompt] | None:
    """mlir-air's verify prompts (instruct.txt, the style its model Makefiles use: they never pass
    --prompt-style) as `Prompt`s, tokenised the way verify_runner.py:75-86 does (raw encode); None when
    MLIR_AIR_DIR holds no prompt files. Read at run time, never copied."""
    root = mlir_air_dir or env_get("MLIR_AIR_DIR")
    path = Path(root) / MLIR_AIR_PROMPTS_DIR / "instruct.txt" if root else None
    if path is None or not path.is_file():
        return None
    lines = [x.strip() for x in path.read_text().splitlines() if x.strip() and not x.strip().startswith("#")]
    count = TOKEN_GATE_PROMPTS_FULL if full else TOKEN_GATE_PROMPTS
    return [Prompt(i, text, [int(t) for t in tokenizer.encode(text)], "mlir-air", full=full)
            for i, text in enumerate(lines[:count])]
