"""Upper bounds on a config's sizes, checked at `ledger init` before anything is recorded.

A config.json is user input: 1e5 layers would put a 40 MB resolved config into the immutable ledger, 1e6 runs
out of memory building it. Each size is bounded by 4x the largest value among the largest published models in
scope (the bound says which). 4x leaves room for a wider or deeper model of the same families (the NPU2 memory
fit and the kernel plans judge those on their merits later) while refusing what no model in scope can be.

The reference values are the published config.json of each model (Hugging Face, the `text_config` where the
model nests one): Llama-3.1-8B (32 layers, hidden 4096, intermediate 14336, 32 heads, vocab 128256,
131072 positions), Qwen3-4B (36 layers, head_dim 128), Gemma3-4B (vocab 262208, head_dim 256) and Phi-4-mini
(vocab 200064). Imports nothing of the product.
"""

from __future__ import annotations

from typing import Any, Mapping

HEADROOM = 4
# field -> (the largest published value among the models in scope, the model that has it)
LARGEST: dict[str, tuple[int, str]] = {
    "num_hidden_layers": (36, "Qwen3-4B"),
    "hidden_size": (4096, "Llama-3.1-8B"),
    "intermediate_size": (14336, "Llama-3.1-8B"),
    "num_attention_heads": (32, "Llama-3.1-8B"),
    "num_key_value_heads": (32, "Llama-3.1-8B"),  # its num_attention_heads: a kv count never exceeds it
    "head_dim": (256, "Gemma3-4B"),
    "vocab_size": (262208, "Gemma3-4B"),
    "max_position_embeddings": (131072, "Llama-3.1-8B"),
}
BOUNDS: dict[str, int] = {f: HEADROOM * v for f, (v, _) in LARGEST.items()}
# the same sizes under other families' names (GPT-2 style, T5 style)
ALIASES: dict[str, str] = {
    "n_layer": "num_hidden_layers", "num_layers": "num_hidden_layers", "n_embd": "hidden_size",
    "d_model": "hidden_size", "n_inner": "intermediate_size", "d_ff": "intermediate_size",
    "n_head": "num_attention_heads", "n_positions": "max_position_embeddings",
}


def size_problem(raw: Mapping[str, Any]) -> str | None:
    """Why the config's sizes cannot be a model in scope (one line naming the field, the bound and the model
    it derives from), or None. Looks at the integers at the top level and in a nested `text_config`."""
    for where, cfg in (("", raw), ("text_config.", raw.get("text_config"))):
        if not isinstance(cfg, Mapping):
            continue
        for key, value in cfg.items():
            field = ALIASES.get(key, key)
            if field not in BOUNDS or isinstance(value, bool) or not isinstance(value, int):
                continue  # a float or text is refused as "not an integer" when the config is resolved
            if value > BOUNDS[field]:
                largest, model = LARGEST[field]
                return (f"config {where}{key} = {value} is over the bound {BOUNDS[field]} ({HEADROOM}x {model}'s "
                        f"{largest}, the largest in scope); refused, nothing was recorded")
    return None
