"""Is a measurement possible evidence for the (kernel, shape, contract) it claims? Pure checks, no I/O.

A harness transcript (`ledger record harness`, the mlir-air executor in Phase 1) or an imported registry
row is accepted only if

* its shape is the kernel's: exactly its keys, positive integers (`KernelSpec.normalize_shape`);
* its contract is one the kernel has, and the rtol/atol it printed are that contract's (kernels.thresholds);
* the element count it checked equals the shape's output size (a 10-element check is not a 4096x4096 GEMM);
* its error figures are non-negative, and finite where the verdict is PASS (a NaN can only FAIL);
* its latency and throughput are physically possible on the target: FLOP/s at most the target's peak,
  and the shape's minimum DDR traffic over the latency at most the DDR bandwidth (kernels.thresholds).

Each check raises `EvidenceError` with one sentence naming the figure, its value and the bound.
"""

from __future__ import annotations

import math
from typing import Any

from kernels.numerics.catalog import get_spec
from kernels.numerics.spec import ShapeError, UnknownKernel
from kernels.perf.constants import PEAK_FLOPS
from kernels.thresholds import DDR_BANDWIDTH_BYTES_S, PRINTED_TOLERANCE_REL, kernel_tolerance


class EvidenceError(ValueError):
    """Raised when a measurement cannot be evidence for the kernel, shape and contract it is recorded for."""


# the number of elements of each kernel's (single) output, from its normalised shape
_OUTPUT_ELEMENTS = {
    "gemm": lambda s: s["M"] * s["N"],
    "gemv": lambda s: s["M"],
    "rmsnorm": lambda s: s["M"] * s["N"],
    "layernorm": lambda s: s["M"] * s["N"],
    "rope": lambda s: s["rows"] * s["head_dim"],
    "flash_attention": lambda s: s["heads_q"] * s["lq"] * s["dv"],
    "eltwise_add": lambda s: s["N"],
    "silu_mul": lambda s: s["N"],
    "gelu": lambda s: s["N"],
}


def check_shape(kernel: str, shape: dict[str, Any]) -> dict[str, Any]:
    """The kernel's normalised shape; EvidenceError for an unknown kernel or a shape it does not know."""
    try:
        return get_spec(kernel).normalize_shape(shape)
    except (UnknownKernel, ShapeError) as e:
        raise EvidenceError(str(e)) from None


def check_contract(kernel: str, contract: str | None) -> str:
    """The contract's catalog name (`bf16` is accepted for a single-contract kernel's `bf16-out`)."""
    spec = get_spec(kernel)
    if contract == "bf16" and "bf16-out" in spec.contracts:
        contract = "bf16-out"
    try:
        return spec.contract(contract).name
    except ValueError as e:
        raise EvidenceError(str(e)) from None


def output_elements(kernel: str, shape: dict[str, Any]) -> int:
    """How many elements the kernel's output has at `shape`."""
    return int(_OUTPUT_ELEMENTS[kernel](check_shape(kernel, shape)))


def _same(printed: float, expected: float) -> bool:
    return math.isclose(printed, expected, rel_tol=PRINTED_TOLERANCE_REL, abs_tol=0.0)


def check_measurement(
    kernel: str,
    shape: dict[str, Any],
    contract: str | None,
    *,
    target: str = "npu2",
    verdict: str,
    rtol: float | None = None,
    atol: float | None = None,
    n_elements: int | None = None,
    mean_rel_L1: float | None = None,
    max_abs: float | None = None,
    max_rel: float | None = None,
    latency_us: float | None = None,
    gflops: float | None = None,
    require_count: bool = True,
    **_ignored: Any,
) -> dict[str, Any]:
    """Raise EvidenceError unless the figures can be evidence for (kernel, shape, contract) on `target`.

    Returns {"shape": normalised shape, "contract": catalog contract name}. `require_count=False` for
    rows that never carried an element count (imported registry rows); tolerances are then not checked
    either when they are None. Extra keyword arguments (the rest of a KernelVerified's fields) are ignored.
    """
    norm = check_shape(kernel, shape)  # an unknown kernel raises naming the known ones
    spec = get_spec(kernel)
    name = check_contract(kernel, contract)
    where = f"{kernel} {','.join(f'{k}={v}' for k, v in norm.items())} {name}"

    want_rtol, want_atol = kernel_tolerance(kernel, name)
    for label, got, want in (("rtol", rtol, want_rtol), ("atol", atol, want_atol)):
        if got is None:
            if require_count:
                raise EvidenceError(f"{where}: the transcript prints no {label}")
            continue
        if not (isinstance(got, (int, float)) and math.isfinite(got) and _same(float(got), want)):
            raise EvidenceError(f"{where}: printed {label}={got} is not the contract's {label}={want:g}")

    expected = int(_OUTPUT_ELEMENTS[kernel](norm))
    if n_elements is None:
        if require_count:
            raise EvidenceError(f"{where}: the transcript does not say how many elements it checked "
                                f"(the output has {expected})")
    elif n_elements != expected:
        raise EvidenceError(f"{where}: the transcript checked {n_elements} elements but the output has {expected}")

    for label, value in (("mean_rel_L1", mean_rel_L1), ("max_abs", max_abs), ("max_rel", max_rel)):
        if value is None:
            continue
        if math.isnan(value):
            if verdict == "PASS":
                raise EvidenceError(f"{where}: {label} is NaN but the verdict is PASS")
            continue
        if value < 0:
            raise EvidenceError(f"{where}: {label}={value} is negative")
        if verdict == "PASS" and not math.isfinite(value):
            raise EvidenceError(f"{where}: {label}={value} is not finite but the verdict is PASS")

    peak = PEAK_FLOPS.get(target, PEAK_FLOPS["npu2"])
    ddr = DDR_BANDWIDTH_BYTES_S.get(target, DDR_BANDWIDTH_BYTES_S["npu2"])
    if gflops is not None:
        if not (math.isfinite(gflops) and gflops >= 0):
            raise EvidenceError(f"{where}: throughput {gflops} GFLOP/s is not a non-negative number")
        if gflops * 1e9 > peak:
            raise EvidenceError(f"{where}: throughput {gflops:.4g} GFLOP/s exceeds {target}'s peak of "
                                f"{peak / 1e9:.4g} GFLOP/s")
    if latency_us is not None:
        if not (math.isfinite(latency_us) and latency_us > 0):
            raise EvidenceError(f"{where}: latency {latency_us} us is not a positive number")
        seconds = latency_us * 1e-6
        flops, moved = spec.flops(norm), spec.bytes(norm)
        if flops / seconds > peak:
            raise EvidenceError(f"{where}: latency {latency_us:g} us is impossible: {flops:.4g} FLOP at "
                                f"{target}'s peak of {peak / 1e9:.4g} GFLOP/s take at least {flops / peak * 1e6:.4g} us")
        if moved / seconds > ddr:
            raise EvidenceError(f"{where}: latency {latency_us:g} us is impossible: {moved:.4g} bytes at "
                                f"{ddr / 1e9:.4g} GB/s DDR bandwidth take at least {moved / ddr * 1e6:.4g} us")
    return {"shape": norm, "contract": name}
