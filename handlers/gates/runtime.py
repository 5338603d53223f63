"""The deployment's model backend: its executor, its model folder, its declared pipeline options.

Every gate from Phase 2 on, `ledger run`, `verify-model`, `diagnose` and the evaluator get their backend
here, so what a gate checks is what the deployment declares (executor, target, applied optimisations).
Nothing here builds a pipeline or an executor: `kernels.model.backend.make_backend` chooses.
"""

from __future__ import annotations

from typing import Any

from kernels.model.backend import DECODE, FAULTS, SWITCHES, ModelBackend, make_backend
from kernels.model.config import ModelConfig
from registry.model_docs import model_dir_name
from statemachine.state import DeploymentState

__all__ = ["DECODE", "FAULTS", "SWITCHES", "declared_options", "model_backend"]


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
                        faults=faults, deployment=model_dir_name(state.name))
