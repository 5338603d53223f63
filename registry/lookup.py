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

`PlanningRegistry(events, mlir_air_dir)` is what the planner asks (npu_kernels.model.plan.MeasuredRows): the best
measured row of an exact shape, from the ledger's registry (the GEMM JSON document `registry build`
projects, answered by the same `gemm_answer` as `gemm_config`) and from `$MLIR_AIR_DIR`'s
programming_examples/kernel_registry/details/ JSON when set (the fastest of the two; the ledger on ties),
each answer citing where it was measured; and the methods a shape records only failing. Hardware and
imported rows only: an emulated row is a CPU figure and never chooses an NPU tile.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from npu_kernels.model.plan import MeasuredChoice, contract_method_tier, planned_contract
from ledger.record import RecordedEvent
from npu_kernels.numerics.kernels import piece
from registry.catalog import BEST_CONFIG_KERNEL, CATALOG, canonical_kernel, shape_key, specs_for_kernel
from registry.fold import HARDWARE, RegistryData, ShapeRow, fold_registry, pick_best
from registry.render_json import GEMM_JSON, GEMM_PAGES, gemm_document
from registry.text import shape_args

DEFAULT_REGISTRY_DIR = Path("kernel_registry") / "details"
MLIR_AIR_REGISTRY_DIR = Path("programming_examples") / "kernel_registry" / "details"  # in an mlir-air checkout
_CONTRACT = {("f32", "high"): "f32-out", ("bf16", "high"): "bf16-out-high", ("bf16", "low"): "bf16-out-low"}
CONTRACTS = {contract: dtype_tier for dtype_tier, contract in _CONTRACT.items()}  # contract -> (output dtype, tier)


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
    return gemm_answer(data, filename, M, K, N, output_dtype, precision)


def gemm_answer(data: dict, filename: str, M: int, K: int, N: int, output_dtype: str = "bf16",
                precision: str = "high") -> dict[str, Any]:
    """`gemm_config`'s answer from a GEMM JSON document already read (a file, or the ledger's projection)."""
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


def planned_tiers(M: int, K: int, N: int) -> tuple[str, str]:
    """The precision tiers `ledger plan` asks the registry for a GEMM shape, in its order (npu_kernels.model.plan): the
    planned contract's tier (bf16-out-low below K = GEMM_HIGH_PRECISION_MIN_K, else high), then the other."""
    shape = {"M": M, "K": K, "N": N}
    tier = contract_method_tier(BEST_CONFIG_KERNEL, planned_contract(BEST_CONFIG_KERNEL, shape), {})[1]
    return (tier, "high" if tier == "low" else "low")


def gemm_config_planned(M: int, K: int, N: int, output_dtype: str = "bf16",
                        registry_dir: str | Path | None = None) -> dict[str, Any]:
    """`gemm_config` on the tier the plan takes for this shape (`planned_tiers`: the planned tier's measured best,
    else the other tier's), with the tier answered in `precision`: `registry lookup gemm M K N` without
    `--precision` and `ledger plan` agree. An unmeasured shape raises as `gemm_config` does, its hint naming the
    planned tier's contract (mlir-air's registry_lookup.gemm_config has no answer there either: it refuses to
    guess, registry_lookup.py:88-94 @ e972f29)."""
    if output_dtype != "bf16":  # the f32 page has one tier
        return {**gemm_config(M, K, N, output_dtype, "high", registry_dir), "precision": "high"}
    first, other = planned_tiers(M, K, N)
    try:
        return {**gemm_config(M, K, N, output_dtype, first, registry_dir), "precision": first}
    except KeyError as e:
        if " not in registry " in e.args[0]:
            raise
        try:
            return {**gemm_config(M, K, N, output_dtype, other, registry_dir), "precision": other}
        except KeyError:
            raise e from None


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


class PlanningRegistry:
    """The planner's registry (see the module docstring). `upto_seq`: the ledger as it stood at that seq."""

    def __init__(self, events: Iterable[RecordedEvent] = (), mlir_air_dir: str | Path | None = None,
                 upto_seq: int | None = None) -> None:
        kept = [e for e in events if upto_seq is None or e.seq <= upto_seq]
        self.data = fold_registry(kept)
        self.ledger_seq = max((e.seq for e in kept), default=0) if upto_seq is None else upto_seq
        self.documents: list[tuple[str, dict]] = [("ledger", gemm_document(self.data, "bf16"))]
        self.files: dict[str, str] = {}  # path -> sha256 of the mlir-air registry file read
        if mlir_air_dir:
            path = Path(mlir_air_dir) / MLIR_AIR_REGISTRY_DIR / GEMM_JSON["bf16"]
            if path.is_file():
                raw = path.read_bytes()
                self.files[str(path)] = hashlib.sha256(raw).hexdigest()
                self.documents.append((str(path), json.loads(raw)))

    def record(self) -> dict[str, Any]:
        """What a plan records of the registry it was made from (PhaseStarted.plan_sources)."""
        return {"ledger_seq": self.ledger_seq, "files": dict(self.files)}

    def _ledger_seq_of(self, M: int, K: int, N: int, method: str, tier: str) -> int | None:
        page = self.data.page(GEMM_PAGES["bf16"])
        for row in page.rows:
            if dict(row.shape) == {"M": M, "K": K, "N": N}:
                best = pick_best(m for m in row.measurements if m.on_hardware and m.method == method and m.tier == tier)
                return best.seq if best else None
        return None

    def best(self, kernel: str, shape: dict[str, Any], tier: str) -> MeasuredChoice | None:
        if not piece(kernel, "best_config"):  # the ledger's rows; GEMM's best from the JSON
            return self._best_row(kernel, shape)
        M, K, N = (int(shape[k]) for k in ("M", "K", "N"))
        found: list[tuple[float, int, MeasuredChoice]] = []
        for i, (where, doc) in enumerate(self.documents):
            try:
                answer = gemm_answer(doc, GEMM_JSON["bf16"], M, K, N, "bf16", tier)
            except KeyError:
                continue
            if where == "ledger":
                seq = self._ledger_seq_of(M, K, N, answer["method"], tier)
                origin = f"ledger seq {seq}" if seq is not None else "ledger"
            else:
                origin = f"{where} (sha256 {self.files[where][:12]})"
            cite = (f"{origin}: {M}x{K}x{N} best.{tier} {answer['method']} {answer['gflops']} GFLOP/s "
                    "(measured NPU2)")
            herd = tuple(answer["herd"]) if "herd" in answer else None
            found.append((float(answer["gflops"] or 0), -i,
                          MeasuredChoice(answer["tile"], cite, answer["method"], tier, herd)))
        return max(found, key=lambda f: (f[0], f[1]))[2] if found else None

    def _best_row(self, kernel: str, shape: dict[str, Any]) -> MeasuredChoice | None:
        try:
            rows = kernel_rows(kernel, self.data, **shape)
        except KeyError:
            return None
        for row in rows:
            b = row.best
            if dict(row.shape) == dict(shape_key(row.spec, shape)) and b is not None and b.evidence in HARDWARE:
                cite = (f"ledger seq {b.seq}: {row.spec.kernel} {shape_args(row.shape)} best {b.method} "
                        f"({b.evidence}, measured NPU2)")
                return MeasuredChoice(dict(b.tile), cite, herd=tuple(b.herd) if b.herd else None)
        return None

    def failed_methods(self, kernel: str, shape: dict[str, Any]) -> dict[str, str]:
        """method -> "ledger seq N: ..." for each method whose every hardware/imported row of this exact shape
        FAILs or carries a caveat (⚠️); empty for an unseen shape."""
        try:
            rows = kernel_rows(kernel, self.data, **shape)
        except KeyError:
            return {}
        out: dict[str, str] = {}
        for row in rows:
            if dict(row.shape) != dict(shape_key(row.spec, shape)):
                continue
            by_method: dict[str, list] = {}
            for m in row.measurements:
                if m.evidence in HARDWARE:
                    by_method.setdefault(m.method, []).append(m)
            for method, ms in by_method.items():
                if all(m.verdict != "PASS" or m.caveat for m in ms):
                    last = ms[-1]
                    what = "FAIL" if last.verdict != "PASS" else f"⚠️ {last.caveat}"
                    out[method] = f"ledger seq {last.seq}: {shape_args(row.shape)} {method} {what}"
        return out


    def recorded_failures(self, kernel: str, shape: dict[str, Any]) -> dict[str, list[str]]:
        """method -> cites of what the registry records failing for this exact shape: methods whose every
        hardware row FAILs (`failed_methods`), and the GEMM JSON notes' sentences saying a method fails (the
        ledger's imported notes and MLIR_AIR_DIR's file)."""
        out = {m: [c] for m, c in self.failed_methods(kernel, shape).items()}
        if not piece(kernel, "best_config") or not all(k in shape for k in ("M", "K", "N")):
            return out
        M, K, N = (int(shape[k]) for k in ("M", "K", "N"))
        for where, doc in self.documents:
            entry = _find(doc, M, K, N)
            if entry is None:
                continue
            notes = [entry.get("_note")] + [m.get("_note") for m in entry.get("methods", {}).values()]
            for sentence in (x for note in notes if note for x in _SENTENCE.split(note)):
                if not _FAILS.search(sentence):
                    continue
                for method in ("fused-cast", "drain", "direct"):
                    if method in sentence.lower():
                        out.setdefault(method, []).append(f"{where} {M}x{K}x{N} note: \"{sentence.strip()}\"")
        return out


_SENTENCE = re.compile(r"(?<=[.;])\s+")
_FAILS = re.compile(r"\bfail", re.IGNORECASE)


__all__ = ["gemm_config", "gemm_answer", "gemm_config_method", "kernel_rows", "PlanningRegistry",
           "DEFAULT_REGISTRY_DIR", "MLIR_AIR_REGISTRY_DIR"]
