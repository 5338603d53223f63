"""The records of one mlir-air run: `HarnessRun` (a kernel harness, with everything a `KernelVerified` event
needs of it) and `ModelRun` (`make verify` / `make diagnosis` in an LLM directory).

Made by `npu_kernels.mlir_air.executor`; read by the Phase 1 runners and the mlir-air backend (npu_kernels.backends).
Anyone may import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from npu_kernels.mlir_air.diagnosis_report import DiagnosisResult
from npu_kernels.mlir_air.transcript import HarnessResult
from npu_kernels.mlir_air.verify_report import VerifyReport
from npu_kernels.numerics.kernels import piece


@dataclass(frozen=True)
class HarnessRun:
    """One harness run: what ran, what it printed, the parsed result, and where it ran."""

    kernel: str
    contract: str
    shape: dict[str, Any]
    tile: dict[str, Any]
    command: str
    returncode: int
    transcript: str
    result: HarnessResult
    provenance: dict[str, Any]
    seconds: float
    measured_at: str
    latency_us: float | None = None  # from the checked run, or from the timing-only run when the entry has one
    gflops: float | None = None

    def method_tier(self) -> tuple[str, str]:
        """(method, tier) the run used, in mlir-air's registry names: the kernel's `method_tier` piece (GEMM's
        methods per contract); a kernel without one has neither ("", "")."""
        method_tier = piece(self.kernel, "method_tier")
        return method_tier(self.shape, self.contract, self.tile) if method_tier else ("", "")

    def herd(self) -> list[int] | None:
        t = {k.lower(): v for k, v in self.tile.items()}
        for a, b in (("herd_m", "herd_n"), ("herd_x", "herd_y")):
            if isinstance(t.get(a), int):
                return [t[a], t[b] if isinstance(t.get(b), int) else 1]
        shape = t.get("herd_shape")
        if isinstance(shape, str) and all(p.isdigit() for p in shape.split()):
            dims = [int(p) for p in shape.split()]
            return dims if len(dims) == 2 else dims + [1]
        return None

    def kernel_verified_kwargs(self, target: str = "npu2") -> dict[str, Any]:
        """Everything a `KernelVerified` event needs from this run (source = harness)."""
        herd = self.herd()
        return {
            "kernel": self.kernel,
            "shape": dict(self.shape),
            "contract": self.contract,
            "executor": "mlir-air",
            "target": target,
            **self.result.kernel_verified_fields(),
            "latency_us": self.latency_us,
            "gflops": self.gflops,
            "method": self.method_tier()[0],
            "tier": self.method_tier()[1],
            "tile": dict(self.tile),
            "herd": herd,
            "tiles_in_flight": herd[0] * herd[1] if herd else None,
            "seconds": self.seconds,
            "source": "harness",
            "provenance": dict(self.provenance),
            "measured_at": self.measured_at,
        }


@dataclass(frozen=True)
class ModelRun:
    """One `make verify` / `make diagnosis` run of an mlir-air LLM directory."""

    target: str
    command: str
    returncode: int
    transcript: str
    report_path: str
    report_json: dict[str, Any]
    result: VerifyReport | DiagnosisResult
    provenance: dict[str, Any]
