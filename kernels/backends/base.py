"""The seam for whole-model work: what Phases 2-7 ask of a model, whoever runs it.

`ModelBackend` is the protocol the phase gates (`handlers.gates`), `ledger run / verify-model / diagnose` and
the evaluator talk to. Its operations are the ones the recipe needs: the layer-0 block comparison on the
canonical prompt (and a bisect when it fails), the token gate over a prompt set, the per-layer diagnosis, a
prefill / decode performance measurement, the integrated runner of Phase 6, and a copy of itself with an
optimisation switched on (`with_options`). Every result carries the numbers and thresholds of its event.

Implementations: `kernels.backends.in_process.InProcessBackend` (the decoder pipeline on the emulated or torch
executor, against HF transformers bf16) and `kernels.backends.mlir_air.MlirAirBackend` (an mlir-air model
directory's `make verify / diagnosis / profile`). `handlers.gates.runtime.make_backend` is the one place that
chooses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["Measurement", "ModelBackend"]


@dataclass(frozen=True)
class Measurement:
    """One performance figure of a backend: the median of its samples, in seconds (per token for decode)."""

    metric: str  # "prefill_s" | "s_per_token"
    median_s: float  # the figure the gate decides on
    samples_s: list[float]
    n_tokens: int
    source: str  # "modelled-npu2" (the NPU2 performance model, deterministic), "measured-npu2", "wall"
    warmup: int = 0
    detail: dict[str, Any] = field(default_factory=dict)  # breakdown; this machine's wall time as information


class ModelBackend(Protocol):
    name: str  # the executor the numbers come from
    # True when no dispatch switch can change a number the backend produces (the token gate's records under any
    # switch set equal those without): the in-process pipeline, whose switches only change how work is
    # dispatched (tests/integration/test_pipeline.py::test_optimisation_switches_give_identical_numbers).
    # False on hardware, where a switch is another compiled program: Phases 4-5 re-run the gate per switch.
    switches_keep_numbers: bool

    @property
    def options(self) -> dict[str, Any]: ...  # the pipeline options in force (switches, faults)

    def with_options(self, switches: dict[str, bool], faults: frozenset[str] = frozenset()) -> "ModelBackend": ...

    def tokenizer(self) -> Any: ...

    def block_gate(self):  # -> kernels.model.compare.BlockResult on the canonical prompt
        ...

    def bisect_block(self):  # -> kernels.model.compare.BisectResult
        ...

    def prompts(self, full: bool) -> list: ...  # kernels.model.prompts.Prompt

    def token_gate(self, prompt, context: str):  # -> kernels.model.compare.TokenGateResult
        ...

    def diagnose(self) -> list[dict[str, Any]]: ...  # LayerDiagnosed fields per layer

    # the figure a phase decides on; `info_tokens` (None: skip) sizes the emulator's informational wall-time run
    def measure_prefill(self, info_tokens: int | None) -> Measurement: ...

    def measure_decode(self, info_tokens: int | None, steps: int) -> Measurement: ...

    def integrated_run(self, tokens: np.ndarray, n_tokens: int) -> dict[str, Any]: ...
