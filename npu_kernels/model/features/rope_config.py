"""The RoPE parameters of a raw config.json, as transformers 4 and 5 spell them: the readers every family's adapter and
the partial-rotary / LongRoPE feature share (here, below both, so that neither imports the other)."""

from __future__ import annotations

from typing import Any


def rope_params(raw: dict[str, Any], layer_type: str | None = None) -> dict[str, Any]:
    """The RoPE parameter group: `rope_parameters` (per layer type when keyed by one), else `rope_scaling`."""
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and layer_type and isinstance(params.get(layer_type), dict):
        return params[layer_type]
    if isinstance(params, dict) and ("rope_type" in params or "rope_theta" in params):
        return params
    scaling = raw.get("rope_scaling")
    return scaling if isinstance(scaling, dict) else {}


def rope_theta(raw: dict[str, Any], layer_type: str | None = None, default: float = 10000.0) -> float:
    """rope_theta of a layer type (transformers 5: under rope_parameters[layer_type]), else the top-level one
    (transformers 4), else under rope_parameters."""
    params = rope_params(raw, layer_type)
    if layer_type and params.get("rope_theta") is not None:
        return float(params["rope_theta"])
    if raw.get("rope_theta") is not None:
        return float(raw["rope_theta"])
    if params.get("rope_theta") is not None:
        return float(params["rope_theta"])
    return default


def rope_scaling(raw: dict[str, Any], layer_type: str | None = None) -> dict[str, Any] | None:
    """The RoPE scaling parameters (None for plain RoPE), from `rope_scaling` or `rope_parameters`."""
    groups = [rope_params(raw, layer_type)] if layer_type else [raw.get("rope_scaling"), raw.get("rope_parameters")]
    for params in groups:
        if isinstance(params, dict) and (params.get("rope_type") or params.get("type", "default")) != "default":
            out = dict(params)
            out["rope_type"] = out.get("rope_type") or out.get("type")
            return out
    return None


def rope_type(raw: dict[str, Any]) -> str:
    for key in ("rope_scaling", "rope_parameters"):
        params = raw.get(key)
        if isinstance(params, dict):
            rtype = params.get("rope_type") or params.get("type")
            if rtype:
                return str(rtype)
    return "default"
