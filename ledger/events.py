"""The event vocabulary of npu-ledger: small frozen records with past-tense names.

Every event is a pydantic model; constructing one validates its payload, and `to_payload()` gives the
plain dict that the recorder stores as canonical JSON. `parse_event(type, payload)` rebuilds the typed
event from a stored row. Verdict events carry their measured numbers *and* the thresholds they were
judged against so that a reader (the Phase 7 evaluator) can re-derive the verdict without trusting it.

Non-finite floats (a NaN in a kernel output is evidence, not a crash) are allowed in payloads; the
recorder's canonical JSON encodes them explicitly (see `ledger.canonical`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

# --- the base: Event (registered by class name for `parse_event`), Measured, NewEvent, the literal types -------

Verdict = Literal["PASS", "FAIL"]
Target = Literal["npu2", "npu1"]
DType = Literal["bf16", "fp16", "q4nx"]  # fp16: old streams only (init refuses it since issue #26)
ExecutorName = Literal["emulated", "torch", "mlir-air"]
# where an event's figures come from (npu_kernels.provenance.CLASSES; "" in ledgers written before the field)
ProvenanceClass = Literal["", "npu2-measured", "standin-rehearsal", "modelled-npu2", "cpu-emulator", "unattested",
                          "imported:mlir-air-registry", "imported:mlir-air-nightly", "imported:mlir-air-readme"]


class Event(BaseModel):
    """Base of every ledger event. Subclasses are frozen and reject unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=True)
    registry: ClassVar[dict[str, type["Event"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Event.registry[cls.__name__] = cls

    @property
    def type_name(self) -> str:
        return self.__class__.__name__

    def to_payload(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event about to be appended: the typed event plus its client-made id (idempotency key)."""

    event: "Event"
    event_id: str = field(default_factory=lambda: str(uuid.uuid4()))


class Measured(Event):
    """Base of every evidence event: `model_digest` is the `ModelDigested.digest` of the model folder the
    evidence was measured against ("" in ledgers written before the binding, and in imported rows)."""

    model_digest: str = ""


# --- deployment lifecycle ---------------------------------------------------------------------------


class DeploymentRequested(Event):
    model_path: str
    name: str
    target: Target = "npu2"
    dtype: DType = "bf16"
    executor: ExecutorName = "emulated"
    hf_model_id: str | None = None
    pipeline: dict[str, Any] = Field(default_factory=dict)
    # 4-bit (issue #26): format, bundle, bf16 base folder; model_path is the dequantised reference folder
    quantisation: dict[str, Any] = Field(default_factory=dict)
    # a speculative-decoding drafter (issue 46 item 3): {path, config_sha256, vocab_size, n_layers, block[, faults]};
    # {} for a deployment without one and in ledgers written before the field
    drafter: dict[str, Any] = Field(default_factory=dict)


class ArchitectureAssessed(Event):
    architecture: str
    in_scope: bool
    reasons: list[str] = Field(default_factory=list)
    features: dict[str, Any] = Field(default_factory=dict)  # qkv_bias, qk_norm, tied_embeddings, gqa_group


class ConfigResolved(Event):
    n_layers: int
    emb_dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_dim: int
    vocab_size: int
    rope_theta: float
    rms_norm_eps: float
    tie_word_embeddings: bool
    qkv_bias: bool
    qk_norm: bool
    architecture: str = ""
    source_sha256: str = ""
    # the architecture description its family's adapter built (npu_kernels.model.description, issue #36); None in
    # ledgers written before it, read back as the Llama form with the flags above
    description: dict[str, Any] | None = None
    # the model's context window (max_position_embeddings, issue #40): plans and timed figures stay within it;
    # None in ledgers written before it (and for a config that states none)
    max_positions: int | None = None


class PhaseStarted(Event):
    """Opens an attempt. It is recorded in one batch with the attempt's evidence, after the work, so
    `started_at` (UTC, ISO 8601) says when the work began; "" in ledgers written before it existed."""

    phase: int = Field(ge=0, le=7)
    attempt: int = Field(ge=1)
    # the (kernel, shape) rows the attempt must cover ([{"kernel", "shape"}], Phase 1), recorded with its
    # evidence so an interrupted attempt is judged with its own plan; None: no plan (other phases, old ledgers)
    plan: list[dict[str, Any]] | None = None
    started_at: str = ""
    # Phase 1: where each planned row's tile came from (handlers.planning.deployment_plan): {"ledger_seq",
    # "files": {path: sha256}, "rows": [{kernel, shape, source ("registry: <cite>" | "heuristic"), contract,
    # method, tier, tile}]}; None: no record (other phases, ledgers written before it)
    plan_sources: dict[str, Any] | None = None


class PhasePassed(Event):
    phase: int = Field(ge=0, le=7)
    attempt: int = Field(ge=1)
    evidence_seqs: list[int] = Field(default_factory=list)
    summary: str = ""


class PhaseFailed(Event):
    phase: int = Field(ge=0, le=7)
    attempt: int = Field(ge=1)
    reasons: list[str]


class PhaseInconclusive(Event):
    """Closes an attempt that gave no verdict either way: its device run gave none on each of `tries` fresh
    processes (timed out, or said INCONCLUSIVE: npu_kernels.inconclusive; mlir-air's Gemma4 gate's exit 2). Never a pass, and not one of the failures
    a gate is allowed: INCONCLUSIVE_IN_A_ROW of them in a row go to a human (statemachine.state)."""

    phase: int = Field(ge=0, le=7)
    attempt: int = Field(ge=1)
    reasons: list[str]
    tries: int = Field(default=1, ge=1)  # fresh processes the device run was started in, none with a verdict


class BlockerRaised(Event):
    phase: int = Field(ge=0, le=7)
    reason: str


class DeploymentResumed(Event):
    """A human recorded a fix after a blocker; one more attempt is allowed."""

    phase: int = Field(ge=0, le=7)
    note: str


class LessonRecorded(Event):
    text: str
    phase: int | None = None


# --- Phase 0 evidence (Measured: evidence bound to the model it measured) ---------------------------------


class ModelDigested(Measured):
    """Phase 0: sha256 of config.json and of every weight file, and the resolved fields that affect numerics
    (npu_kernels.model.digest). `digest` hashes all of it; later evidence carries it as `model_digest`."""

    digest: str
    files: dict[str, str]
    numerics: dict[str, Any] = Field(default_factory=dict)


class WeightsChecked(Measured):
    ok: bool
    n_tensors: int
    expected: int
    missing: list[str] = Field(default_factory=list)
    misshaped: list[str] = Field(default_factory=list)


class ReferenceBaselineRecorded(Measured):
    """HF transformers bf16 on the canonical prompt (Phase 0)."""

    prompt: str
    n_prompt_tokens: int
    top1_token: int
    top1_text: str
    top1_prob: float
    entropy: float
    logits_finite: bool
    logit_max: float
    logit_min: float
    logit_mean: float
    logit_std: float
    thresholds: dict[str, float]
    passed: bool
    config_mismatches: list[str] = Field(default_factory=list)



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


# --- Phase 1 evidence --------------------------------------------------------------------------------


class KernelVerified(Measured):
    kernel: str
    shape: dict[str, Any]
    contract: str
    executor: str
    target: str = "npu2"
    verdict: Verdict
    rtol: float
    atol: float
    mean_rel_L1: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    mismatches: int | None = None
    n_elements: int | None = None
    nan_count: int | None = None
    # exact re-derivation: PASS <=> mismatches == 0, nan_count == 0 and worst_ratio <= 1, where
    # worst_ratio = max over elements of |out - ref| / (atol + rtol * |ref|); ref_max_abs = max |ref|
    worst_ratio: float | None = None
    ref_max_abs: float | None = None
    # where the mismatching elements sit: max |ref| and max |out - ref| over them (None when none mismatch)
    mismatch_ref_max: float | None = None
    mismatch_err_max: float | None = None
    caveat: str = ""  # e.g. "near-zero-atol-artifact" (see statemachine.checks.atol_artifact)
    tile: dict[str, Any] = Field(default_factory=dict)
    herd: list[int] | None = None
    tiles_in_flight: int | None = None
    tiles_target: int | None = None
    tile_justification: str = ""
    latency_us: float | None = None  # measured on the device (harness rows only)
    gflops: float | None = None  # measured on the device (harness rows only)
    seconds: float | None = None
    # the NPU2 performance model's figures for this shape and tile (emulated / torch rows): latency_us plus
    # gflops or gbps, "modelled": true, the model's version. Never mixed with the measured fields above.
    modelled_npu2: dict[str, Any] = Field(default_factory=dict)
    source: Literal["emulated", "torch", "harness", "diagnosis", "imported"] = "emulated"
    role: str = ""
    stage: Literal["load", "prefill", "decode", ""] = ""
    method: str = ""  # mlir-air's registry method: drain / fused-cast / direct (bf16 out), external / direct (f32 out)
    tier: str = ""  # high / low precision tier
    provenance: dict[str, Any] = Field(default_factory=dict)  # command, output_sha256, host, toolchain, device, file
    # where the verdict and figures come from, decided where the row was made (npu_kernels.provenance); every reader
    # re-derives it from `source` and `provenance` (npu_kernels.provenance.kernel_row_provenance), never trusts it
    provenance_class: ProvenanceClass = ""
    measured_at: str = ""
    note: str = ""
    # a row that passed in an earlier, failed attempt of the same phase and was not re-run: the seq of the
    # original measurement (this event is its copy; statemachine.predicates checks it against that event)
    carried_from_seq: int | None = None
    # why a harness produced no measurement ("compile-error", "traceback", "timeout", "lock-timeout",
    # "compile-only", "unparseable"); "" for a measured row. Such a row is a FAIL with no error figures.
    not_measured: str = ""


# --- Phase 2 / 3 evidence ----------------------------------------------------------------------------


class BlockValidated(Measured):
    layer: int
    executor: str
    n_positions: int
    cosine: float
    per_position_min: float
    p5: float
    median: float
    max_abs: float
    max_rel: float
    nan_count: int
    thresholds: dict[str, float]  # cosine, per_position_min
    passed: bool
    bisect: list[dict[str, Any]] = Field(default_factory=list)  # [{swapped: [...], cosine, per_position_min}]
    culprit: str | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)  # mlir-air: command, report sha256, checkout commit


class ConvStateChecked(Measured):
    """A hybrid's (LFM2) carried convolution state: Phase 2's decode check of the short-convolution layers, one of
    two methods. "carried-state" (in process, npu_kernels.model.features.short_conv): each layer's state after the
    prefill against the reference's conv cache, and the next decode step's logits. "decode-gate" (an mlir-air deployment,
    npu_kernels.mlir_air.decode_gate_report): the model directory's `make decode-gate`, mlir-air's lfm2 decode gate,
    a token sequence whose every step's logits and read-back state (relative L2 per layer) are scored."""

    executor: str
    n_positions: int  # carried-state: the prompt's positions; decode-gate: the tokens of the sequence
    # carried-state: [{layer, cosine, max_abs}]; decode-gate: [{layer, rel_l2}], the largest over the tokens
    layers: list[dict[str, Any]]
    logits_cosine: float  # decode-gate: the lowest over the tokens
    top1_agrees: bool
    thresholds: dict[str, float]  # carried-state: state_cosine, logits_cosine; decode-gate: logits_cosine, state_rel_per_layer
    passed: bool
    method: Literal["carried-state", "decode-gate"] = "carried-state"
    # decode-gate only: per token {token, cosine, dev_top1, ref_top1, top1, unusable, state_max_rel_l2, per_layer:
    # [{layer, rel_l2}], drift: [{layer, previous, this, span, increment, limit}]}, the state rows compared, the
    # layers over the drift bound (the run's count), whether it carried the state (--seq)
    steps: list[dict[str, Any]] = Field(default_factory=list)
    state_slots: int = 0
    drift_layers: int = 0
    carried_state: bool = False
    problem: str = ""  # why the run gave no check (its transcript unreadable): recorded as a FAIL, in one line
    provenance: dict[str, Any] = Field(default_factory=dict)  # mlir-air: command, transcript sha256, checkout commit
    # decided where the run was made (npu_kernels.provenance.run_provenance over `provenance`); "" in process
    provenance_class: ProvenanceClass = ""


class LayerDiagnosed(Measured):
    layer: int
    executor: str
    cos_min: float
    cos_p5: float
    cos_median: float
    cos_mean: float
    max_abs: float
    mean_abs: float
    prompt_index: int = 0
    provenance: dict[str, Any] = Field(default_factory=dict)  # mlir-air: command, report sha256, checkout commit


class TokenGateChecked(Measured):
    prompt_index: int
    prompt: str
    executor: str
    pipeline: dict[str, Any] = Field(default_factory=dict)
    n_tokens: int
    top_k: int = 5
    passed: bool
    divergence_step: int | None = None  # None: the two sides agreed on every step
    agreed_prefix: int
    chosen_ours: int | None = None
    chosen_ref: int | None = None
    topk_ours: list[int] = Field(default_factory=list)  # at the divergence step (or last step)
    topk_ref: list[int] = Field(default_factory=list)
    rank_ours_in_ref: int | None = None  # rank of our chosen token in the reference top-k (None = absent)
    rank_ref_in_ours: int | None = None
    kl_divergence: float | None = None
    kl_per_step: list[float] = Field(default_factory=list)
    tokens_ours: list[int] = Field(default_factory=list)
    tokens_ref: list[int] = Field(default_factory=list)
    text_ours: str = ""
    text_ref: str = ""
    nan_count: int = 0
    context: str = "phase3"  # phase3 / phase4:<opt> / phase6 / audit / verify-model / drill:<fault>
    # issue #15: `passed` = first_divergence_passed (the fields above, vLLM's check) and tf_passed (the
    # teacher-forced walk: both sides fed tf_tokens, the reference's greedy tokens, for tf_steps steps).
    # Defaults keep ledgers written before the walk existed readable.
    first_divergence_passed: bool | None = None
    tf_steps: int = 0
    tf_tokens: list[int] = Field(default_factory=list)
    tf_topk_ours: list[list[int]] = Field(default_factory=list)  # per step, highest first
    tf_topk_ref: list[list[int]] = Field(default_factory=list)
    tf_kl_per_step: list[float] = Field(default_factory=list)  # KL(reference || ours), nats
    tf_logprob_ours: list[float] = Field(default_factory=list)  # log p(tf_tokens[i]) on each side
    tf_logprob_ref: list[float] = Field(default_factory=list)
    tf_ppl_ratio: float | None = None  # PPL(ours) / PPL(ref) of the reference continuation
    tf_passed: bool | None = None
    thresholds: dict[str, float] = Field(default_factory=dict)  # npu_kernels.thresholds.teacher_forced_thresholds()
    provenance: dict[str, Any] = Field(default_factory=dict)  # mlir-air: command, report sha256, checkout commit


# --- Phases 4-7 ----------------------------------------------------------------------------------------


class OptimizationTried(Measured):
    phase: int
    optimisation: str
    outcome: Literal["applied", "skipped", "reverted"]
    before_s: float | None = None
    after_s: float | None = None
    gate_passed: bool | None = None
    # the context of the TokenGateChecked records gate_passed rests on: "phase<N>:<optimisation>" (its own
    # re-run) or "phase<N>:final" (one re-run on the phase's final switch set, whose records must equal Phase 3's
    # number for number); "" when no gate was run for it (reverted on its figure) or recorded before this field
    gate_context: str = ""
    reason: str = ""
    samples: dict[str, Any] = Field(default_factory=dict)


class PerformanceMeasured(Measured):
    phase: int
    executor: str
    pipeline: dict[str, Any] = Field(default_factory=dict)
    n_prompt_tokens: int = 0
    n_tokens: int = 0
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    ms_per_token: float | None = None
    prefill_s: float | None = None
    setup_s: float | None = None
    warmup: int = 0
    runs: int = 0
    profile: dict[str, Any] = Field(default_factory=dict)
    # the toolchain the figures came from (npu_kernels.toolchain: npu-ledger version, the perf model's version on
    # emulated/torch, mlir-air commit and aie/peano/XRT versions on hardware); {} in ledgers written before it
    toolchain: dict[str, Any] = Field(default_factory=dict)
    # Phase 6: prefill length and decode context as axes (npu_kernels.perf.curve: TTFT against padded prefill length,
    # decode tokens/s against context; modelled NPU2 on emulated/torch, the sweeps' on hardware); {} elsewhere and
    # in ledgers written before it
    curve: dict[str, Any] = Field(default_factory=dict)
    # where the headline figures (ttft_s, prefill_s, ms_per_token, tokens_per_s) come from (npu_kernels.provenance):
    # modelled-npu2 on emulated / torch, standin-rehearsal on a twin checkout, npu2-measured from a device
    provenance_class: ProvenanceClass = ""


class SpeculationChecked(Measured):
    """Phase 5's speculative-decoding gate (issue 46 item 3), per deployment with a drafter: on every gate prompt the
    greedy tokens with the drafter (`tokens_spec`) against those without it (`tokens_plain`); `passed` is exactness
    alone (every prompt's two streams equal), re-derived by `statemachine.checks.speculation_problem`. The
    acceptance length (tokens committed per verify pass, `acceptance` per prompt) with its mean and standard
    error is a performance figure with its provenance, never part of the verdict."""

    executor: str
    drafter: dict[str, Any] = Field(default_factory=dict)  # as DeploymentRequested.drafter declared it
    block: int  # tokens the drafter proposes per round; a verify pass checks block + 1 positions
    n_tokens: int  # greedy tokens compared per prompt
    prompts: list[dict[str, Any]] = Field(default_factory=list)  # {index, prompt, tokens_spec, tokens_plain,
    #   first_divergence, acceptance[, teacher_forced_divergence: where the streams differ, the verify pass fed the
    #   plain stream: the first step it disagrees with it, None when it never does]}; on mlir-air (`make
    #   dflash-exactness`, which prints no stream) {index, prompt, exact_for: [SAME, K], first_divergence, acceptance}
    passed: bool
    exact_prompts: int
    acceptance_mean: float | None = None
    acceptance_sem: float | None = None  # 1 s.e. over verify passes; passes within a prompt correlate: a floor
    n_verify_passes: int = 0
    faults: list[str] = Field(default_factory=list)  # test faults of the speculative loop (drills only)
    source: str = ""  # "cpu-emulator" (the in-process loop) or the command that printed the figures
    problem: str = ""  # mlir-air: why the run gave no check (its transcript unreadable): recorded as a FAIL, one line
    provenance: dict[str, Any] = Field(default_factory=dict)  # mlir-air: command, transcript sha256, checkout commit
    provenance_class: ProvenanceClass = ""
    context: str = "phase5"


class EvaluationRecorded(Event):
    verdict: Literal["PASS", "PASS-with-warnings", "FAIL"]
    findings: list[dict[str, Any]] = Field(default_factory=list)  # {severity, seq, message}
    remeasured: dict[str, Any] = Field(default_factory=dict)
    report_path: str = ""


class FailureTriaged(Event):
    subject_seq: int | None = None  # the PhaseFailed / KernelVerified it explains
    subject_type: str = ""
    matches: list[dict[str, Any]] = Field(default_factory=list)  # {rule_id, root_cause, remedy, confidence, ...}
    summary: str = ""


# --- evidence read in from outside a deployment's gates: mlir-air's nightly history, a machine's calibration --


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
    left_out: list[dict[str, Any]] = Field(default_factory=list)  # implausible records not fitted: {label, seq, why}


def parse_event(type_name: str, payload: dict[str, Any]) -> Event:
    """Rebuild a typed event from its stored type name and payload; unknown types raise KeyError."""
    try:
        cls = Event.registry[type_name]
    except KeyError as e:
        raise KeyError(f"unknown event type {type_name!r}") from e
    return cls.model_validate(payload)


# the vocabulary as one namespace
__all__ = sorted({"DType", "ExecutorName", "NewEvent", "Target", "Verdict", "parse_event",
                  *(name for name, obj in list(globals().items()) if isinstance(obj, type) and issubclass(obj, Event))})
