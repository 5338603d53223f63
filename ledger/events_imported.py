"""Events of evidence that came from outside a deployment's own gates: a 4-bit bundle read and its
quantisation budget (Phase 0 of a Q4NX deployment, issue #26), mlir-air's nightly perf history read in
(`ledger perf import-history`, issue #25), and the performance model fitted to a machine's own recorded runs
(`ledger perf calibrate`, issue #40). Re-exported by ledger.events, where everyone imports them from."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ledger.event_base import Event, Measured


class QuantisedBundleRead(Measured):
    """Phase 0, 4-bit: bundle and bf16 base digested, the dequantised reference folder written from the bundle;
    `dequantised_sha256` hashes its tensors (names, bf16 bytes), re-derivable from the bundle alone."""

    bundle: str
    bundle_sha256: str
    base: str
    base_digest: str
    layout: str
    scale_dtype: str = "bfloat16"
    padded: list[str] = Field(default_factory=list)  # 'RxC->R'xC'' per distinct padded projection shape
    dequantised_sha256: str = ""
    # the on-device style (npu_kernels.model.q4nx_device): the decode's re-quantised weights, decode.requant
    style: str = "host"
    decode_sha256: str = ""


class QuantisationBudgetMeasured(Measured):
    """Phase 0, 4-bit: the dequantised vs the bf16 model, teacher-forced (npu_kernels.model.q4nx_budget)."""

    kl_mean: float | None = None
    kl_max: float | None = None
    top5_agreement: float | None = None
    ppl_ratio_max: float | None = None
    n_prompts: int = 0
    n_steps: int = 0
    rows: list[dict[str, Any]] = Field(default_factory=list)
    thresholds: dict[str, float] = Field(default_factory=dict)
    passed: bool = False
    problems: list[str] = Field(default_factory=list)


class NightlyPerfImported(Event):
    """One line of mlir-air's nightly perf history (history.ndjson, sweep_history.ndjson or
    prefill_sweep_history.ndjson on its `perf-history` branch) read into the ledger verbatim, as evidence of kind
    imported (`ledger perf import-history`; schema and check: registry.nightly_history). Stream
    `nightly:perf-history`; the event id is a UUID5 of the series and row, so a line is recorded once."""

    series: Literal["history", "sweep", "prefill_sweep"]
    row: dict[str, Any]
    file: str = ""  # the file's name as given, no folder
    line: int = 0
    file_sha256: str = ""
    source: Literal["imported"] = "imported"


class PerformanceCalibrated(Event):
    """The NPU2 performance model's per-machine constants fitted to the ledger's NPU2-measured profile figures
    (`ledger perf calibrate`; npu_kernels.perf.calibration): the factors per group of time with their error bars, the
    named constants they give, each figure kind's leave-one-out error bar, and the data it was fitted to (every
    row: its source event seq, figure, measured value and the model's components on mlir-air's published machine).
    Stream `perf:calibration`; `ledger predict` reports with the latest (or the one named)."""

    name: str
    devices: list[str] = Field(default_factory=list)
    scales: dict[str, float] = Field(default_factory=dict)
    scale_errors: dict[str, float] = Field(default_factory=dict)
    constants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    fixed: list[str] = Field(default_factory=list)  # groups too small in every row to fit: kept at the published value
    error_bars: dict[str, float] = Field(default_factory=dict)  # figure kind -> relative error bar
    rows: list[dict[str, Any]] = Field(default_factory=list)
    method: str = ""
