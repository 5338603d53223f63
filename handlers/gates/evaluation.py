"""Phase 7 — the independent evaluation, recorded as the last gate (see handlers.evaluator.audit, handlers.evaluator.replay,
handlers.evaluator.remeasure). It runs in a fresh process with the BLAS thread count of the Phase 1 rows pinned."""

from __future__ import annotations

import subprocess
import threading
from collections import Counter
from dataclasses import replace

from handlers.evaluator import audit, remeasure
from handlers.evaluator import replay as audit_replay
from handlers.evaluator.plan_sources import plan_source_findings
from handlers.evaluator.quantised import check_budget, quantisation_findings
from handlers.gates import GateOutcome, GateRun
from handlers.gates.block_and_tokens import token_gate_events
from handlers.gates.runtime import declared_options, model_backend
from handlers.lifeline import child_env
from handlers import narrate
from handlers.narrate import relay_progress
from npu_kernels.settings import evaluator_python
from handlers.planning import deployment_weights, recorded_sources
from handlers.evaluator.remeasure import phase1_rows
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.digest import model_digest
from npu_kernels.model.plan import plan
from npu_kernels.model.reference_walks import CACHE_ENV as REFERENCE_STORE_ENV
from npu_kernels.numerics.run import BLAS_THREAD_VARS
from ledger.canonical import loads
from ledger.events import EvaluationRecorded, TokenGateChecked
from registry.text import shown


def evaluate(ctx: GateRun, checkpoint: str | None = None, record=None) -> tuple[list, EvaluationRecorded]:
    """Replay, re-judge, re-derive, re-hash and re-measure; return the audit's TokenGateChecked events and
    its EvaluationRecorded (see handlers.evaluator.audit, handlers.evaluator.replay, handlers.evaluator.remeasure).

    The chain is checked as `ledger verify` checks it: `checkpoint` (--against) and every checkpoint the
    workspace's `record` (ledger.checkpoints.CheckpointRecord) holds of this ledger."""
    ledger, state = ctx.ledger, ctx.state
    events = ledger.read_stream(state.stream_id)
    narrate.report(f"verifying the hash chain and replaying {len(events)} events of {shown(state.name)}")
    findings = audit.chain_findings(ledger, checkpoint, {e.seq for e in events}, record)
    head = ledger.head()  # the sample seed: unknown to whoever wrote the evidence
    try:  # the plan is re-derived from config.json itself, not from what the ledger says the config was
        cfg = resolve(load_raw_config(ctx.model_path))
        if state.config and "max_positions" not in state.config:  # recorded before the context window bounded plans
            cfg = replace(cfg, max_positions=None)
        planned = [(r.kernel, r.shape) for r in plan(cfg, target=state.target, weights=deployment_weights(state))]
    except Exception as e:  # noqa: BLE001 - an unreadable model folder is a finding, not a crash
        findings.append(audit.Finding("error", None, "model-folder", f"cannot re-derive the plan: {e}"))
        cfg, planned = ctx.config, None
    findings += audit.audit_stream(events, planned=planned, head_dim=cfg.head_dim)
    if state.config and any(state.config.get(k) != v for k, v in cfg.to_dict().items() if k in state.config):
        seq = next((e.seq for e in events if e.type == "ConfigResolved"), None)
        findings.append(audit.Finding("error", seq, "config", "ConfigResolved differs from config.json"))

    narrate.report("re-hashing the model folder; re-judging every attempt on all of its evidence")
    try:
        now, digest_error = model_digest(ctx.model_path), None
    except Exception as e:  # noqa: BLE001 - reported as a finding
        now, digest_error = None, str(e)
    states = audit_replay.replay_states(events)
    findings += audit_replay.digest_findings(state, events, now, digest_error)
    findings += audit_replay.rejudge_attempts(events, states, planned)
    findings += audit_replay.figure_findings(events, states)
    findings += audit_replay.gate_evidence_findings(events, states)
    findings += plan_source_findings(events, ledger.read_all(), cfg, state.target, deployment_weights(state))
    findings += quantisation_findings(state, events, cfg)
    findings += [audit.Finding("error", e.seq, e.type, msg) for e in events if e.type == "QuantisationBudgetMeasured"
                 for msg in check_budget(e)]
    bound = not any(f.check in ("model-digest", "quantisation") for f in findings)

    kernel_rows, block_row, rerun = [], None, []
    if bound:  # re-measuring a folder that is not the deployment's model would compare other weights
        narrate.report("re-measuring a sample of Phase 1 rows chosen by the ledger's head hash")
        passed1 = state.passed.get(1)
        found, kernel_rows = remeasure.kernel_sample(state, cfg, head.hash, sources=recorded_sources(
            events, passed1.attempt) if passed1 else None)
        findings += found
        found, block_row = remeasure.block_gate(state, cfg, events)
        findings += found
        narrate.report("re-running the Phase 3 token gate on the production pipeline")
        rerun, found = _rerun_token_gate(ctx, state, cfg, events)
        findings += found
    verdict = audit.verdict_of(findings)
    recorded = {e.payload["prompt_index"]: e for e in events
                if e.type == "TokenGateChecked" and e.payload.get("context") == "phase3"}
    remeasured = {
        "token_gate": [{"prompt_index": g.prompt_index, "passed": g.passed, "divergence_step": g.divergence_step,
                        "agreed_prefix": g.agreed_prefix, "kl_divergence": g.kl_divergence,
                        "recorded_seq": recorded[g.prompt_index].seq if g.prompt_index in recorded else None,
                        "recorded_divergence_step": recorded[g.prompt_index].payload["divergence_step"]
                        if g.prompt_index in recorded else None} for g in rerun],
        "kernel_sample": kernel_rows,
        "block_gate": block_row or {},
        "model_digest": {"recorded": state.digest.event.digest if state.digest else "",
                         "recorded_seq": state.digest.seq if state.digest else None,
                         "now": now.digest if now else "", "files": now.files if now else {}},
        "events_replayed": len(events), "checkpoint": checkpoint or "", "head": str(head),
        "executor": state.executor, "pipeline": _pipeline_text(state),
    }
    report = f"llms/{state.name}/docs/evaluation_report.md"
    return rerun, EvaluationRecorded(verdict=verdict, findings=[f.to_json() for f in findings],
                                     remeasured=remeasured, report_path=report)


def _pipeline_text(state) -> dict:
    """The switches and faults the deployment declares (what the audit re-ran it with)."""
    switches, faults = declared_options(state)
    return {"switches": dict(sorted(switches.items())), "faults": sorted(faults)}


def _rerun_token_gate(ctx: GateRun, state, cfg, events) -> tuple[list, list]:
    """The Phase 3 token gate re-run on the production pipeline, compared prompt by prompt with the record."""
    findings = []
    try:
        rerun = token_gate_events(ctx, model_backend(state, cfg), "audit", full=False)
    except Exception as e:  # noqa: BLE001 - a model that cannot even run (a missing tensor) is a FAIL, recorded
        line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        findings.append(audit.Finding("error", None, "rerun", f"cannot re-run the token gate: {line}"))
        rerun = []
    recorded = {e.payload["prompt_index"]: e for e in events
                if e.type == "TokenGateChecked" and e.payload.get("context") == "phase3"}
    for g in rerun:
        if not g.passed:
            findings.append(audit.Finding("error", None, "rerun", f"re-run token gate FAILS on prompt {g.prompt_index}"))
        old = recorded.get(g.prompt_index)
        if old is None:
            findings.append(audit.Finding("error", None, "rerun", f"no Phase 3 record for prompt {g.prompt_index}"))
            continue
        if old.payload["prompt"] != g.prompt:
            findings.append(audit.Finding("error", old.seq, "rerun",
                                          f"TokenGateChecked seq {old.seq} records prompt {old.payload['prompt']!r}; "
                                          f"prompt {g.prompt_index} of the gate is {g.prompt!r}"))
        if old.payload["tokens_ref"] != g.tokens_ref:
            findings.append(audit.Finding("error", old.seq, "rerun",
                                          f"TokenGateChecked seq {old.seq}: the HF reference decodes other tokens "
                                          f"now ({g.tokens_ref[:6]}... vs recorded {old.payload['tokens_ref'][:6]}...): "
                                          "the evidence was measured on another model or prompt"))
        elif (old.payload["passed"], old.payload["divergence_step"], old.payload["tokens_ours"]) != (
                g.passed, g.divergence_step, g.tokens_ours):
            severity = "error" if old.payload["passed"] != g.passed else "warning"
            findings.append(audit.Finding(severity, old.seq, "rerun",
                                          f"recorded Phase 3 result (divergence {old.payload['divergence_step']}) is not "
                                          f"reproduced by the re-run (divergence {g.divergence_step}) on the pipeline "
                                          f"as deployed {g.pipeline}"))
    return rerun, findings


def evaluate_in_fresh_process(ctx: GateRun, checkpoint: str | None) -> tuple[list, EvaluationRecorded]:
    """Run `evaluate` in a new interpreter that sees only the ledger URL and the deployment name."""
    cmd = [evaluator_python(), "-m", "handlers.cli", "--workspace", str(ctx.workspace), "--db", ctx.ledger.url,
           "evaluate", *(["--against", checkpoint] if checkpoint else []), "--", ctx.state.name]  # `--`: a name
    # such as `--help` is the argument, never an option
    env = child_env()  # the evaluator dies with this process (handlers.lifeline)
    env.pop(REFERENCE_STORE_ENV, None)  # it walks its reference itself, never from a store the deployment wrote to
    threads = Counter(ev.event.provenance.get("blas_threads") for ev in phase1_rows(ctx.state))
    threads.pop(None, None)
    if threads:  # pin the BLAS thread count the Phase 1 rows were measured at (fp32 accumulation order)
        env.update({var: str(threads.most_common(1)[0][0]) for var in BLAS_THREAD_VARS})
    # its progress comes back on its stderr (ProgressLines) and goes to this run's progress (the terminal's bars, or
    # an MCP client's notifications, which must be sent from this thread); its stdout, the evidence, is collected on
    # a thread meanwhile, so neither pipe can fill while the other is read
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ctx.workspace),
                            env=env)
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    relay_progress(proc.stderr)
    returncode = proc.wait()
    reader.join()
    stdout = "".join(chunks)
    if returncode != 0:
        raise RuntimeError(f"the independent evaluator exited with status {returncode}")
    out = loads(stdout)
    return [TokenGateChecked(**p) for p in out["rerun"]], EvaluationRecorded(**out["evaluation"])


def run(ctx: GateRun) -> GateOutcome:
    rerun, evaluation = evaluate_in_fresh_process(ctx, ctx.options.checkpoint)
    errors = [f["message"] for f in evaluation.findings if f["severity"] == "error"]
    return GateOutcome(events=[*rerun, evaluation], reasons=errors[:5],
                       summary=f"independent evaluation {evaluation.verdict} "
                               f"({len(evaluation.findings)} findings)")
