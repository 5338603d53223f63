"""Is a measurement possible evidence for the (kernel, shape, contract) it claims? Pure checks, no I/O.

A harness transcript (`ledger record harness`, the mlir-air executor in Phase 1) or an imported registry
row is accepted only if

* its shape is the kernel's: exactly its keys, positive integers (`KernelSpec.normalize_shape`);
* its contract is one the kernel has, and the rtol/atol it printed are that contract's (npu_kernels.thresholds);
* the element count it checked equals the shape's output size (a 10-element check is not a 4096x4096 GEMM), the
  size the kernel's catalog entry states (`KernelSpec.output_elements`: no kernel can lack one);
* its error figures are non-negative, and finite where the verdict is PASS (a NaN can only FAIL);
* its latency and throughput are positive finite numbers, physically possible on the target: FLOP/s at most the
  target's peak, and the shape's minimum DDR traffic over the latency at most the DDR bandwidth (npu_kernels.thresholds);
* its latency and throughput agree with each other: latency x throughput is the FLOP count of the shape
  (`KernelSpec.flops`, the count mlir-air's harnesses pass as `perf_flops`), within the rounding of the digits
  actually printed (`printed_unit`: half a unit in the last printed place of each figure, nothing more). A
  causal FlashAttention timed by mlir-air's C++ `make profile` counts the full lq x lk score matrix
  (test_elf_npu2.cpp:140-141 at e972f29), so that count is accepted beside the catalog's halved one.

Each check raises `EvidenceError` with one sentence naming the figure, its value and the bound.
`check_stored_row(payload)` re-runs the figure checks on a recorded `KernelVerified` payload and returns the
problems as sentences (the registry fold and the evaluator's audit use it on read: a row appended behind the
recorder's back is not trusted for its figures).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.spec import ShapeError, UnknownKernel
from npu_kernels.perf.constants import PEAK_FLOPS
from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.kernels import kernel_tolerance
from npu_kernels.thresholds import DDR_BANDWIDTH_BYTES_S, PRINTED_TOLERANCE_REL


class EvidenceError(ValueError):
    """Raised when a measurement cannot be evidence for the kernel, shape and contract it is recorded for."""


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
    """How many elements the kernel's output has at `shape` (its catalog entry's count); EvidenceError for an
    unknown kernel or a shape it does not know."""
    return get_spec(kernel).output_elements(check_shape(kernel, shape))


def printed_unit(value: float, text: str | None = None) -> float:
    """The place value of the last digit of `text` as printed (`2017.3` -> 0.1, `8.516634e+03` -> 0.001).

    Without the printed text (a figure read back from the ledger or a JSON number) the shortest text that reads
    back as `value` stands in: it never has more digits than what was printed, so the tolerance it gives is never
    tighter. Trailing zeros of a number printed without a decimal point (`49000`) are not counted as significant
    (the text cannot say whether they are), which again errs on the side of accepting."""
    if text is None:
        integral = math.isfinite(value) and float(value).is_integer() and abs(value) < 1e16
        text = str(int(value)) if integral else repr(float(value))
    body = text.strip().lstrip("+-").lower()
    mantissa, _, exp = body.partition("e")
    try:
        exponent = int(exp) if exp else 0
    except ValueError:
        exponent = 0
    if "." in mantissa:
        return 10.0 ** (exponent - len(mantissa.split(".", 1)[1]))
    digits = mantissa.rstrip("0")
    zeros = len(mantissa) - len(digits) if digits else 0
    return 10.0 ** (exponent + zeros)


def flop_counts(kernel: str, norm: dict[str, Any]) -> tuple[float, ...]:
    """The FLOP counts a harness may have divided by its latency for this shape (see the module docstring)."""
    counts = [get_spec(kernel).flops(norm)]
    registered = kernel_definition(kernel)
    if registered is not None and registered.dense_flops is not None and registered.dense_flops(norm) != counts[0]:
        counts.append(registered.dense_flops(norm))  # flash attention's causal rows: the whole square counted too
    return tuple(counts)


def check_consistency(kernel: str, norm: dict[str, Any], latency_us: float, gflops: float, *,
                      latency_text: str | None = None, gflops_text: str | None = None, where: Any = "",
                      counts: tuple[float, ...] | None = None) -> None:
    """Raise EvidenceError unless latency x throughput is one of the shape's FLOP counts, within half a unit in
    the last printed place of each figure (the only slack: the harness computes throughput from the unrounded
    latency, mlir-air xrt_runner.py:299-302, then both are rounded for printing)."""
    half_l = printed_unit(latency_us, latency_text) / 2
    half_g = printed_unit(gflops, gflops_text) / 2
    g_lo, g_hi = gflops - half_g, gflops + half_g
    slack = 1e-12  # binary floating point only
    ranges = []
    for flops in counts or flop_counts(kernel, norm):
        hi = math.inf if latency_us - half_l <= 0 else flops / ((latency_us - half_l) * 1e3)
        lo = flops / ((latency_us + half_l) * 1e3)
        if lo * (1 - slack) <= g_hi and g_lo <= hi * (1 + slack):
            return
        ranges.append((flops, lo, hi))
    flops, lo, hi = ranges[0]
    raise EvidenceError(
        f"{where or kernel}: latency {latency_text or f'{latency_us:g}'} us and throughput "
        f"{gflops_text or f'{gflops:g}'} GFLOP/s contradict each other: {flops:.6g} FLOP in "
        f"{latency_us - half_l:.10g} to {latency_us + half_l:.10g} us is {lo:.7g} to {hi:.7g} GFLOP/s, the printed "
        f"throughput {g_lo:.10g} to {g_hi:.10g}")


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
    latency_text: str | None = None,
    gflops_text: str | None = None,
    **_ignored: Any,
) -> dict[str, Any]:
    """Raise EvidenceError unless the figures can be evidence for (kernel, shape, contract) on `target`.

    Returns {"shape": normalised shape, "contract": catalog contract name}. `require_count=False` for
    rows that never carried an element count (imported registry rows); tolerances are then not checked
    either when they are None. `latency_text` / `gflops_text` are the figures as printed (their digits set the
    consistency tolerance; without them the figures' own shortest text does). Extra keyword arguments (the
    rest of a KernelVerified's fields) are ignored.
    """
    norm = check_shape(kernel, shape)  # an unknown kernel raises naming the known ones
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

    expected = get_spec(kernel).output_elements(norm)
    if n_elements is None:
        if require_count:
            raise EvidenceError(f"{where}: the transcript does not say how many elements it checked "
                                f"(the output has {expected})")
    _check_figures(kernel, norm, where, target=target, verdict=verdict, n_elements=n_elements,
                   mean_rel_L1=mean_rel_L1, max_abs=max_abs, max_rel=max_rel, latency_us=latency_us, gflops=gflops,
                   latency_text=latency_text, gflops_text=gflops_text)
    return {"shape": norm, "contract": name}


def _positive(where: str, label: str, unit: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise EvidenceError(f"{where}: {label} {value} {unit} is not a positive finite number")
    return float(value)


def _check_metrics(where: str, verdict: str, metrics: dict[str, Any]) -> None:
    for label, value in metrics.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise EvidenceError(f"{where}: {label}={value!r} is not a number")
        if math.isnan(value):
            if verdict == "PASS":
                raise EvidenceError(f"{where}: {label} is NaN but the verdict is PASS")
            continue
        if value < 0:
            raise EvidenceError(f"{where}: {label}={value} is negative")
        if verdict == "PASS" and not math.isfinite(value):
            raise EvidenceError(f"{where}: {label}={value} is not finite but the verdict is PASS")


def _facts(kernel: str, norm: dict[str, Any]) -> tuple[tuple[float, ...], float, int | None]:
    """(FLOP counts, minimum DDR bytes, output elements) of a normalised shape."""
    spec = get_spec(kernel)
    return flop_counts(kernel, norm), spec.bytes(norm), spec.output_elements(norm)


@functools.lru_cache(maxsize=4096)
def _stored_facts(kernel: str, items: tuple) -> tuple[dict[str, Any], tuple[tuple[float, ...], float, int | None]]:
    norm = get_spec(kernel).normalize_shape(dict(items))
    return norm, _facts(kernel, norm)


class _Where:
    """The row a message is about, formatted only when a message is (on read, most rows raise nothing)."""

    __slots__ = ("kernel", "norm", "contract")

    def __init__(self, kernel: str, norm: dict[str, Any], contract: str) -> None:
        self.kernel, self.norm, self.contract = kernel, norm, contract

    def __format__(self, spec: str) -> str:
        return f"{self.kernel} {','.join(f'{k}={v}' for k, v in self.norm.items())} {self.contract}".rstrip()


def _check_figures(kernel: str, norm: dict[str, Any], where: Any, *, target: str, verdict: str,
                   n_elements: Any, mean_rel_L1: Any, max_abs: Any, max_rel: Any, latency_us: Any, gflops: Any,
                   latency_text: str | None = None, gflops_text: str | None = None, on_npu: bool = True,
                   facts: tuple[tuple[float, ...], float, int | None] | None = None) -> None:
    """The checks every figure gets, on the way in and on read (the module docstring). `on_npu=False` (a CPU
    emulator's or torch's timing) skips the target's peak and DDR bounds: they bound the NPU, not the host."""
    counts, moved, expected = facts or _facts(kernel, norm)
    if n_elements is not None and expected is not None and n_elements != expected:
        raise EvidenceError(f"{where}: the transcript checked {n_elements} elements but the output has {expected}")
    _check_metrics(where, verdict, {"mean_rel_L1": mean_rel_L1, "max_abs": max_abs, "max_rel": max_rel})

    peak = PEAK_FLOPS.get(target, PEAK_FLOPS["npu2"])
    ddr = DDR_BANDWIDTH_BYTES_S.get(target, DDR_BANDWIDTH_BYTES_S["npu2"])
    if gflops is not None:
        gflops = _positive(where, "throughput", "GFLOP/s", gflops)
        if on_npu and gflops * 1e9 > peak:
            raise EvidenceError(f"{where}: throughput {gflops:.4g} GFLOP/s exceeds {target}'s peak of "
                                f"{peak / 1e9:.4g} GFLOP/s")
    if latency_us is not None:
        latency_us = _positive(where, "latency", "us", latency_us)
    if on_npu and latency_us is not None:
        seconds = latency_us * 1e-6
        flops = counts[0]
        if flops / seconds > peak:
            raise EvidenceError(f"{where}: latency {latency_us:g} us is impossible: {flops:.4g} FLOP at "
                                f"{target}'s peak of {peak / 1e9:.4g} GFLOP/s take at least {flops / peak * 1e6:.4g} us")
        if moved / seconds > ddr:
            raise EvidenceError(f"{where}: latency {latency_us:g} us is impossible: {moved:.4g} bytes at "
                                f"{ddr / 1e9:.4g} GB/s DDR bandwidth take at least {moved / ddr * 1e6:.4g} us")
    if gflops is not None and latency_us is not None:
        check_consistency(kernel, norm, latency_us, gflops, latency_text=latency_text, gflops_text=gflops_text,
                          where=where, counts=counts)


def check_stored_row(payload: dict[str, Any]) -> list[str]:
    """The problems of a recorded `KernelVerified` payload's figures ([] when it could be evidence).

    Pure, on read: the shape is the kernel's, the element count (when recorded) is the output's, error figures
    are >= 0 (NaN only on a FAIL), latency and throughput are positive, finite, possible on the row's target and
    agree with each other within the digits they carry. Tolerances are not re-judged here (the evaluator does
    that against docs/numerics.md); a kernel the catalog does not know (one mlir-air added later) gets the checks
    that need no shape: positive finite latency / throughput and non-negative error figures, and so does a shape
    the catalog cannot read (an older ledger's spelling, which the registry's own aliases still fold). Rows
    timed on the host (source `emulated` / `torch`, or an executor other than mlir-air) are not held to the NPU's bounds."""
    p = payload
    kernel, verdict = str(p.get("kernel") or ""), str(p.get("verdict") or "")
    metrics = {k: p.get(k) for k in ("mean_rel_L1", "max_abs", "max_rel")}
    latency_us, gflops = p.get("latency_us"), p.get("gflops")
    try:
        try:
            norm, facts = _stored_facts(kernel, tuple(sorted(dict(p.get("shape") or {}).items())))
        except (UnknownKernel, ShapeError, TypeError, ValueError):
            where = f"{kernel} {p.get('shape')}"
            _check_metrics(where, verdict, metrics)
            for label, unit, value in (("latency", "us", latency_us), ("throughput", "GFLOP/s", gflops)):
                if value is not None:
                    _positive(where, label, unit, value)
            return []
        where = _Where(kernel, norm, str(p.get("contract") or ""))
        _check_figures(kernel, norm, where, target=str(p.get("target") or "npu2"), verdict=verdict, facts=facts,
                       n_elements=p.get("n_elements"), latency_us=latency_us, gflops=gflops, **metrics,
                       on_npu=p.get("source") == "imported" or (p.get("source") not in ("emulated", "torch")
                                                                and p.get("executor") == "mlir-air"))
    except EvidenceError as e:
        return [str(e)]
    return []
