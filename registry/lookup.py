"""Registry lookups that raise on what was never measured — no silent fallback to a guessed config.

`gemm_config(M, K, N, output_dtype, precision, registry_dir)` has the contract of mlir-air's
`kernel_registry/registry_lookup.gemm_config`: it reads the projected GEMM JSON and returns
`{"method", "tile", "gflops", "mean_rel_L1"}` (+ `"herd"` when the method overrides the full-chip herd);
`ValueError` for an unknown output dtype; `KeyError` for an unmeasured shape or a tier without a
hardware-measured best, naming what exists and the command that adds it. Unlike upstream it does not cache
the files (a rebuild is picked up at once).

`kernel_rows(kernel, events_or_data, **shape)` answers for every kernel from the fold: the `ShapeRow`s
whose shape matches all given dimensions (any spelling the catalog knows, e.g. `head_dim` for RoPE's
`D`), in registry order; `KeyError` when the kernel is unknown or nothing matches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ledger.record import RecordedEvent
from registry.catalog import CATALOG, canonical_kernel, shape_key, specs_for_kernel
from registry.fold import RegistryData, ShapeRow, fold_registry
from registry.render_json import GEMM_JSON
from registry.text import shape_args

DEFAULT_REGISTRY_DIR = Path("kernel_registry") / "details"
_CONTRACT = {("f32", "high"): "f32-out", ("bf16", "high"): "bf16-out-high", ("bf16", "low"): "bf16-out-low"}


def _load(output_dtype: str, registry_dir: str | Path | None, caller: str) -> tuple[dict, str]:
    if output_dtype not in GEMM_JSON:
        raise ValueError(f"{caller}: output_dtype must be one of {sorted(GEMM_JSON)}, got {output_dtype!r}")
    directory = Path(registry_dir) if registry_dir is not None else DEFAULT_REGISTRY_DIR
    path = directory / GEMM_JSON[output_dtype]
    if not path.exists():
        raise FileNotFoundError(
            f"registry JSON not found: {path} — build the projections first (`ledger registry build`)"
        )
    return json.loads(path.read_text(encoding="utf-8")), GEMM_JSON[output_dtype]


def _measure_hint(M: int, K: int, N: int, output_dtype: str, precision: str) -> str:
    contract = _CONTRACT.get((output_dtype, precision), f"{output_dtype}-out-{precision}")
    return (
        f"Measure it on NPU2: `ledger kernel run gemm --shape M={M},K={K},N={N} --contract {contract} "
        f"--executor mlir-air`, then `ledger registry build` (or `ledger registry import DIR` for an mlir-air "
        f"registry file that has it)."
    )


def _find(data: dict, M: int, K: int, N: int) -> dict | None:
    for s in data["shapes"]:
        if (s["M"], s["K"], s["N"]) == (M, K, N):
            return s
    return None


def _answer(method: str, m: dict) -> dict[str, Any]:
    out = {"method": method, "tile": dict(m["tile"]), "gflops": m["gflops"], "mean_rel_L1": m["mean_rel_L1"]}
    if "herd" in m:
        out["herd"] = list(m["herd"])
    return out


def gemm_config(
    M: int, K: int, N: int, output_dtype: str = "bf16", precision: str = "high",
    registry_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Best hardware-measured GEMM config for one shape and contract (see module docstring)."""
    data, filename = _load(output_dtype, registry_dir, "gemm_config")
    s = _find(data, M, K, N)
    if s is None:
        raise KeyError(
            f"gemm_config: shape {M}x{K}x{N} (out={output_dtype}) not in registry {filename}. "
            f"Measured shapes: {[(x['M'], x['K'], x['N']) for x in data['shapes']]}. "
            + _measure_hint(M, K, N, output_dtype, precision)
        )
    best = s.get("best", {})
    if precision not in best:
        methods = {name: m.get("tier") for name, m in sorted(s["methods"].items())}
        raise KeyError(
            f"gemm_config: shape {M}x{K}x{N} (out={output_dtype}) has no '{precision}'-precision best in "
            f"{filename} (available: {sorted(best)}; methods recorded, with tier: {methods} — "
            f"'emulated'/'torch' methods were not measured on NPU2 and are never best). "
            + _measure_hint(M, K, N, output_dtype, precision)
        )
    method = best[precision]
    return _answer(method, s["methods"][method])


def gemm_config_method(
    M: int, K: int, N: int, output_dtype: str, method: str, precision: str = "high",
    registry_dir: str | Path | None = None,
) -> dict[str, Any]:
    """A specific method's recorded config (not the best); KeyError when the shape or method is absent."""
    data, filename = _load(output_dtype, registry_dir, "gemm_config_method")
    s = _find(data, M, K, N)
    if s is None:
        raise KeyError(
            f"gemm_config_method: shape {M}x{K}x{N} (out={output_dtype}) not in registry {filename}. "
            + _measure_hint(M, K, N, output_dtype, precision)
        )
    if method not in s["methods"]:
        raise KeyError(
            f"gemm_config_method: shape {M}x{K}x{N} (out={output_dtype}) has no method '{method}' in "
            f"{filename} (available: {sorted(s['methods'])})."
        )
    return _answer(method, s["methods"][method])


def kernel_rows(kernel: str, source: Sequence[RecordedEvent] | RegistryData, /, **shape: Any) -> list[ShapeRow]:
    """Registry rows of `kernel` whose shape matches every given dimension; KeyError when none do."""
    data = source if isinstance(source, RegistryData) else fold_registry(source)
    specs = specs_for_kernel(kernel)
    if not specs:
        name = canonical_kernel(kernel)
        specs = tuple(p.spec for p in data.pages if p.spec.kernel == name)
    if not specs:
        known = sorted({spec.kernel for spec in CATALOG} | {p.spec.kernel for p in data.pages})
        raise KeyError(f"kernel_rows: unknown kernel {kernel!r}; known kernels: {known}")
    rows: list[ShapeRow] = []
    measured: list[str] = []
    for spec in specs:
        wanted = shape_key(spec, shape)
        page = data.page(spec.key)
        for row in page.rows:
            measured.append(shape_args(row.shape))
            have = dict(row.shape)
            if all(k in have and have[k] == v for k, v in wanted):
                rows.append(row)
    if not rows:
        spec = specs[0]
        wanted = shape_key(spec, shape)
        raise KeyError(
            f"kernel_rows: no {spec.kernel} row with {shape_args(wanted) or 'any shape'} in the ledger. "
            f"Measured shapes: {measured or 'none'}. Measure it: `ledger kernel run {spec.kernel} --shape "
            f"{shape_args(wanted) or '...'} --contract {spec.default_contract}` (add `--executor mlir-air` "
            f"on an NPU2 machine), then `ledger registry build`."
        )
    return rows


__all__ = ["gemm_config", "gemm_config_method", "kernel_rows", "DEFAULT_REGISTRY_DIR"]
