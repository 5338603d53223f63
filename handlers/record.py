"""`ledger record harness`: a transcript from an NPU2 machine becomes one KernelVerified(source=harness).

Validated on the way in (npu_kernels.perf.evidence): the shape is the kernel's, the transcript's element count is the
shape's output size, its printed rtol/atol are the contract's, its figures are non-negative (finite for a
PASS), its latency/throughput positive, physically possible on the target and consistent with each other and the
shape's FLOP count to the digits printed; a GEMM run names its method, one mlir-air's lookup knows for the
contract (`check_gemm_method`). The same transcript bytes are never evidence for two different (kernel, shape,
contract) rows: a sha256 already recorded for another row is refused. Anything refused raises `EvidenceError` and records nothing.
"""

from __future__ import annotations

from datetime import datetime, timezone

from handlers.uow import DeploymentUnit
from npu_kernels.perf.evidence import EvidenceError, check_contract, check_measurement, check_shape
from npu_kernels.mlir_air.output import sha256_text
from npu_kernels.provenance import harness_provenance
from npu_kernels.mlir_air.transcript import parse_harness_transcript
from npu_kernels.numerics.kernels import piece
from registry.catalog import gemm_lookup_methods
from ledger import Ledger
from ledger.events import KernelVerified
from statemachine.gate import kernel_key


def parse_shape(text: str) -> dict:
    """`M=2048,K=2048,N=2048` -> {"M": 2048, ...}; values that are not integers stay text (refused later)."""
    shape: dict = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise EvidenceError(f"shape item {part!r} is not KEY=VALUE (e.g. M=2048)")
        value = value.strip()
        shape[key.strip()] = int(value) if value.lstrip("-").isdigit() else value
    return shape


def reused_by(ledger: Ledger, sha256: str, row: tuple) -> str | None:
    """A description of the recorded row (not `row`) whose evidence is the transcript `sha256`, if any."""
    for rec in ledger.read_all():
        if rec.type != "KernelVerified" or (rec.payload.get("provenance") or {}).get("output_sha256") != sha256:
            continue
        p = rec.payload
        other = (*kernel_key(p["kernel"], p["shape"]), p["contract"])
        if other != row:
            return f"seq {rec.seq} ({p['kernel']} {other[1]} {p['contract']})"
    return None


# mlir-air's GEMM methods as its registry JSON names them (bf16 out: direct / fused-cast / drain; f32 out: external)
GEMM_METHODS = ("direct", "fused-cast", "drain", "external")
# the toolchain keys a person may declare for a transcript run elsewhere (npu_kernels.toolchain names them)
DECLARABLE_TOOLCHAIN = ("mlir_air_commit", "aie_opt", "air_opt", "xrt_smi", "peano")


def parse_toolchain(text: str | None) -> dict[str, str]:
    """`mlir_air_commit=e972f29,peano=clang 22.0` -> a toolchain dict; keys other than DECLARABLE_TOOLCHAIN and
    empty values are refused (EvidenceError naming them)."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in DECLARABLE_TOOLCHAIN or not value:
            raise EvidenceError(f"toolchain item {part.strip()[:60]!r} is not KEY=VALUE with KEY one of "
                                f"{', '.join(DECLARABLE_TOOLCHAIN)}")
        out[key] = value
    return out


def check_gemm_method(kernel: str, contract: str, method: str) -> None:
    """A GEMM row's method must be one mlir-air's lookup keys rows by for its contract (registry.catalog
    .gemm_lookup_methods): the registry JSON files a row under its method and `best` names it, so a row without one
    (or with another name) would be a `best` mlir-air's builders cannot build. EvidenceError naming `--method`."""
    if not piece(kernel, "method_tier"):  # a kernel whose runs have no method
        return
    known = gemm_lookup_methods(contract)
    if method not in known:
        given = f"--method {method[:40]!r} is not valid:" if method else "no --method given:"
        raise EvidenceError(f"{given} a GEMM {contract} run is filed in mlir-air's registry under its method, one of "
                            f"{', '.join(known)} (the make run's METHOD); give it with --method")


def record_harness(ledger: Ledger, name: str, *, kernel: str, shape: str, contract: str | None, text: str,
                   file_label: str, role: str = "", device: str | None = None,
                   toolchain: dict[str, str] | None = None, method: str = "") -> tuple[int, KernelVerified]:
    """Validate the transcript for (kernel, shape, contract) and record it; return (seq, event).

    `device` and `toolchain` are what the person recording declares of the machine the transcript came from (the
    NPU's name as xrt-smi reports it; the mlir-air commit and tool versions): with both, the row is
    `npu2-measured`; without, `unattested` (npu_kernels.provenance) and never verified, best or exported. `method` is
    the GEMM method the run used (mlir-air's run.py does not print it: the make run's METHOD), the key the
    registry JSON files the row under."""
    if method and not piece(kernel, "method_tier"):
        raise EvidenceError(f"--method {method[:40]!r}: only a GEMM run has a method "
                            f"({', '.join(GEMM_METHODS)})")
    result = parse_harness_transcript(text)  # garbage / truncated: TranscriptError, nothing recorded
    unit = DeploymentUnit(ledger, name)
    fields = {k: v for k, v in result.kernel_verified_fields().items() if v is not None or k == "mean_rel_L1"}
    claimed = parse_shape(shape)
    digest = sha256_text(text)
    row = (*kernel_key(kernel, check_shape(kernel, claimed)), check_contract(kernel, contract))
    other = reused_by(ledger, digest, row)
    if other:
        raise EvidenceError(f"this transcript (sha256 {digest[:12]}) is already the evidence of {other}; "
                            "one harness run is evidence for one (kernel, shape, contract) only")
    checked = check_measurement(kernel, claimed, contract, target=unit.state.target,
                                latency_text=result.latency_text, gflops_text=result.gflops_text, **fields)
    check_gemm_method(kernel, checked["contract"], method)
    event = KernelVerified(
        kernel=kernel, shape=checked["shape"], contract=checked["contract"], executor="mlir-air",
        target=unit.state.target, source="harness", role=role, method=method,
        measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        provenance={"file": file_label, "output_sha256": digest, "device": device or None,
                    "toolchain": dict(toolchain or {}), "declared_by": "ledger record harness"},
        provenance_class=harness_provenance(toolchain, device), **fields,
    )
    return unit.commit([event])[0], event
