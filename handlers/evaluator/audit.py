"""Phase 7: the independent evaluator. Trusts nothing the deployment says about itself.

It reads only the ledger and the model folder, and:
1. verifies the hash chain (and a checkpoint kept elsewhere, if given);
2. replays the stream from nothing (an impossible order is a finding naming the event);
3. checks that every `PhasePassed` is backed by evidence recorded before it, in the same attempt, of the
   kinds its phase needs, and re-derives each evidence verdict from its own numbers and thresholds —
   and that the thresholds are the ones docs/numerics.md sets, not weaker ones; a KernelVerified whose figures fail
   the plausibility check (npu_kernels.perf.evidence.check_stored_row) is a finding naming its seq and why;
4. checks that Phase 1 covered every (kernel, shape) of the model's plan, re-derived from config.json;
5. checks that the token gate ran the production path (same executor and pipeline options as declared);
6. re-runs the Phase 3 token gate itself and compares it with what was recorded.

Each finding names the seq of the event it concerns. Any error -> FAIL; only warnings -> PASS-with-warnings.
The re-derivations here are written independently of the state machine's gate predicates on purpose.
"""

from __future__ import annotations

import math
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable

from npu_kernels.perf.evidence import check_stored_row
from npu_kernels.numerics.kernels import tolerances as kernel_tolerances
from npu_kernels.thresholds import (
    ATOL_ARTIFACT,
    BASELINE_THRESHOLDS,
    BLOCK_COSINE_MIN,
    per_position_threshold,
)
from npu_kernels.mlir_air.checkout import standin_reasons, where_it_ran
from npu_kernels.provenance import (NPU2_MEASURED, claim_problem, kernel_row_provenance, perf_row_provenance,
                                    perf_run_facts, run_provenance)
from ledger import Checkpoint, Ledger
from ledger.events import parse_event
from ledger.record import RecordedEvent
from npu_kernels.model.speculative import acceptance_summary
from statemachine.checks import conv_state_problem, speculation_problem, teacher_forced_problem
from statemachine.fold import FoldError, fold
from ledger.checkpoints import check_chain

REQUIRED_EVIDENCE = {
    0: ("WeightsChecked", "ReferenceBaselineRecorded"),
    1: ("KernelVerified",),
    2: ("BlockValidated",),
    3: ("TokenGateChecked", "LayerDiagnosed"),
    4: ("OptimizationTried", "PerformanceMeasured", "TokenGateChecked"),
    5: ("OptimizationTried", "PerformanceMeasured", "TokenGateChecked"),
    6: ("PerformanceMeasured", "TokenGateChecked", "LayerDiagnosed"),
}


@dataclass
class Finding:
    severity: str  # error | warning | info
    seq: int | None
    check: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "seq": self.seq, "check": self.check, "message": self.message}


@dataclass
class AuditResult:
    verdict: str
    findings: list[Finding] = field(default_factory=list)
    remeasured: dict[str, Any] = field(default_factory=dict)
    rerun_events: list = field(default_factory=list)  # TokenGateChecked(context="audit") to record


def _finite(*xs) -> bool:
    return all(x is not None and isinstance(x, (int, float)) and math.isfinite(x) for x in xs)


# --- re-derivations of single evidence events ---------------------------------------------------------------


def check_kernel(rec: RecordedEvent) -> list[str]:
    p = rec.payload
    # the figures themselves, re-checked on read: a row appended behind the recorder's back is not trusted
    problems = [f"seq {rec.seq} has implausible figures: {why}" for why in check_stored_row(p)]
    # a kernel with several contracts (GEMM's tiers) is judged by the row's; the others have one contract whatever it
    # was called ("bf16-out", "bf16", "")
    table = kernel_tolerances()
    several = sum(1 for kernel, _ in table if kernel == p["kernel"]) > 1
    key = (p["kernel"], p["contract"]) if several else (p["kernel"], "bf16-out")
    if key in table:
        rtol, atol = table[key]
        if p["rtol"] > rtol * (1 + 1e-9) or p["atol"] > atol * (1 + 1e-9):
            problems.append(f"judged at rtol={p['rtol']}, atol={p['atol']}, looser than NUMERICS' {rtol}/{atol}")
    if p["verdict"] != "PASS":
        return problems
    if p.get("source") in ("imported", "harness"):
        # the harness's own full-output check printed PASS!; what can be re-derived from its figures is
        # that nothing non-finite was reported and no mismatch was counted
        if (p.get("mismatches") or 0) > 0 or (p.get("nan_count") or 0) > 0:
            problems.append(f"PASS with {p.get('mismatches')} mismatches and {p.get('nan_count')} NaN")
        if p.get("mean_rel_L1") is not None and not _finite(p["mean_rel_L1"]):
            problems.append("PASS with a non-finite mean_rel_L1")
        return problems
    if p.get("mismatches") not in (0, None) or (p.get("nan_count") or 0) > 0:
        problems.append(f"PASS with {p.get('mismatches')} mismatches and {p.get('nan_count')} NaN")
    if p.get("mismatches") is None:
        problems.append("PASS without a mismatch count")
    if not _finite(p.get("max_abs"), p.get("mean_rel_L1")):
        problems.append("PASS with non-finite or missing error figures")
    if p.get("worst_ratio") is not None and p["worst_ratio"] > 1.0:
        problems.append(f"PASS but the worst element uses {p['worst_ratio']:.3g}x its tolerance (atol + rtol*|ref|)")
    if _finite(p.get("max_abs"), p.get("ref_max_abs")) and p["max_abs"] > p["atol"] + p["rtol"] * p["ref_max_abs"]:
        problems.append(f"PASS but max_abs {p['max_abs']:.3g} exceeds atol + rtol*max|ref| = "
                        f"{p['atol'] + p['rtol'] * p['ref_max_abs']:.3g}")
    if p.get("worst_ratio") is None and p.get("ref_max_abs") is None:
        problems.append("PASS without worst_ratio / ref_max_abs: the verdict cannot be re-derived")
    return problems


def check_block(rec: RecordedEvent, head_dim: int) -> list[str]:
    p = rec.payload
    problems = []
    t = p.get("thresholds", {})
    if t.get("cosine", 0) < BLOCK_COSINE_MIN or t.get("per_position_min", 0) < per_position_threshold(head_dim):
        problems.append(f"thresholds {t} weaker than NUMERICS (cosine {BLOCK_COSINE_MIN}, per-position "
                        f"{per_position_threshold(head_dim)} at head_dim {head_dim})")
    ok = (_finite(p["cosine"], p["per_position_min"]) and p["cosine"] >= BLOCK_COSINE_MIN
          and p["per_position_min"] >= per_position_threshold(head_dim) and p["nan_count"] == 0)
    if p["passed"] and not ok:
        problems.append(f"passed but cosine {p['cosine']:.5f}, per-position min {p['per_position_min']:.5f}, "
                        f"NaN {p['nan_count']} miss the block gate")
    return problems


def check_token_gate(rec: RecordedEvent) -> list[str]:
    p = rec.payload
    problems = []
    if not p["passed"]:
        return problems
    if p.get("nan_count", 0):
        problems.append(f"passed with {p['nan_count']} NaN logits")
    step = p.get("divergence_step")
    ours, ref = p.get("tokens_ours", []), p.get("tokens_ref", [])
    if step is None:
        if ours != ref:
            problems.append("says no divergence but the two token sequences differ")
        return problems + _teacher_forced(rec)
    if p.get("top_k", 5) > 5:
        problems.append(f"top-{p['top_k']} set is wider than the gate's top-5")
    if p["chosen_ours"] not in p["topk_ref"] or p["chosen_ref"] not in p["topk_ours"]:
        problems.append(f"passed but at step {step} our token {p['chosen_ours']} / reference token {p['chosen_ref']} "
                        f"is not in the other side's top-5 ({p['topk_ref']} / {p['topk_ours']})")
    if p.get("agreed_prefix") != step:
        problems.append(f"agreed prefix {p.get('agreed_prefix')} does not equal the divergence step {step}")
    if ours[:step] != ref[:step]:
        problems.append(f"token sequences differ before the recorded divergence step {step}")
    return problems + _teacher_forced(rec)


def _teacher_forced(rec: RecordedEvent) -> list[str]:
    """A passed gate that recorded its teacher-forced walk must re-derive from the walk's numbers (ledgers
    from before the walk existed carry none and are judged on the first divergence alone)."""

    if not rec.payload.get("tf_steps"):
        return []
    problem = teacher_forced_problem(rec.event)
    return [problem] if problem else []


def check_baseline(rec: RecordedEvent) -> list[str]:
    p = rec.payload
    if not p["passed"]:
        return []
    problems = []
    if not p["logits_finite"]:
        problems.append("passed with non-finite logits")
    t = p.get("thresholds", {})
    if (p["top1_prob"] >= BASELINE_THRESHOLDS["top1_prob_max"] or p["entropy"] <= t.get("entropy_min", 0.0)
            or p["entropy"] >= t.get("entropy_max", math.inf)):  # collapsed, or near-uniform (issue 48 item 4)
        problems.append(f"passed with a degenerate distribution (top-1 p={p['top1_prob']:.4f}, entropy {p['entropy']:.4f})")
    if p.get("config_mismatches"):
        problems.append(f"passed with config mismatches {p['config_mismatches']}")
    return problems


def check_optimisation(rec: RecordedEvent) -> list[str]:
    p = rec.payload
    if p["outcome"] != "applied":
        return []
    problems = []
    if p.get("gate_passed") is not True:
        problems.append(f"{p['optimisation']} applied although the token gate did not pass after it")
    if not _finite(p.get("before_s"), p.get("after_s")) or p["after_s"] >= p["before_s"]:
        problems.append(f"{p['optimisation']} applied without a measured speed-up ({p.get('before_s')} -> {p.get('after_s')})")
    return problems


def check_speculation(rec: RecordedEvent) -> list[str]:
    """A SpeculationChecked that says passed re-derives from its own streams (statemachine.checks), and its
    acceptance mean / standard error from its own per-prompt lengths (a figure, re-checked, never a verdict)."""
    event = parse_event(rec.type, rec.payload)
    problems = []
    if event.passed:
        why = speculation_problem(event)
        if why:
            problems.append(f"says passed but {why}")
    lengths = [n for r in event.prompts for n in r.get("acceptance", [])]
    mean, sem = acceptance_summary(lengths)
    for name, recorded, derived in (("acceptance_mean", event.acceptance_mean, mean),
                                    ("acceptance_sem", event.acceptance_sem, sem)):
        if (recorded is None) != (derived is None) or (derived is not None and not math.isclose(recorded, derived,
                                                                                               rel_tol=1e-9)):
            problems.append(f"{name} {recorded} is not its recorded acceptance lengths' ({derived})")
    if len(lengths) != event.n_verify_passes:
        problems.append(f"n_verify_passes {event.n_verify_passes} but {len(lengths)} acceptance lengths recorded")
    return problems


def check_conv_state(rec: RecordedEvent) -> list[str]:
    """A carried-state check that says PASS re-derives from its own numbers (statemachine.checks)."""
    if not rec.payload["passed"]:
        return []
    why = conv_state_problem(parse_event(rec.type, rec.payload))
    return [f"says PASS but {why}"] if why else []


CHECKS: dict[str, Callable[..., list[str]]] = {
    "ConvStateChecked": check_conv_state,
    "KernelVerified": check_kernel,
    "TokenGateChecked": check_token_gate,
    "ReferenceBaselineRecorded": check_baseline,
    "OptimizationTried": check_optimisation,
    "SpeculationChecked": check_speculation,
}


# --- the stream audit -------------------------------------------------------------------------------------


def audit_stream(
    events: list[RecordedEvent],
    *,
    planned: list[tuple[str, dict]] | None,
    head_dim: int,
) -> list[Finding]:
    """Replay one deployment stream and re-derive every gate; pure (no I/O)."""

    findings: list[Finding] = []
    try:
        state = fold(events)
    except FoldError as e:
        findings.append(Finding("error", getattr(e, "seq", None), "replay", str(e)))
        state = None
    by_seq = {e.seq: e for e in events}
    declared_executor = state.executor if state else None
    attempt_start: dict[tuple[int, int], int] = {}
    for rec in events:
        p = rec.payload
        if rec.type == "PhaseStarted":
            attempt_start[(p["phase"], p["attempt"])] = rec.seq
            continue
        check = CHECKS.get(rec.type)
        problems = check(rec) if check else (check_block(rec, head_dim) if rec.type == "BlockValidated" else [])
        findings.extend(Finding("error", rec.seq, rec.type, msg) for msg in problems)
        claim = provenance_claim_problem(rec) or standin_on_disk(rec)
        if claim:
            findings.append(Finding("error", rec.seq, "provenance", f"{rec.type}: {claim}"))
        if rec.type == "TokenGateChecked" and declared_executor and p["executor"] != declared_executor:
            findings.append(Finding("error", rec.seq, "production-path",
                                    f"token gate ran on {p['executor']}, the deployment declares {declared_executor}"))
        if rec.type != "PhasePassed":
            continue
        phase, attempt = p["phase"], p["attempt"]
        start = attempt_start.get((phase, attempt))
        if start is None:
            findings.append(Finding("error", rec.seq, "evidence", f"PhasePassed({phase}) has no PhaseStarted for attempt {attempt}"))
            continue
        cited = [by_seq.get(s) for s in p["evidence_seqs"]]
        if any(c is None for c in cited):
            findings.append(Finding("error", rec.seq, "evidence", f"PhasePassed({phase}) cites seqs outside the stream"))
            cited = [c for c in cited if c is not None]
        outside = [c.seq for c in cited if not (start < c.seq < rec.seq)]
        if outside:
            findings.append(Finding("error", rec.seq, "evidence",
                                    f"PhasePassed({phase}) cites evidence {outside} not recorded inside its attempt"))
        types = {c.type for c in cited if start < c.seq < rec.seq}
        missing = [t for t in REQUIRED_EVIDENCE.get(phase, ()) if t not in types]
        if phase == 5 and state is not None and state.drafter and "SpeculationChecked" not in types:
            missing.append("SpeculationChecked")  # a declared drafter: speculation is judged in Phase 5
        if missing:
            findings.append(Finding("error", rec.seq, "evidence", f"PhasePassed({phase}) without {', '.join(missing)} evidence"))
        drills = [c.seq for c in cited if c.type == "TokenGateChecked" and c.payload.get("context", "").startswith("drill")]
        if drills:
            findings.append(Finding("error", rec.seq, "evidence", f"PhasePassed({phase}) cites gate drills {drills}"))
        failing = [c.seq for c in cited if _says_fail(c)]
        if failing and phase not in (4, 5):  # phases 4/5 may cite reverted optimisations
            findings.append(Finding("error", rec.seq, "evidence", f"PhasePassed({phase}) cites failing evidence {failing}"))
        if phase == 1 and planned is not None:
            findings.extend(_plan_coverage(rec, cited, planned))
    return findings


def provenance_claim_problem(rec: RecordedEvent) -> str | None:
    """A KernelVerified's or PerformanceMeasured's recorded `provenance_class` against the class its recorded facts
    give (npu_kernels.provenance): e.g. a stand-in row edited to claim npu2-measured, or a harness row that claims it
    without naming a device and a probed toolchain."""
    if rec.type == "KernelVerified":
        return claim_problem(rec.payload.get("provenance_class"), kernel_row_provenance(rec.payload))
    if rec.type == "PerformanceMeasured":
        return claim_problem(rec.payload.get("provenance_class"), perf_row_provenance(rec.payload))
    if rec.type == "ConvStateChecked" and rec.payload.get("provenance"):  # `make decode-gate` (an mlir-air run)
        return claim_problem(rec.payload.get("provenance_class"), run_provenance(rec.payload["provenance"]))
    return None


def standin_on_disk(rec: RecordedEvent) -> str | None:
    """A figure whose recorded facts make it npu2-measured, re-checked where it ran: its command (and timing run's)
    read again against this host's files (npu_kernels.mlir_air.checkout.where_it_ran from the recorded working
    directory). A stand-in there (a twin's marker, a stand-in model directory, a script calling the stand-in) is a
    finding: the recorded `ran` facts said otherwise. A row run on another host (its directory absent here) is judged
    on its recorded facts alone."""
    if rec.type not in ("KernelVerified", "PerformanceMeasured"):
        return None
    derived = kernel_row_provenance(rec.payload) if rec.type == "KernelVerified" else perf_row_provenance(rec.payload)
    facts = (dict(rec.payload.get("provenance") or {}) if rec.type == "KernelVerified"
             else perf_run_facts(rec.payload))
    if derived != NPU2_MEASURED or not facts.get("command"):
        return None
    cwd = (facts.get("ran") or {}).get("cwd")
    if not cwd or not Path(str(cwd)).is_dir():
        return None
    commands = [str(facts["command"])]
    latency = facts.get("latency_run") or {}
    if isinstance(latency, dict) and latency.get("command"):
        commands.append(str(latency["command"]))
    reasons = [hit["why"] for c in commands for hit in where_it_ran(c, cwd)["standin"]]
    if facts.get("mlir_air_dir") and Path(str(facts["mlir_air_dir"])).is_dir():
        reasons += standin_reasons(Path(str(facts["mlir_air_dir"])).resolve())
    if not reasons:
        return None
    return (f"recorded as {NPU2_MEASURED}, but its command ran in a stand-in as this host's files show: {reasons[0]} "
            "(the recorded `ran` facts do not say so)")


def _says_fail(rec: RecordedEvent) -> bool:
    p = rec.payload
    if rec.type == "KernelVerified":
        # a failed first try followed by a passing retry of the same shape is allowed
        return False
    if rec.type in ("BlockValidated", "TokenGateChecked", "ReferenceBaselineRecorded", "ConvStateChecked"):
        return not p["passed"]
    if rec.type == "WeightsChecked":
        return not p["ok"]
    return False


def artifact_rederived(p: dict) -> bool:
    """The documented near-zero atol artifact of a high-precision GEMM (`npu_kernels.thresholds.ATOL_ARTIFACT`),
    re-derived here from the row's own numbers: a handful of atol-dominated elements, error within 2x atol,
    mean_rel_L1 inside the NPU2 high-precision tier."""
    c = ATOL_ARTIFACT
    if p["verdict"] != "FAIL" or p["kernel"] != c["kernel"] or p["contract"] not in c["contracts"]:
        return False
    n, bad = p.get("n_elements") or 0, p.get("mismatches") or 0
    ref_max, err_max = p.get("mismatch_ref_max"), p.get("mismatch_err_max")
    return (bad > 0 and n > 0 and not p.get("nan_count") and _finite(p.get("mean_rel_L1"), ref_max, err_max)
            and bad <= c["max_mismatch_fraction"] * n and p["mean_rel_L1"] <= c["max_mean_rel_L1"]
            and ref_max <= p["atol"] / p["rtol"] and err_max <= c["max_err_over_atol"] * p["atol"])


def _plan_coverage(rec: RecordedEvent, cited: list[RecordedEvent], planned: list[tuple[str, dict]]) -> list[Finding]:
    latest: dict[tuple, str] = {}
    for c in cited:
        if c.type == "KernelVerified":
            verdict = c.payload["verdict"]
            if verdict == "FAIL" and artifact_rederived(c.payload):
                verdict = "PASS"  # accepted with its caveat
            elif verdict == "FAIL" and c.payload.get("caveat"):
                verdict = "FAIL (caveat claimed but not re-derivable)"
            latest[(c.payload["kernel"], _key(c.payload["shape"]))] = verdict
    findings = []
    for kernel, shape in planned:
        verdict = latest.get((kernel, _key(shape)))
        if verdict is None:
            findings.append(Finding("error", rec.seq, "plan-coverage",
                                    f"PhasePassed(1) but planned {kernel} {shape} has no KernelVerified"))
        elif verdict != "PASS":
            findings.append(Finding("error", rec.seq, "plan-coverage",
                                    f"PhasePassed(1) but the last verdict for {kernel} {shape} is {verdict}"))
    return findings


def _key(shape: dict) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in shape.items()))


def verdict_of(findings: list[Finding]) -> str:
    if any(f.severity == "error" for f in findings):
        return "FAIL"
    if any(f.severity == "warning" for f in findings):
        return "PASS-with-warnings"
    return "PASS"


def chain_findings(ledger: Ledger, checkpoint: str | None, stream_seqs: set[int], record=None) -> list[Finding]:
    """The chain check `ledger verify` makes (ledger.checkpoints.check_chain: the walk, the immutability
    triggers, `checkpoint` and every checkpoint the workspace's `record` holds of this ledger), as findings.

    A checkpoint the ledger no longer matches is a finding at the first seq of the range it bounds, naming the
    range and the checkpoint (which one, and where it is kept)."""

    report = check_chain(ledger, Checkpoint.parse(checkpoint) if checkpoint else None, record)
    findings = []
    for p in report.problems:
        if p.checkpoint is None:
            where = "this deployment's" if p.seq in stream_seqs else "another stream's"
            findings.append(Finding("error", p.seq, "hash-chain", f"ledger chain broken at {where} event: {p.reason}"))
        else:
            findings.append(Finding("error", p.seq, "checkpoint",
                                    f"{p.reason} (checked against {p.describe_checkpoint()})"))
    if report.trigger_reason:
        findings.append(Finding("error", None, "hash-chain", f"immutability not enforced: {report.trigger_reason}"))
    return findings
