"""Build the deployment's production runner (weights + executor + pipeline options) and the HF reference.

Every gate from Phase 2 on, `ledger run`, `verify-model` and the audit build their runners here, so the
pipeline a gate checks is the one the deployment declares (executor, target, applied optimisations).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from kernels.model.config import ModelConfig
from statemachine.state import DeploymentState

from kernels.model.pipeline import SWITCHES  # noqa: F401 - re-exported for the gates


def pipeline_options(state: DeploymentState, overrides: dict[str, Any] | None = None):
    """The deployment's declared pipeline options: requested ones, plus optimisations applied in Phases 4-5."""
    from kernels.model.pipeline import PipelineOptions

    overrides = dict(overrides or {})
    # faults are only ever declared by tests: at init, or as an injected "optimisation" in Phases 4-5
    faults = frozenset((state.pipeline or {}).get("faults", [])) | frozenset(overrides.pop("faults", ()))
    declared = {k: bool(v) for k, v in (state.pipeline or {}).items() if k in SWITCHES}
    declared.update(overrides)
    return PipelineOptions(**declared, faults=faults)


@lru_cache(maxsize=4)
def _weights(folder: str, config: ModelConfig):
    from kernels.model.weights import load_weights

    return load_weights(folder, config)


@lru_cache(maxsize=4)
def hf_runner(folder: str):
    from kernels.model.hf_reference import HfRunner

    return HfRunner(folder)


def make_executor(state: DeploymentState):
    from kernels.executors import make_executor as factory

    return factory(state.executor, target=state.target)


def build_pipeline(state: DeploymentState, config: ModelConfig, overrides: dict[str, Any] | None = None,
                   executor=None):
    """The deployment's NPU pipeline on its executor with its declared options (+ `overrides`)."""
    from kernels.model.pipeline import NpuPipeline

    if state.executor == "mlir-air":
        raise RuntimeError("the mlir-air executor runs an mlir-air model directory's `make verify`; "
                           "the array pipeline runs on emulated or torch")
    weights = _weights(str(Path(state.model_path)), config)
    return NpuPipeline(weights, config, executor or make_executor(state), pipeline_options(state, overrides))
