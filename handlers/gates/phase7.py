"""Phase 7 — the independent evaluation, recorded as the last gate (see handlers.audit)."""

from __future__ import annotations

import subprocess
import sys

from handlers import audit
from handlers.gates import GateOutcome, GateRun
from ledger.canonical import loads
from ledger.events import EvaluationRecorded, TokenGateChecked


def evaluate(ctx: GateRun, checkpoint: str | None = None) -> tuple[list, EvaluationRecorded]:
    """Replay, re-derive and re-run; return the audit's TokenGateChecked events and its EvaluationRecorded."""
    from kernels.model.architecture import load_raw_config, resolve
    from kernels.model.plan import plan

    ledger, state = ctx.ledger, ctx.state
    events = ledger.read_stream(state.stream_id)
    ctx.progress(f"verifying the hash chain and replaying {len(events)} events of {state.name}")
    findings = audit.chain_findings(ledger, checkpoint, {e.seq for e in events})
    try:  # the plan is re-derived from config.json itself, not from what the ledger says the config was
        cfg = resolve(load_raw_config(ctx.model_path))
        planned = [(r.kernel, r.shape) for r in plan(cfg, target=state.target)]
    except Exception as e:  # noqa: BLE001 - an unreadable model folder is a finding, not a crash
        findings.append(audit.Finding("error", None, "model-folder", f"cannot re-derive the plan: {e}"))
        cfg, planned = ctx.config, None
    findings += audit.audit_stream(events, planned=planned, head_dim=cfg.head_dim)
    if state.config and any(state.config.get(k) != v for k, v in cfg.to_dict().items() if k in state.config):
        seq = next((e.seq for e in events if e.type == "ConfigResolved"), None)
        findings.append(audit.Finding("error", seq, "config", "ConfigResolved differs from config.json"))

    ctx.progress("re-running the Phase 3 token gate on the production pipeline")
    from handlers.gates.phase23 import token_gate_events
    from handlers.gates.runtime import model_backend

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
        elif (old.payload["passed"], old.payload["divergence_step"], old.payload["tokens_ours"]) != (
                g.passed, g.divergence_step, g.tokens_ours):
            severity = "error" if old.payload["passed"] != g.passed else "warning"
            findings.append(audit.Finding(severity, old.seq, "rerun",
                                          f"recorded Phase 3 result (divergence {old.payload['divergence_step']}) is not "
                                          f"reproduced by the re-run (divergence {g.divergence_step}) on the pipeline "
                                          f"as deployed {g.pipeline}"))
    verdict = audit.verdict_of(findings)
    remeasured = {"token_gate": [{"prompt_index": g.prompt_index, "passed": g.passed,
                                  "divergence_step": g.divergence_step, "agreed_prefix": g.agreed_prefix,
                                  "kl_divergence": g.kl_divergence} for g in rerun],
                  "events_replayed": len(events), "checkpoint": checkpoint or ""}
    report = f"llms/{state.name}/docs/evaluation_report.md"
    return rerun, EvaluationRecorded(verdict=verdict, findings=[f.to_json() for f in findings],
                                     remeasured=remeasured, report_path=report)


def evaluate_in_fresh_process(ctx: GateRun, checkpoint: str | None) -> tuple[list, EvaluationRecorded]:
    """Run `evaluate` in a new interpreter that sees only the ledger URL and the deployment name."""
    cmd = [sys.executable, "-m", "handlers.cli", "--db", ctx.ledger.url, "evaluate", ctx.state.name]
    if checkpoint:
        cmd += ["--against", checkpoint]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, cwd=str(ctx.workspace))
    if proc.returncode != 0:
        raise RuntimeError(f"the independent evaluator exited with status {proc.returncode}")
    out = loads(proc.stdout)
    return [TokenGateChecked(**p) for p in out["rerun"]], EvaluationRecorded(**out["evaluation"])


def run(ctx: GateRun) -> GateOutcome:
    rerun, evaluation = evaluate_in_fresh_process(ctx, ctx.options.get("checkpoint"))
    errors = [f["message"] for f in evaluation.findings if f["severity"] == "error"]
    return GateOutcome(events=[*rerun, evaluation], reasons=errors[:5],
                       summary=f"independent evaluation {evaluation.verdict} "
                               f"({len(evaluation.findings)} findings)")
