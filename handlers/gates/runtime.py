"""The deployment's model backend: its executor, its model folder, its declared pipeline options.

Every gate from Phase 2 on, `ledger run`, `verify-model`, `diagnose` and the evaluator get their backend
here, so what a gate checks is what the deployment declares (executor, target, applied optimisations).
The implementation is chosen by executor name in `npu_kernels.backends.model_backends`, nowhere here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from handlers.planning import deployment_weights
from npu_kernels.backends.base import BackendUnavailable, ModelBackend
from npu_kernels.backends.model_backends import backend_type, make_model_backend
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.options import FAULTS
from npu_kernels.perf.dispatch import SWITCHES
from npu_kernels.perf.figures import DECODE
from registry.model_docs import model_dir_name
from statemachine.state import DeploymentState

__all__ = ["DECODE", "FAULTS", "SWITCHES", "BackendUnavailable", "backend_class", "declared_options", "make_backend",
           "model_backend"]


def make_backend(executor: str, model_path: str | Path, config: ModelConfig, *, target: str = "npu2",
                 switches: dict[str, bool] | None = None, faults: frozenset[str] = frozenset(),
                 deployment: str | None = None, weights: str = "bf16") -> ModelBackend:
    """The model backend of a deployment's executor (npu_kernels.backends.model_backends.make_model_backend): mlir-air's
    model directory (`make verify / diagnosis / profile`) for mlir-air, the in-process pipeline otherwise."""
    return make_model_backend(executor, model_path, config, target=target, switches=switches, faults=faults,
                              deployment=deployment, weights=weights)


def backend_class(state: DeploymentState) -> type[ModelBackend]:
    """The class of the deployment's model backend, for what it says before one is built (`hardware`,
    `block_remeasure_atol`): building an mlir-air one needs MLIR_AIR_DIR and the model directory."""
    return backend_type(state.executor)


def declared_options(state: DeploymentState, overrides: dict[str, Any] | None = None) -> tuple[dict[str, bool], frozenset[str]]:
    """The deployment's switches (requested at init, plus optimisations applied in Phases 4-5, plus
    `overrides`) and its test faults (only ever declared by tests: at init, or as an injected "optimisation")."""
    overrides = dict(overrides or {})
    faults = frozenset((state.pipeline or {}).get("faults", [])) | frozenset(overrides.pop("faults", ()))
    known = {*SWITCHES, *(DECODE + k for k in SWITCHES)}
    switches = {k: bool(v) for k, v in (state.pipeline or {}).items() if k in known}
    switches.update({k: bool(v) for k, v in overrides.items() if k in known})
    return switches, faults


def model_backend(state: DeploymentState, config: ModelConfig, overrides: dict[str, Any] | None = None) -> ModelBackend:
    """The deployment's model backend with its declared options (+ `overrides`)."""
    switches, faults = declared_options(state, overrides)
    return make_backend(state.executor, state.model_path, config, target=state.target, switches=switches,
                        faults=faults, deployment=model_dir_name(state.name), weights=deployment_weights(state))
