"""Sliding-window attention: a layer whose query attends to itself and the window-1 positions before it, as
transformers' sliding mask does. Everything the tool knows about the window is here:

  config keys     `sliding_window` (the width), `sliding_window_pattern` (every n-th layer global, when
                  `layer_types` is absent), `layer_types` ("sliding_attention" / "full_attention"),
                  `use_sliding_window` (Qwen2's switch);
  validation      the width and the pattern positive integers (`malformed`), a describing family's window a
                  positive integer (`problems`);
  refusal         a family that does not describe windows refuses one in one line (`refused`, and the
                  per-family wordings `refused_when_set` / `refused_when_enabled` / `refused_inside`);
  description     `layer_kinds(raw)` gives each layer's kind; the adapter puts the window on the sliding layers
                  (`Layer.window`);
  reference       the attention calls take `window=` on a windowed layer (`attention_kwargs`); the host decode
                  attention keeps the last `window` positions (npu_kernels.model.host_ops.host_decode_attention);
  plan            one flash-attention row per distinct window (`attention_rows`);
  perf            the attention launch's label (`dispatch_label`): the same kernel with the window mask,
                  costed as causal (mlir-air gemma3_4b_q4nx/README.md:83-86 at e972f29);
  drill           `window_ignored` (npu_kernels.model.faults).

mlir-air (e972f29): gemma3_4b_q4nx_weights.py:63-69 `is_global_layer` ((i+1) % 6 == 0), attn_npu2.cc:730-741
`apply_window_mask` (q - window < kv <= q), README.md:206-211 "Attention alternates"."""

from __future__ import annotations

from typing import Any

from npu_kernels.model.features import Feature
from npu_kernels.model.features.checks import integer_problems, positive_integer

KEYS = ("sliding_window", "sliding_window_pattern", "layer_types", "use_sliding_window")
SLIDING_KIND, FULL_KIND = "sliding_attention", "full_attention"  # transformers' layer_types entries
DEFAULT_PATTERN = 6  # gemma3_4b_q4nx_weights.py:63-69: every sixth layer global


def layer_kinds(raw: dict[str, Any]) -> list[str]:
    """Each layer's kind: `layer_types` when it lists one per layer, else every `sliding_window_pattern`-th layer
    full attention and the others sliding."""
    n = int(raw["num_hidden_layers"])
    types = raw.get("layer_types")
    if isinstance(types, list) and len(types) == n:
        return [str(t) for t in types]
    pattern = int(raw.get("sliding_window_pattern") or DEFAULT_PATTERN)
    return [FULL_KIND if (i + 1) % pattern == 0 else SLIDING_KIND for i in range(n)]


def width(raw: dict[str, Any]) -> int:
    return int(raw["sliding_window"])


def malformed(raw: dict[str, Any]) -> list[str]:
    """The width and the pattern that stands for layer_types when it is absent: positive integers (the pattern is
    a modulus)."""
    return integer_problems(raw, ("sliding_window", "sliding_window_pattern"))


def problems(raw: dict[str, Any], arch: str) -> list[str]:
    """A family that describes windows needs one."""
    window = raw.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return [f"{arch} has no positive integer sliding_window."]
    return []


def refused(raw: dict[str, Any], arch: str, family: str) -> list[str]:
    """What any family that does not describe windows refuses: a switched-on window or a sliding layer type."""
    if raw.get("use_sliding_window") is True or SLIDING_KIND in (raw.get("layer_types") or []):
        return [f"{arch} uses sliding-window attention (sliding_window={raw.get('sliding_window')}); "
                f"the {family} adapter describes full causal attention only."]
    return []


def refused_when_set(raw: dict[str, Any], arch: str) -> list[str]:
    """Mistral's config enables its window whenever it sets one."""
    if raw.get("sliding_window") is not None:
        return [f"{arch} uses sliding-window attention (sliding_window={raw.get('sliding_window')}); the "
                "window is a mask only the Gemma3 adapter describes so far."]
    return []


def refused_when_enabled(raw: dict[str, Any], arch: str) -> list[str]:
    """Qwen2's config sets a width but uses it only under use_sliding_window."""
    if raw.get("use_sliding_window") is True:
        return [f"{arch} uses sliding-window attention (use_sliding_window=true); the window is a mask only "
                "the Gemma3 adapter describes so far."]
    return []


def refused_inside(raw: dict[str, Any], arch: str, positions: int | None, adapter: str) -> list[str]:
    """A window narrower than the positions the model runs (Phi-3's 2047 of 4096; one as wide is no window)."""
    window = raw.get("sliding_window")
    if positive_integer(window) and window < (positions or raw.get("max_position_embeddings") or 0):
        return [f"{arch} uses a {window}-position sliding window inside the positions it runs; "
                f"the {adapter} adapter describes full causal attention only."]
    return []


def attention_kwargs(arch, layer: int) -> dict:
    """A sliding-window layer's window, as the attention calls take it (nothing for full causal attention)."""
    window = arch.layers[layer].window
    return {"window": window} if window else {}


def attention_rows(c, seq: int, row) -> list:
    """One flash-attention row per distinct mixer: full causal, and each sliding window (the same kernel with the
    window mask; the row names the window and how many layers run it). `row` builds a plan row."""
    D, H, Hkv = c.head_dim, c.n_heads, c.n_kv_heads
    out = []
    for window in sorted({x.window or 0 for x in c.arch.layers}):
        n = sum(1 for x in c.arch.layers if (x.window or 0) == window)
        shape = {"lq": seq, "lk": seq, "dk": D, "dv": D, "heads_q": H, "heads_kv": Hkv, "causal": True}
        name = "attention" if not c.arch.windowed() else \
            (f"attention (sliding window {window}, {n} layers)" if window else f"attention (global, {n} layers)")
        out.append(row("flash_attention", {**shape, "window": window} if window else shape, "prefill", [name], ""))
    return out


def dispatch_label(c) -> str | None:
    """A windowed model's attention launch: the same kernel with the window mask on the local layers, which still
    streams every out-of-window K block (gemma3_4b_q4nx/README.md:83-86 at e972f29), costed as causal. None for a
    model without windows."""
    windows = [x.window for x in c.arch.layers if x.window]
    if not windows:
        return None
    return f"attention (window {windows[0]} on {len(windows)} of {c.n_layers} layers: flash_attn_local)"


FEATURE = Feature("sliding_window", KEYS, malformed=malformed, present=lambda arch: arch.windowed(),
                  faults={"window_ignored": "a sliding-window layer attends to every earlier position (the window mask "
                                            "left out)"})
