"""Read mlir-air's registry JSON (`details/GEMM_bf16_in_*_out.json`) into `KernelVerified` events.

`events_from_upstream(path)` turns one file into one event per (shape, method):

* `source="imported"`, `executor="mlir-air"`, `verdict="PASS"` — upstream's tables only hold configs that
  were accepted on NPU2 (its `_note` text, kept in `note`, says where a sweep status needed a caveat);
* `contract` from the file's `output_dtype` and the method's tier (`f32-out`, `bf16-out-high`,
  `bf16-out-low`), with rtol/atol from docs/numerics.md for that contract;
* `method`, `tier`, `tile`, `gflops` (null stays None), `mean_rel_L1`, `herd` (the method's, else the
  file's), `role` = upstream's `used_by` text, `measured_at` = the file's `measured`;
* `provenance` = {file (base name only, never a machine path), sha256 of the file bytes, herd_from, the
  shape and method `_note` texts and any other upstream method fields (e.g. `correlation`) verbatim} so
  the JSON projection can write back what upstream wrote.

Validated on the way in, like a harness transcript (npu_kernels.perf.evidence): every shape is positive integers,
every contract's tolerances are the catalog's, mean_rel_L1 is non-negative and finite, GFLOP/s is
physically possible on the file's target (at most its peak), and the file's `measured` date is not in the
future. One bad row refuses the whole file (UpstreamFormatError naming the file, shape and figure).

Event ids are uuid5 of (file sha256, output dtype, shape, method): importing the same file twice yields the
same ids, and the ledger's UNIQUE(event_id) makes the second import add nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from npu_kernels.perf.evidence import EvidenceError, check_measurement
from npu_kernels.provenance import IMPORTED_REGISTRY
from ledger.events import KernelVerified
from registry.catalog import BEST_CONFIG_KERNEL, fallback_tolerance

IMPORT_STREAM = "registry:import"
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/Xilinx/mlir-air/kernel_registry")
_KNOWN_METHOD_FIELDS = {"tile", "gflops", "mean_rel_L1", "tier", "herd", "_note"}


class UpstreamFormatError(ValueError):
    """Raised when a file is not an mlir-air GEMM registry JSON this importer understands."""


def event_id_for(sha256: str, output_dtype: str, shape: tuple[int, int, int], method: str) -> str:
    m, k, n = shape
    return str(uuid.uuid5(NAMESPACE, f"{sha256}|{output_dtype}|{m}x{k}x{n}|{method}"))


def _contract(output_dtype: str, tier: str) -> str:
    if output_dtype == "f32":
        return "f32-out"
    return f"bf16-out-{tier}"


_DATE = re.compile(r"^(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?$")


def _measured(path: Path, text: object, today: date) -> str:
    """The file's `measured` date as written; refused when unreadable or later than `today`."""
    text = str(text or "")
    if not text:
        return ""
    m = _DATE.match(text)
    try:
        first_day = date(int(m[1]), int(m[2] or 1), int(m[3] or 1)) if m else None
    except ValueError:
        first_day = None
    if first_day is None:
        raise UpstreamFormatError(f"{path.name}: measured {text!r} is not a date (YYYY-MM or YYYY-MM-DD)")
    if first_day > today:
        raise UpstreamFormatError(f"{path.name}: measured {text!r} is in the future (today is {today.isoformat()})")
    return text


def events_from_upstream(path: str | Path, today: date | None = None) -> list[tuple[str, KernelVerified]]:
    """(event_id, KernelVerified) for every (shape, method) in one upstream GEMM registry file, in file order.

    `today` (default: the UTC date now) is the latest `measured` date accepted."""
    path = Path(path)
    today = today or datetime.now(timezone.utc).date()
    raw = path.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise UpstreamFormatError(f"{path.name}: not JSON ({e})") from e
    if not isinstance(doc, dict) or doc.get("kernel") != "GEMM" or not isinstance(doc.get("shapes"), list):
        raise UpstreamFormatError(
            f"{path.name}: not an mlir-air GEMM registry file (expected kernel 'GEMM' and a 'shapes' list)"
        )
    output_dtype = doc.get("output_dtype")
    if output_dtype not in ("bf16", "f32"):
        raise UpstreamFormatError(f"{path.name}: output_dtype must be 'bf16' or 'f32', got {output_dtype!r}")
    file_herd = doc.get("herd")
    target = doc.get("target", "npu2")
    measured = _measured(path, doc.get("measured"), today)
    out: list[tuple[str, KernelVerified]] = []
    for s in doc["shapes"]:
        try:
            raw_shape = {k: s[k] for k in ("M", "K", "N")}
            dims = tuple(check_measurement(BEST_CONFIG_KERNEL, raw_shape, "bf16-out-high", verdict="PASS",
                                           require_count=False)["shape"].values())
        except (KeyError, TypeError) as e:
            raise UpstreamFormatError(f"{path.name}: a shape without M, K and N ({e})") from None
        except EvidenceError as e:
            raise UpstreamFormatError(f"{path.name}: {e}") from None
        for name, meth in s["methods"].items():
            tier = meth.get("tier") or "high"
            contract = _contract(output_dtype, tier)
            tol = fallback_tolerance(BEST_CONFIG_KERNEL, contract)
            try:
                check_measurement(BEST_CONFIG_KERNEL, raw_shape, contract, target=target, verdict="PASS", rtol=tol.rtol,
                                  atol=tol.atol, mean_rel_L1=meth.get("mean_rel_L1"), gflops=meth.get("gflops"),
                                  require_count=False)
            except EvidenceError as e:
                raise UpstreamFormatError(f"{path.name}: method {name}: {e}") from None
            herd = meth.get("herd", file_herd)
            provenance: dict[str, Any] = {
                "file": path.name,
                "sha256": sha,
                "herd_from": "method" if "herd" in meth else "file",
            }
            if s.get("_note"):
                provenance["shape_note"] = s["_note"]
            if meth.get("_note"):
                provenance["method_note"] = meth["_note"]
            extra = {k: v for k, v in meth.items() if k not in _KNOWN_METHOD_FIELDS}
            if extra:
                provenance["extra"] = extra
            note = "\n".join(t for t in (s.get("_note", ""), meth.get("_note", "")) if t)
            event = KernelVerified(
                kernel=BEST_CONFIG_KERNEL,
                shape={"M": dims[0], "K": dims[1], "N": dims[2]},
                contract=contract,
                executor="mlir-air",
                target=target,
                verdict="PASS",
                rtol=tol.rtol,
                atol=tol.atol,
                mean_rel_L1=meth.get("mean_rel_L1"),
                tile=dict(meth.get("tile") or {}),
                herd=list(herd) if herd is not None else None,
                gflops=meth.get("gflops"),
                source="imported", provenance_class=IMPORTED_REGISTRY,
                role=s.get("used_by", ""),
                method=name,
                tier=tier,
                provenance=provenance,
                measured_at=measured,
                note=note,
            )
            out.append((event_id_for(sha, output_dtype, dims, name), event))
    return out
