"""Read what mlir-air's `programming_examples/kernel_registry/sweep_gemm.py` (at 14f5590) writes into
`KernelVerified` events (issue #38 item 5): GEMM rows measured at a new M (e.g. a padded prefill of 4096), each
method's config seeded from the M=2048 winners (`plan`, `--mode seed`).

The script writes two JSON lists (no `kernel` / `output_dtype` wrapper, unlike the registry's details/*.json):

* the results file (`--out`, main): one object per config run, `{M, K, N, method, tile, used_by, ok, gflops,
  mean_rel_L1, seconds, note}`; `ok` false is a config that did not build or did not match (`run_one`: "build/run
  failed" - an L1 prune - "numerical mismatch", or "timeout");
* the emitted entries (`--emit`, `emit`): registry-shaped shape entries `{M, K, N, used_by, methods: {method:
  {tile, gflops, mean_rel_L1, tier}}, best: {high, low}}`, to paste into details/GEMM_bf16_*.json.

Read as `emit` folds the results file: a row counts only when `ok` and its GFLOP/s is not null, and per (M, K, N,
method) the fastest one is kept (its own figures, not emit's rounded ones); `tier` is "low" for `direct`, else
"high" (`emit`; `_HIGH_PRECISION`). Neither list says which registry it is for: `--dtype` (default "bf16") picks
it, so the caller says (`output_dtype`, default "bf16"); the herd is the registry's (`herd`, default [8, 4] as
`main` defaults it). Validated as registry JSON is (npu_kernels.perf.evidence.check_measurement); the events are
registry.importer's (source "imported", the file's base name and sha256 in `provenance`, `format` saying which
list), ids uuid5 of (sha256, "sweep_gemm", dtype, shape, method): importing twice adds nothing.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

from npu_kernels.perf.evidence import EvidenceError, check_measurement
from npu_kernels.provenance import IMPORTED_REGISTRY
from ledger.events import KernelVerified
from registry.catalog import BEST_CONFIG_KERNEL, fallback_tolerance
from registry.importer import NAMESPACE, UpstreamFormatError

SWEEP_GEMM_SRC = "mlir-air programming_examples/kernel_registry/sweep_gemm.py@14f5590 (run_one, emit, main)"
DEFAULT_HERD = (8, 4)  # sweep_gemm.py main: `reg.get("herd", [8, 4])`


def is_sweep_gemm(doc: Any) -> bool:
    """Whether a parsed JSON document is one of sweep_gemm.py's two lists (see the module docstring)."""
    return isinstance(doc, list) and bool(doc) and all(
        isinstance(r, dict) and {"M", "K", "N"} <= set(r) and ("ok" in r or "methods" in r) for r in doc)


def _fastest(rows: list[dict]) -> tuple[list[tuple[dict, str, dict]], int]:
    """(shape row, method, figures) per (M, K, N, method): the fastest usable results row (emit's rule), and how
    many rows were read."""
    best: dict[tuple, tuple[dict, str, dict]] = {}
    for r in rows:
        if "methods" in r:  # an emitted entry: its methods as they are
            for name, meth in (r.get("methods") or {}).items():
                best[(r["M"], r["K"], r["N"], name)] = (r, name, meth)
            continue
        if not r.get("ok") or r.get("gflops") is None:
            continue
        key = (r["M"], r["K"], r["N"], r["method"])
        if key not in best or r["gflops"] > best[key][2]["gflops"]:
            meth = {"tile": r.get("tile"), "gflops": r["gflops"], "mean_rel_L1": r.get("mean_rel_L1"),
                    "tier": "low" if r["method"] == "direct" else "high", "seconds": r.get("seconds")}
            best[key] = (r, r["method"], meth)
    read = sum(len(r.get("methods") or {}) if "methods" in r else 1 for r in rows)
    return list(best.values()), read


def events_from_sweep_gemm(path: str | Path, output_dtype: str = "bf16",
                           herd: tuple[int, int] | list[int] | None = None) -> tuple[list[tuple[str, KernelVerified]], int]:
    """(event_id, KernelVerified) per measured (shape, method) of one sweep_gemm.py file, and the rows read."""
    path = Path(path)
    raw = path.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise UpstreamFormatError(f"{path.name}: not JSON ({e})") from e
    if not is_sweep_gemm(doc):
        raise UpstreamFormatError(f"{path.name}: not a sweep_gemm.py results or --emit list")
    if output_dtype not in ("bf16", "f32"):
        raise UpstreamFormatError(f"{path.name}: output dtype must be 'bf16' or 'f32', got {output_dtype!r}")
    kept, read = _fastest(doc)
    fmt = "emit" if "methods" in doc[0] else "results"
    out = []
    for row, name, meth in kept:
        out.append(_event(path.name, sha, fmt, output_dtype, row, name, meth, tuple(herd or DEFAULT_HERD)))
    return out, read


def _event(file: str, sha: str, fmt: str, dtype: str, row: dict, name: str, meth: dict,
           herd: tuple) -> tuple[str, KernelVerified]:
    raw_shape = {k: row[k] for k in ("M", "K", "N")}
    tier = meth.get("tier") or ("low" if name == "direct" else "high")
    contract = "f32-out" if dtype == "f32" else f"bf16-out-{tier}"
    tol = fallback_tolerance(BEST_CONFIG_KERNEL, contract)
    try:
        dims = tuple(check_measurement(BEST_CONFIG_KERNEL, raw_shape, contract, target="npu2", verdict="PASS", rtol=tol.rtol,
                                       atol=tol.atol, mean_rel_L1=meth.get("mean_rel_L1"), gflops=meth.get("gflops"),
                                       require_count=False)["shape"].values())
    except (EvidenceError, TypeError) as e:
        raise UpstreamFormatError(f"{file}: {raw_shape} method {name}: {e}") from None
    provenance: dict[str, Any] = {"file": file, "sha256": sha, "herd_from": "registry default",
                                  "format": f"{SWEEP_GEMM_SRC}: {fmt}"}
    if meth.get("seconds") is not None:
        provenance["extra"] = {"seconds": meth["seconds"]}
    event = KernelVerified(
        kernel=BEST_CONFIG_KERNEL, shape={"M": dims[0], "K": dims[1], "N": dims[2]}, contract=contract, executor="mlir-air",
        target="npu2", verdict="PASS", rtol=tol.rtol, atol=tol.atol, mean_rel_L1=meth.get("mean_rel_L1"),
        tile=dict(meth.get("tile") or {}), herd=list(herd), gflops=meth.get("gflops"), source="imported",
        provenance_class=IMPORTED_REGISTRY, role=row.get("used_by", ""), method=name, tier=tier,
        provenance=provenance, note=f"sweep_gemm.py {fmt} row (seeded from the registry's winners at another M)")
    eid = str(uuid.uuid5(NAMESPACE, f"{sha}|sweep_gemm|{dtype}|{dims[0]}x{dims[1]}x{dims[2]}|{name}"))
    return eid, event
