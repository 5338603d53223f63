"""The checks of a config.json value an adapter or a feature reads, each naming the key in one sentence
(moved from npu_kernels.model.families.common, which re-exports them)."""

from __future__ import annotations

import math
from typing import Any


def cut(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def positive_number(value: Any) -> bool:
    """A JSON number (not true/false) that is positive and finite."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value < math.inf


def positive_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def number_problems(raw: dict[str, Any], keys: tuple[str, ...], where: str = "") -> list[str]:
    """Each of `keys` present in `raw` that is not a positive finite number, named (`where` prefixes the key)."""
    return [f"{where}{k} {cut(raw[k])} must be a positive finite number" for k in keys
            if raw.get(k) is not None and not positive_number(raw[k])]


def integer_problems(raw: dict[str, Any], keys: tuple[str, ...], where: str = "") -> list[str]:
    """Each of `keys` present in `raw` that is not a positive JSON integer, named."""
    return [f"{where}{k} {cut(raw[k])} must be a positive integer" for k in keys
            if raw.get(k) is not None and not positive_integer(raw[k])]


def layer_type_problems(raw: dict[str, Any], family: str, kinds: tuple[str, ...]) -> list[str]:
    """`layer_types`, when present: a list of one of `kinds` per layer (`num_hidden_layers` of them), as
    transformers' `PreTrainedConfig.validate_layer_type` requires; the first entry that is not is named."""
    types = raw.get("layer_types")
    if types is None:
        return []
    if not isinstance(types, list):
        return [f"layer_types {cut(types)} is not a list"]
    problems = []
    n = raw.get("num_hidden_layers")
    if positive_integer(n) and len(types) != n:
        problems.append(f"layer_types has {len(types)} entries; num_hidden_layers is {n}")
    bad = next((i for i, t in enumerate(types) if t not in kinds), None)
    if bad is not None:
        problems.append(f"layer_types[{bad}] {cut(types[bad])} is not one of {family}'s layer types "
                        f"({', '.join(kinds)})")
    return problems
