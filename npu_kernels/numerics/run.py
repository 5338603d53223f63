"""Run one leaf kernel at one shape on an executor and judge it: the unit of Phase 1 evidence.

`run_kernel(kernel, shape, executor="emulated", target="npu2", contract=None, tile=None, seed=0,
force_tile=False, inputs="project") -> KernelResult`:
  1. normalise the shape and the contract (catalog), plan/check the tile (tiles; an illegal user tile
     raises TileRuleViolation unless force_tile - fault injection only);
  2. build the inputs: `inputs="project"` the project's own fixed-seed inputs (catalog, `seed`);
     `inputs="harness"` exactly what mlir-air's harness script draws, with its reference
     (npu_kernels.numerics.harness_inputs; every catalog kernel has one, HarnessNotReproduced names them otherwise);
  3. time the executor's kernel call alone (inputs and reference excluded);
  4. compute the FP32 reference and judge the full output against the contract's rtol/atol.
`KernelResult.event_fields()` is exactly the subset of `ledger.events.KernelVerified` fields it determines,
so a caller writes `KernelVerified(**result.event_fields(), source=..., role=...)`.
`executor` is an in-process one (npu_kernels.numerics.executors); a whole harness on an NPU (mlir-air) is another
kernel runner's business (npu_kernels.backends.harness_runner), which fills a KernelResult with what it printed.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.compare import judge, mismatch_extent
from npu_kernels.numerics.executors import make_executor
from npu_kernels.numerics.executors.base import Executor
from npu_kernels.numerics.harness_inputs import harness_case
from npu_kernels.numerics.kernels import piece
from npu_kernels.numerics.tiles import plan_tile
from npu_kernels.settings import env_get

# KernelVerified fields a KernelResult determines (the rest - source, role, stage, provenance, note,
# measured_at - belong to the caller)
EVENT_FIELDS = (
    "kernel", "shape", "contract", "executor", "target", "verdict", "rtol", "atol", "mean_rel_L1", "max_abs",
    "max_rel", "mismatches", "n_elements", "nan_count", "worst_ratio", "ref_max_abs", "mismatch_ref_max",
    "mismatch_err_max", "tile", "herd",
    "tiles_in_flight", "tiles_target", "tile_justification", "latency_us", "gflops", "seconds", "method", "tier",
)


INPUT_MODES = ("project", "harness")


@dataclass
class KernelResult:
    kernel: str
    shape: dict[str, Any]
    contract: str
    executor: str
    target: str
    verdict: str  # "PASS" | "FAIL"
    mean_rel_L1: float
    max_abs: float
    max_rel: float
    rtol: float
    atol: float
    mismatches: int
    n_elements: int
    nan_count: int
    seconds: float  # the executor's time for the kernel call alone
    gflops: float | None
    tile: dict[str, Any]
    herd: list[int] | None
    tiles_in_flight: int | None
    tiles_target: int | None
    tile_justification: str = ""
    warnings: list[str] = field(default_factory=list)
    worst_ratio: float | None = None
    ref_max_abs: float | None = None
    mismatch_ref_max: float | None = None  # max |ref| over the mismatching elements
    mismatch_err_max: float | None = None  # max |out-ref| over the mismatching elements
    latency_us: float | None = None  # device latency (harness runs only)
    method: str = ""
    tier: str = ""
    # a harness run's class (npu_kernels.provenance.run_provenance over what ran); "" for the in-process executors
    provenance_class: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    def to_json(self) -> dict:
        return asdict(self)

    def event_fields(self) -> dict[str, Any]:
        """The `KernelVerified` fields this result determines (see EVENT_FIELDS)."""
        d = asdict(self)
        return {k: d[k] for k in EVENT_FIELDS}


BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


def blas_threads() -> int:
    """The BLAS thread count this process runs with (fp32 accumulation order depends on it): the first of
    BLAS_THREAD_VARS that is set, else the CPUs this process may use (OpenBLAS's default)."""
    for var in BLAS_THREAD_VARS:
        value = env_get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _executor(executor: str | Executor, target: str) -> Executor:
    return make_executor(executor, target) if isinstance(executor, str) else executor


def run_kernel(
    kernel: str,
    shape: dict,
    *,
    executor: str | Executor = "emulated",
    target: str = "npu2",
    contract: str | None = None,
    tile: dict | None = None,
    seed: int = 0,
    force_tile: bool = False,
    inputs: str = "project",
) -> KernelResult:
    """Run `kernel` at `shape` on `executor` and judge the full output; see the module docstring."""
    if inputs not in INPUT_MODES:
        raise ValueError(f"unknown inputs {inputs!r}; expected one of {', '.join(INPUT_MODES)}")
    spec = get_spec(kernel)
    s = spec.normalize_shape(shape)
    c = spec.contract(contract)
    ex = _executor(executor, target)
    target = getattr(ex, "target", target)
    plan = plan_tile(kernel, s, target, tile, force=force_tile)
    method, tier = "", c.tier
    method_tier = piece(kernel, "method_tier")
    if method_tier:  # mlir-air's registry name of the method the plan's tile runs (GEMM: direct, external, ...)
        method = method_tier(s, c.name, plan.tile)[0]
    if inputs == "harness":
        case = harness_case(kernel, s, c.name, tile=plan.tile)
        data, ref = case.inputs, case.reference
    else:
        data, ref = spec.make_inputs(s, seed), None
        if "tile_inputs" in spec.extra:  # a tile key that shapes the data (conv1d's pad)
            data = spec.extra["tile_inputs"](data, plan.tile)
    # an illegal plan reaches the executor only when forced (fault injection); a shape with no legal tile
    # runs at the executor's default tiling and carries the plan's warnings
    call_tile = plan.tile if piece(kernel, "calls_with_tile") and (plan.legal or force_tile) else None
    t0 = time.perf_counter()
    out = spec.call(ex, data, s, c.name, call_tile)
    seconds = time.perf_counter() - t0
    if ref is None:
        ref = spec.reference(data, s, c.name)
    v = judge(out, ref, c.rtol, c.atol)
    m = v.metrics
    mismatch_ref_max, mismatch_err_max = mismatch_extent(out, ref, c.rtol, c.atol) if v.mismatches else (None, None)
    flops = spec.flops(s)
    return KernelResult(
        kernel=kernel,
        shape=s,
        contract=c.name,
        executor=ex.name,
        target=target,
        verdict=v.verdict,
        mean_rel_L1=m.mean_rel_L1,
        max_abs=m.max_abs,
        max_rel=m.max_rel,
        rtol=c.rtol,
        atol=c.atol,
        mismatches=v.mismatches,
        n_elements=m.n_elements,
        nan_count=m.nan_count,
        seconds=seconds,
        gflops=flops / seconds / 1e9 if seconds > 0 else None,
        tile=dict(plan.tile),
        herd=list(plan.herd),
        tiles_in_flight=plan.tiles_in_flight,
        tiles_target=plan.tiles_target,
        tile_justification=plan.justification,
        warnings=list(plan.warnings),
        worst_ratio=v.worst_ratio,
        ref_max_abs=m.ref_max_abs,
        mismatch_ref_max=mismatch_ref_max,
        mismatch_err_max=mismatch_err_max,
        method=method,
        tier=tier,
    )

