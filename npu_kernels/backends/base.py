"""The seam for whole-model work: what Phases 2-7 ask of a model, whoever runs it.

`ModelBackend` is the protocol the phase gates (`handlers.gates`), `ledger run / verify-model / diagnose / optimise`
and the evaluator talk to. Its operations are the ones the recipe needs: the layer-0 block comparison on the
canonical prompt (and a bisect when it fails, where the backend can swap kernels), the token gate over a prompt
set, the per-layer diagnosis, a prefill / decode performance measurement, Phase 6's NPU2 figures and integrated
runner, and a copy of itself with an optimisation switched on (`with_options`). Every result carries the numbers
and thresholds of its event. What callers must know about a backend without asking which one it is - whether its
numbers come from a device, whether it can bisect, how close the evaluator's re-run of its block gate must come -
are class attributes, readable before one is built. No operation depends on another having been called first.

Implementations: `npu_kernels.backends.in_process.InProcessBackend` (the decoder pipeline on the emulated or torch
executor, against HF transformers bf16) and `npu_kernels.backends.mlir_air.MlirAirBackend` (an mlir-air model
directory's `make verify / diagnosis / profile / run`). `npu_kernels.backends.model_backends` is the one place that
chooses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from npu_kernels.model.compare import BisectResult, BlockResult, TokenGateResult
from npu_kernels.model.prompts import Prompt

__all__ = ["BackendUnavailable", "IntegratedRun", "Measurement", "ModelBackend", "Npu2Figures"]


class BackendUnavailable(RuntimeError):
    """Raised when no model backend exists for a deployment's executor (the message says what would)."""


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


@dataclass(frozen=True)
class Npu2Figures:
    """Phase 6's NPU2 figures: TTFT (prefill at `seq` plus the LM head), prefill time and decode speed at context
    `ctx`, from the NPU2 performance model (source "modelled-npu2") or a device's `make profile`
    ("mlir-air-profile"). `record` is the whole breakdown as Phase 6 records it (PerformanceMeasured
    profile["npu2"]): the per-ELF tables, switches and, from a device, the provenance; `curve` the figures
    against prefill length and context (PerformanceMeasured curve)."""

    source: str
    seq: int
    ctx: int
    ttft_s: float
    prefill_s: float
    ms_per_token: float
    tokens_per_s: float | None
    record: dict[str, Any]
    # prefill length and decode context as axes (npu_kernels.perf.curve's shape), recorded as PerformanceMeasured.curve;
    # its `source` says whose: "modelled-npu2", or the sweeps' on a device
    curve: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, record: dict[str, Any], curve: dict[str, Any] | None = None) -> "Npu2Figures":
        return cls(record["source"], record["seq"], record["ctx"], record["ttft_s"], record["prefill_s"],
                   record["ms_per_token"], record["tokens_per_s"], record, dict(curve or {}))

    @property
    def modelled(self) -> bool:
        """True when the figures are the performance model's, not a device's measurement."""
        return self.source == "modelled-npu2"


@dataclass(frozen=True)
class IntegratedRun:
    """One run of the integrated runner: setup outside the timed region, then prefill + greedy decode, timed."""

    tokens: list[int]  # the generated tokens (token 1 is the prefill's argmax)
    setup_s: float
    prefill_s: float
    ttft_s: float
    ms_per_token: float | None
    tokens_per_s: float | None
    profile: dict[str, Any]  # per-stage breakdown (setup, prefill, decode per token, LM head, top kernels)
    pipeline: dict[str, Any]  # the options the run had (ModelBackend.options)


class ModelBackend(Protocol):
    name: str  # the executor the numbers come from
    # True when no dispatch switch can change a number the backend produces (the token gate's records under any
    # switch set equal those without): the in-process pipeline, whose switches only change how work is
    # dispatched (tests/integration/test_pipeline.py::test_optimisation_switches_give_identical_numbers).
    # False on hardware, where a switch is another compiled program: Phases 4-5 re-run the gate per switch.
    switches_keep_numbers: ClassVar[bool]
    # True when the numbers come from a device (mlir-air on NPU2): there an optimisation is an engineer's change
    # to the model directory (`ledger optimise`), not a switch npu-ledger applies
    hardware: ClassVar[bool]
    # True when `bisect_block` can swap the block's kernels to FP32 one at a time (the in-process pipeline)
    can_bisect: ClassVar[bool]
    # runs a 4-bit deployment in the on-device style (its decode's 4-bit GEMVs on re-quantised codes)
    runs_q4nx_device: ClassVar[bool]
    runs_speculation: ClassVar[bool]  # a declared drafter runs (npu_kernels.model.speculative)
    # how close the evaluator's re-run of the Phase 2 block gate must come to the recorded cosines (absolute);
    # None: no re-run (a device's `make diagnosis` has no agreed band)
    block_remeasure_atol: ClassVar[float | None]

    @property
    def options(self) -> dict[str, Any]: ...  # the pipeline options in force (switches, faults)

    def with_options(self, switches: dict[str, bool], faults: frozenset[str] = frozenset()) -> "ModelBackend": ...

    def tokenizer(self) -> Any: ...

    def block_gate(self, layer: int = 0) -> BlockResult: ...  # layer 0 (or a hybrid's other block) on the canonical prompt

    def conv_state_check(self) -> dict[str, Any]: ...  # a hybrid's carried state: ConvStateChecked fields

    def bisect_block(self) -> BisectResult: ...  # only where `can_bisect`

    def prompts(self, full: bool) -> list[Prompt]: ...  # each knows its set (`Prompt.full`)

    def token_gate(self, prompt: Prompt, context: str) -> TokenGateResult: ...

    def diagnose(self) -> list[dict[str, Any]]: ...  # LayerDiagnosed fields per layer

    # the figure a phase decides on; `info_tokens` (None: skip) sizes the emulator's informational wall-time run
    def measure_prefill(self, info_tokens: int | None) -> Measurement: ...

    def measure_decode(self, info_tokens: int | None, steps: int) -> Measurement: ...

    def npu2_figures(self) -> Npu2Figures: ...  # Phase 6's TTFT / tokens/s under the switches in force

    def integrated_run(self, tokens: np.ndarray, n_tokens: int) -> IntegratedRun: ...
