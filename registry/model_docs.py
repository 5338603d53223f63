"""Per-model progress docs, projected from one deployment's stream (`deployment:<name>`).

`project_model_docs(events, name)` returns {path: bytes} under `llms/<name>/`:

    TODO.md                                   phase checklist 0-7, active blockers + triage, resolved config
    docs/development_progress/progress.md     per-phase summary, blocker history, timeline
    docs/development_progress/phase_timing.md per attempt: start, end, wall minutes
    docs/development_progress/phase1_kernels.md   kernel x shape x verdict x mean_rel_L1 x tile x tiles
    docs/development_progress/phase2_block.md     BlockValidated + bisect tables
    docs/perf_history.md (+ perf_history.png)     TTFT, tokens/s and verify status per toolchain (registry.perf_history)
    docs/development_progress/phase3_full.md      token gate per prompt, per-layer cosine (+ PNG chart)
    docs/development_progress/phase3_layer_cosine.png   (only when LayerDiagnosed events exist)
    docs/development_progress/phase3_step_kl.png        (only when a Phase 3 token gate recorded its teacher-forced walk)
    docs/development_progress/phase4_prefill.md, phase5_decode.md   OptimizationTried + baselines
    docs/development_progress/phase6_finalize.md  TTFT, tokens/s, profile; the curves against prefill length and context
    docs/development_progress/phase6_curve.png    (only when the Phase 6 record has a curve: registry.curve_page)
    docs/development_progress/LESSONS.md          LessonRecorded
    docs/evaluation_report.md                     the latest EvaluationRecorded

Pure: a function of the events only (times come from `recorded_at`), byte-identical on every rebuild. A command
that folded the deployment's stream already hands its view over (`project_model_docs(events, name, folded)`,
registry.model_fold.DeploymentFold); it is used only while it is the stream `events` hold, so the bytes are those
of a rebuild from the events.
Machine paths are never written: a local model path is shown by its last component only.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timezone
from pathlib import PurePosixPath, PureWindowsPath
from typing import Sequence

from ledger.record import RecordedEvent
from registry.curve_page import CURVE_CHART
from registry.evaluation_page import render_evaluation
from registry.model_fold import DeploymentView, PhaseView, current, fold_deployment, show_time
from registry.model_pages import (
    CHART,
    ELF_CHART,
    KL_CHART,
    GLYPH,
    header,
    kernel_tally,
    render_lessons,
    render_optimisation,
    render_phase1,
    render_phase2,
    render_phase3,
    render_phase6,
    val,
)
from registry.perf_history import project_history
from registry.text import DASH, cell, fixed, ledger_command, num, table

PROGRESS = "docs/development_progress"
# every path under llms/<model>/ project_model_docs can write (registry.names derives the name bound from them)
DOC_FILES = (
    "TODO.md", *(f"{PROGRESS}/{f}" for f in (
        "progress.md", "phase_timing.md", "phase1_kernels.md", "phase2_block.md", "phase3_full.md",
        "phase4_prefill.md", "phase5_decode.md", "phase6_finalize.md", "LESSONS.md", CHART, KL_CHART, ELF_CHART,
        CURVE_CHART)),
    "docs/evaluation_report.md", "docs/perf_history.md", "docs/perf_history.png",
)
FOLDER_MAX = 240  # registry.names.MAX_NAME_LENGTH (255-byte components; <name>_cpu_helpers.py in its mlir-air folder)


def model_dir_name(name: str) -> str:
    """The directory under llms/ for a deployment (path separators and dot-only names made safe; a name too
    long for a folder, which `init` refuses now but older ledgers may hold, is cut and given its hash)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    safe = safe if safe.strip(".") else f"_{safe}"
    if len(safe) > FOLDER_MAX:
        safe = f"{safe[:FOLDER_MAX - 13]}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"
    return safe


def _model_label(v: DeploymentView) -> str:
    rec = v.latest("DeploymentRequested")
    if rec is None:
        return v.name
    e = rec.event
    if e.hf_model_id:
        return e.hf_model_id
    path = e.model_path.rstrip("/\\")
    return PureWindowsPath(path).name if "\\" in path else PurePosixPath(path).name


def _phase_line(p: PhaseView) -> str:
    box = "x" if p.status == "passed" else " "
    text = f"- [{box}] {p.phase}: {p.title} — {GLYPH[p.status]} {p.status}"
    if p.latest is not None:
        e = p.latest.event
        text += f" (attempt {e.attempt}, seq {p.latest.seq})"
        if p.latest.type == "PhasePassed" and e.summary:
            text += f": {cell(e.summary)}"
        if p.latest.type in ("PhaseFailed", "PhaseInconclusive") and e.reasons:
            text += ": " + "; ".join(cell(r) for r in e.reasons)
    return text


def _overall(v: DeploymentView) -> str:
    assessed = v.latest("ArchitectureAssessed")
    if assessed is not None and not assessed.event.in_scope:
        return "rejected (architecture out of scope)"
    evaluation = v.latest("EvaluationRecorded")
    if v.active_blockers or (evaluation is not None and evaluation.event.verdict == "FAIL"):
        return "needs human review"
    if v.phases[7].status == "passed":
        return "deployed"
    nxt = next((p for p in v.phases if p.status != "passed"), None)
    return f"phase {nxt.phase} ({nxt.title}) {nxt.status}" if nxt else "deployed"


def _triage_table(rec: RecordedEvent) -> str:
    e = rec.event
    rows = [[m.get("rule_id"), m.get("root_cause"), m.get("remedy"), val(m["confidence"]) if "confidence" in m else None]
            for m in e.matches]
    text = f"Latest triage (FailureTriaged seq {rec.seq}" + (f", of seq {e.subject_seq}" if e.subject_seq else "") + ")"
    text += f": {cell(e.summary)}\n\n" if e.summary else "\n\n"
    return text + (table(["rule", "root cause", "remedy", "confidence"], rows) if rows else "No rule matched.\n")


def render_todo(v: DeploymentView) -> str:
    parts = [header(v, "TODO.md"), f"# Deployment: {v.name}\n"]
    req = v.latest("DeploymentRequested")
    if req is not None:
        e = req.event
        parts.append(f"Model `{_model_label(v)}` · target {e.target} · dtype {e.dtype} · executor {e.executor}\n")
    parts.append(f"**Status**: {_overall(v)}\n")
    parts.append("## Phase status\n")
    lines = []
    for p in v.phases:
        line = _phase_line(p)
        if p.phase == 1 and p.status == "passed":
            ok, total = kernel_tally(v)
            line += f" ({ok}/{total} kernels PASSED)"
        lines.append(line)
    for rec in v.of("EvaluationRecorded"):
        lines.append(f"\nIndependently evaluated {show_time(rec.recorded_at)[:10]}: {rec.event.verdict} (seq {rec.seq})")
    parts.append("\n".join(lines) + "\n")
    parts.append("## Active blockers\n")
    blocks = []
    for b in v.active_blockers:
        r = b.raised
        blocks.append(f"- **Phase {r.event.phase}** (BlockerRaised seq {r.seq}, {show_time(r.recorded_at)}): "
                      f"{cell(r.event.reason)} — needs human review; `{ledger_command('resume', v.name)}` after the fix.\n")
    for p in v.failed_phases():
        e = p.latest.event
        text = f"### Phase {p.phase} ({p.title}) failed — attempt {e.attempt}, PhaseFailed seq {p.latest.seq}\n\n"
        text += "".join(f"- {cell(r)}\n" for r in e.reasons) + "\n"
        triage = v.triage_for_phase(p.phase)
        text += _triage_table(triage) if triage is not None else "No triage recorded.\n"
        blocks.append(text)
    parts.append("\n".join(blocks) if blocks else "(none)\n")
    evaluation = v.latest("EvaluationRecorded")
    warnings = [f for f in (evaluation.event.findings if evaluation else []) if f.get("severity") == "warning"]
    if warnings:
        parts.append(f"## Follow-ups (evaluation {evaluation.event.verdict}, EvaluationRecorded seq {evaluation.seq})\n")
        parts.append("".join("- [ ] " + (f"seq {f['seq']} " if f.get("seq") is not None else "")
                             + (f"[{f['check']}] " if f.get("check") else "") + f"{cell(f.get('message', ''))}\n"
                             for f in warnings))
    cfg = v.latest("ConfigResolved")
    parts.append("## Resolved config" + (f" (ConfigResolved seq {cfg.seq})\n" if cfg else "\n"))
    if cfg is None:
        parts.append("Not resolved yet (Phase 0 records it).\n")
    else:
        payload = cfg.event.to_payload()
        parts.append(table(["field", "value"], [[k, val(x)] for k, x in payload.items() if x != ""]))
    return "\n".join(parts)


def _phase_summary(v: DeploymentView, phase: int) -> str:
    """One paragraph per phase for progress.md, from the phase's own evidence."""
    if phase == 0:
        out = []
        cfg, weights, base = v.latest("ConfigResolved"), v.latest("WeightsChecked"), v.latest("ReferenceBaselineRecorded")
        if cfg:
            c = cfg.event
            out.append(f"Config (seq {cfg.seq}): {c.n_layers} layers, emb {c.emb_dim}, heads {c.n_heads}/{c.n_kv_heads} "
                       f"(q/kv), head_dim {c.head_dim}, hidden {c.hidden_dim}, vocab {c.vocab_size}, "
                       f"rope_theta {val(c.rope_theta)}, tied embeddings {val(c.tie_word_embeddings)}.")
        if weights:
            w = weights.event
            out.append(f"Weights (seq {weights.seq}): {w.n_tensors}/{w.expected} tensors, "
                       f"{'ok' if w.ok else 'NOT ok'}" + (f", missing {', '.join(w.missing)}" if w.missing else "") + ".")
        if base:
            b = base.event
            out.append(f"HF bf16 baseline (seq {base.seq}): top-1 {json.dumps(b.top1_text, ensure_ascii=False)} "
                       f"(id {b.top1_token}, p={fixed(b.top1_prob, 3)}), entropy {fixed(b.entropy, 3)}, logits "
                       f"{'finite' if b.logits_finite else 'NOT finite'}, {'PASS' if b.passed else 'FAIL'}.")
        return " ".join(out)
    if phase == 1:
        ok, total = kernel_tally(v)
        return f"{ok}/{total} kernel × shape × contract rows PASS (latest run each); see [phase1_kernels.md](phase1_kernels.md)." if total else ""
    if phase == 2:
        rec = v.latest("BlockValidated")
        if rec is None:
            return ""
        b = rec.event
        return (f"Layer {b.layer} block (seq {rec.seq}): cosine {fixed(b.cosine, 5)}, per-position min "
                f"{fixed(b.per_position_min, 5)}, {'PASS' if b.passed else 'FAIL'}"
                + (f", culprit {b.culprit}" if b.culprit else "") + "; see [phase2_block.md](phase2_block.md).")
    if phase == 3:
        gates = [r for r in v.of("TokenGateChecked") if r.event.context == "phase3"]
        if not gates:
            return ""
        ok = sum(1 for r in gates if r.event.passed)
        return f"Token gate: {ok}/{len(gates)} prompt checks pass; see [phase3_full.md](phase3_full.md)."
    if phase in (4, 5):
        opts = [r for r in v.of("OptimizationTried") if r.event.phase == phase]
        counts = {k: sum(1 for r in opts if r.event.outcome == k) for k in ("applied", "skipped", "reverted")}
        doc = "phase4_prefill.md" if phase == 4 else "phase5_decode.md"
        return (f"Optimisations: {counts['applied']} applied, {counts['skipped']} skipped, {counts['reverted']} "
                f"reverted; see [{doc}]({doc}).") if opts else ""
    if phase == 6:
        perf = [r for r in v.of("PerformanceMeasured") if r.event.phase == 6]
        if not perf:
            return ""
        p = perf[-1].event
        return (f"TTFT {fixed(p.ttft_s, 3) or DASH} s, {num(p.tokens_per_s) or DASH} tokens/s (seq {perf[-1].seq}); "
                "see [phase6_finalize.md](phase6_finalize.md).")
    rec = v.latest("EvaluationRecorded")
    return f"Evaluation verdict {rec.event.verdict} (seq {rec.seq}); see [evaluation_report.md](../evaluation_report.md)." if rec else ""


def render_progress(v: DeploymentView) -> str:
    parts = [header(v, "progress.md"), f"# Development progress — {v.name}\n"]
    req = v.latest("DeploymentRequested")
    if req is not None:
        e = req.event
        parts.append(f"Model `{_model_label(v)}`, target {e.target}, dtype {e.dtype}, executor {e.executor}. "
                     f"Status: {_overall(v)}.\n")
    assessed = v.latest("ArchitectureAssessed")
    if assessed is not None:
        a = assessed.event
        scope = "in scope" if a.in_scope else "OUT of scope"
        parts.append(f"Architecture `{a.architecture}` — {scope}" + (": " + "; ".join(a.reasons) if a.reasons else "")
                     + (f". Features: {val(dict(sorted(a.features.items())))}" if a.features else "") + ".\n")
    for p in v.phases:
        parts.append(f"## Phase {p.phase} — {p.title}: {GLYPH[p.status]} {p.status}\n")
        body = _phase_summary(v, p.phase)
        if p.latest is not None and p.latest.type == "PhasePassed" and p.latest.event.summary:
            body = (p.latest.event.summary + ("\n\n" + body if body else ""))
        parts.append((body or "No evidence recorded yet.") + "\n")
    if v.blockers:
        parts.append("## Blockers\n")
        rows = [[b.raised.seq, b.raised.event.phase, b.raised.event.reason,
                 f"seq {b.resolved_by.seq}: {b.resolved_by.event.note}" if b.resolved_by else "open"] for b in v.blockers]
        parts.append(table(["seq", "phase", "reason", "resolved by"], rows))
    lessons = v.of("LessonRecorded")
    parts.append(f"## Lessons\n\n{len(lessons)} recorded; see [LESSONS.md](LESSONS.md).\n")
    parts.append("## Timeline\n")
    kinds = ("DeploymentRequested", "PhaseStarted", "PhasePassed", "PhaseFailed", "PhaseInconclusive", "BlockerRaised",
             "DeploymentResumed", "FailureTriaged", "EvaluationRecorded")
    rows = []
    for rec in v.of(*kinds):
        e = rec.event
        detail = {"PhaseStarted": lambda: f"phase {e.phase} attempt {e.attempt}",
                  "PhasePassed": lambda: f"phase {e.phase} attempt {e.attempt}",
                  "PhaseFailed": lambda: f"phase {e.phase} attempt {e.attempt}: " + "; ".join(e.reasons),
                  "PhaseInconclusive": lambda: (f"phase {e.phase} attempt {e.attempt}, {e.tries} tries, no verdict: "
                                                + "; ".join(e.reasons)),
                  "BlockerRaised": lambda: f"phase {e.phase}: {e.reason}",
                  "DeploymentResumed": lambda: f"phase {e.phase}: {e.note}",
                  "FailureTriaged": lambda: f"of seq {e.subject_seq}: {e.summary}",
                  "EvaluationRecorded": lambda: e.verdict,
                  "DeploymentRequested": lambda: v.name}[rec.type]()
        rows.append([rec.seq, show_time(rec.recorded_at), rec.type, detail])
    parts.append(table(["seq", "recorded (UTC)", "event", "detail"], rows) if rows else "No phase events yet.\n")
    return "\n".join(parts)


def _epoch(t) -> str | None:
    return None if t is None else f"{t.timestamp():.0f} ({t.astimezone(timezone.utc).strftime('%H:%M:%S')}Z)"


def _npu_runtime_s(v: DeploymentView, a) -> float | None:
    """Sum of the device latencies of the attempt's harness rows (mlir-air only; None elsewhere)."""
    if a.started is None or a.ended is None:
        return None
    us = [r.event.latency_us for r in v.of("KernelVerified") if a.started.seq < r.seq < a.ended.seq
          and r.event.source == "harness" and r.event.latency_us is not None]
    return sum(us) / 1e6 if us else None


def render_timing(v: DeploymentView) -> str:
    """The playbook's per-phase wall-clock log: start/end (epoch and UTC), wall_min, the NPU parts, dev_min."""
    parts = [header(v, "phase_timing.md"), f"# {v.name} deployment — per-phase wall-clock log\n",
             "Each attempt runs from when its work began (`PhaseStarted.started_at`) to the `recorded_at` of the "
             "PhasePassed / PhaseFailed closing it. On the emulated and torch executors nothing is compiled for or "
             "run on an NPU, so npu_compile_min and npu_runtime_s are blank and dev_min is the wall time.\n"]
    first = next((a.start_time for p in v.phases for a in p.attempts if a.start_time), None)
    req = v.latest("DeploymentRequested")
    parts.append("## Baselines\n")
    parts.append(f"- Deployment requested: {show_time(req.recorded_at) if req else DASH}\n"
                 f"- First phase work began: {first.astimezone(timezone.utc).strftime('%Y-%m-%d %H:%M:%SZ') if first else DASH}\n")
    parts.append("## Phase log\n")
    rows, summary, legacy = [], [], False
    for p in v.phases:
        walls, runtimes = [], []
        for a in p.attempts:
            legacy = legacy or (a.started is not None and not a.start_recorded)
            runtime = _npu_runtime_s(v, a)
            if a.wall_minutes is not None:
                walls.append(a.wall_minutes)
            if runtime is not None:
                runtimes.append(runtime)
            rows.append([p.phase, p.title, a.attempt, _epoch(a.start_time), _epoch(a.end_time),
                         fixed(a.wall_minutes, 2), fixed(a.wall_minutes * 60, 1) if a.wall_minutes is not None else None,
                         a.outcome + ("" if a.start_recorded or a.started is None else " (start not recorded)"),
                         ", ".join(str(r.seq) for r in (a.started, a.ended) if r is not None)])
        if p.attempts:
            wall = sum(walls) if walls else None
            runtime = sum(runtimes) if runtimes else None
            dev = None if wall is None else wall - (runtime or 0.0) / 60.0
            summary.append([f"{p.phase}: {p.title}", fixed(wall, 2), None, fixed(runtime, 2), fixed(dev, 2),
                            f"{len(p.attempts)} attempt(s), {GLYPH[p.status]} {p.status}"])
    parts.append(table(["phase", "title", "attempt", "start_ts", "end_ts", "wall_min", "wall_s", "outcome", "seqs"], rows)
                 if rows else "No phase started yet.\n")
    if legacy:
        parts.append("Attempts marked \"start not recorded\" come from a ledger written before `started_at`: their "
                     "start is when PhaseStarted was recorded, together with the finished evidence, so their wall time "
                     "reads near zero.\n")
    if summary:
        parts.append("## Summary table\n")
        walls = [float(r[1]) for r in summary if r[1] is not None]
        summary.append(["**Total**", fixed(sum(walls), 2) if walls else None, None, None, None, ""])
        parts.append(table(["Phase", "wall_min", "npu_compile_min", "npu_runtime_s", "dev_min", "notes"], summary))
    return "\n".join(parts)


def project_model_docs(events: Sequence[RecordedEvent], name: str,
                       folded: DeploymentView | None = None) -> dict[str, bytes]:
    """Every doc of deployment `name`, keyed by path under `llms/<name>/`, sorted. `folded`: the deployment's view
    folded already by the command that appended to it (`registry.model_fold.DeploymentFold`, kept by the unit of
    work), used when `events` hold no record of its stream past the view's last (else the stream is folded from
    `events`, as a refresh from scratch does); the other inputs (the imported nightly rows) come from `events`."""
    v = folded if folded is not None and current(folded, events) else fold_deployment(events, name)
    phase3, charts = render_phase3(v)
    phase6, phase6_charts = render_phase6(v)
    docs = {
        "TODO.md": render_todo(v),
        f"{PROGRESS}/progress.md": render_progress(v),
        f"{PROGRESS}/phase_timing.md": render_timing(v),
        f"{PROGRESS}/phase1_kernels.md": render_phase1(v),
        f"{PROGRESS}/phase2_block.md": render_phase2(v),
        f"{PROGRESS}/phase3_full.md": phase3,
        f"{PROGRESS}/phase4_prefill.md": render_optimisation(v, 4),
        f"{PROGRESS}/phase5_decode.md": render_optimisation(v, 5),
        f"{PROGRESS}/phase6_finalize.md": phase6,
        f"{PROGRESS}/LESSONS.md": render_lessons(v),
        "docs/evaluation_report.md": render_evaluation(v),
    }
    out: dict[str, bytes] = {rel: text.encode("utf-8") for rel, text in docs.items()}
    out.update({f"{PROGRESS}/{file}": png for file, png in charts.items()})
    out.update({f"{PROGRESS}/{file}": png for file, png in phase6_charts.items()})
    out.update(project_history(events, name, model_dir_name(name), list(v.toolchains)))  # docs/perf_history.md (+ .png)
    prefix = f"llms/{model_dir_name(name)}/"
    return {prefix + rel: out[rel] for rel in sorted(out)}
