"""The one place a `ModelBackend` (npu_kernels.backends.base) implementation is chosen by executor name: mlir-air's
model directory (`make verify / diagnosis / profile / run`, npu_kernels.backends.mlir_air) for "mlir-air", the
in-process pipeline (npu_kernels.backends.in_process) for the others."""

from __future__ import annotations

from pathlib import Path

from npu_kernels.backends.base import BackendUnavailable, ModelBackend
from npu_kernels.backends.in_process import InProcessBackend
from npu_kernels.backends.kernel_runners import HARNESS
from npu_kernels.backends.mlir_air import MlirAirBackend, MlirAirBackendError
from npu_kernels.model.config import ModelConfig

__all__ = ["backend_type", "make_model_backend"]


def backend_type(executor: str) -> type[ModelBackend]:
    """The backend class of `executor`, whose class attributes (`hardware`, `can_bisect`, `block_remeasure_atol`,
    `switches_keep_numbers`) a caller may read before building one."""
    return MlirAirBackend if executor == HARNESS else InProcessBackend


def make_model_backend(executor: str, model_path: str | Path, config: ModelConfig, *, target: str = "npu2",
                       switches: dict[str, bool] | None = None, faults: frozenset[str] = frozenset(),
                       deployment: str | None = None, weights: str = "bf16") -> ModelBackend:
    """The model backend of `executor` for a model folder; `deployment` names the mlir-air model directory
    (programming_examples/llms/<deployment>/); `weights` the deployment's weight format (the in-process pipeline
    runs "q4nx-device" with its 4-bit decode; init refuses that style on mlir-air). Raises BackendUnavailable when
    it cannot be built."""
    if backend_type(executor) is MlirAirBackend:
        if not deployment:
            raise BackendUnavailable("the mlir-air backend needs the deployment's name (its model directory)")
        try:
            return MlirAirBackend(model_path, config, deployment, target, switches, faults)
        except MlirAirBackendError as e:
            raise BackendUnavailable(str(e)) from e
    return InProcessBackend(model_path, config, executor, target, switches, faults, weights)
