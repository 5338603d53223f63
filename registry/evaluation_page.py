"""The evaluation report of the per-model docs (docs/evaluation_report.md): the Phase 7 playbook's verdict,
yes/no audit lines, findings, re-measured numbers and how to reproduce them, from the deployment's
EvaluationRecorded events. Pure.
"""

from __future__ import annotations

import shlex
from typing import Any

from npu_kernels.provenance import NPU2_MEASURED, STANDIN_REHEARSAL, kernel_row_provenance
from registry.model_fold import DeploymentView, show_time
from registry.model_pages import header, val
from registry.quantisation_page import render_split
from registry.text import DASH, fixed, ledger_command, sci, table
from ledger.streams import deployment_stream


# which audit line a finding's check speaks to (any other check is a gate re-derivation)
AUDIT_LINES = (
    ("Hash chain intact", ("hash-chain",)),
    ("Every gate re-derived from all of its attempt's evidence (figures, counts, digest binding)", ()),
    ("Gate code path real and driving the production runner", ("production-path", "pipeline-options")),
    ("Re-measured sample agrees (model digest, Phase 1 rows, block gate, token gate)",
     ("model-digest", "remeasure-kernel", "remeasure-block", "rerun", "quantisation")),
)


def _line_of(check: str) -> int:
    for i, (_, checks) in enumerate(AUDIT_LINES):
        if check in checks:
            return i
    return 1


def audit_lines(findings: list[dict]) -> list[tuple[str, bool, list[dict]]]:
    """(line, holds, its error findings) for the playbook's yes/no audit lines."""
    errors: dict[int, list[dict]] = {}
    for f in findings:
        if f.get("severity") == "error":
            errors.setdefault(_line_of(str(f.get("check", ""))), []).append(f)
    return [(text, not errors.get(i), errors.get(i, [])) for i, (text, _) in enumerate(AUDIT_LINES)]


def _remeasured_tables(r: dict) -> list[str]:
    out = []
    digest = r.get("model_digest") or {}
    if digest:
        out.append("### Model digest (config.json and every weight file)\n")
        same = digest.get("recorded") == digest.get("now")
        out.append(table(["", "digest", "seq"], [
            ["recorded by Phase 0", (digest.get("recorded") or DASH)[:16], digest.get("recorded_seq")],
            ["re-hashed now", (digest.get("now") or DASH)[:16], "agrees" if same else "DIFFERS"]]))
        files = digest.get("files") or {}
        if files:
            out.append(table(["file", "sha256 now"], [[n, h[:16]] for n, h in sorted(files.items())]))
    sample = r.get("kernel_sample") or []
    if sample and isinstance(sample, list):
        meta, rows = sample[0], sample[1:]
        out.append(f"### Phase 1 rows re-measured ({len(rows)} of {meta.get('of_rows')}, seed {meta.get('seed')} from "
                   f"head hash {str(meta.get('head_hash'))[:16]})\n")
        out.append(table(["seq", "kernel", "shape", "contract", "verdict (recorded / now)", "mean_rel_L1 recorded",
                          "mean_rel_L1 now", "rel. diff", "BLAS threads", "agrees"],
                         [[x["seq"], x["kernel"], x["shape"], x["contract"],
                           f"{x['verdict_recorded']} / {x['verdict_remeasured']}", sci(x["mean_rel_L1_recorded"], 6),
                           sci(x["mean_rel_L1_remeasured"], 6), sci(x["relative_difference"], 2),
                           f"{x.get('blas_threads_recorded')} / {x.get('blas_threads_remeasured')}",
                           "yes" if x["agrees"] else "NO"] for x in rows]))
    block = r.get("block_gate") or {}
    if block:
        out.append("### Phase 2 block gate re-measured\n")
        out.append(table(["seq", "", "cosine", "per-position min", "verdict"], [
            [block["seq"], "recorded", fixed(block["cosine_recorded"], 6), fixed(block["per_position_min_recorded"], 6),
             "PASS" if block["passed_recorded"] else "FAIL"],
            [block["seq"], "re-measured", fixed(block["cosine_remeasured"], 6),
             fixed(block["per_position_min_remeasured"], 6), "PASS" if block["passed_remeasured"] else "FAIL"]]))
    gates = r.get("token_gate") or []
    if gates and isinstance(gates, list):
        out.append("### Token gate re-run (production pipeline)\n")
        out.append(table(["prompt #", "verdict", "divergence step (now / recorded)", "agreed prefix", "KL", "recorded seq"],
                         [[g["prompt_index"], "PASS" if g["passed"] else "FAIL",
                           f"{g['divergence_step'] if g['divergence_step'] is not None else 'none'} / "
                           f"{g.get('recorded_divergence_step') if g.get('recorded_divergence_step') is not None else 'none'}",
                           g["agreed_prefix"], sci(g.get("kl_divergence")), g.get("recorded_seq")] for g in gates]))
    known = ("model_digest", "kernel_sample", "block_gate", "token_gate")
    other = [[k, val(x)] for k, x in _flatten({k: x for k, x in r.items()
                                              if k not in known or not isinstance(x, (list, dict))
                                              or (k == "token_gate" and isinstance(x, dict))}) if x not in (None, "")]
    if other:
        out.append("### Context\n")
        out.append(table(["item", "value"], other))
    return out


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k in sorted(d):
        if isinstance(d[k], dict) and d[k]:
            out += _flatten(d[k], f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", d[k]))
    return out


def ran_on(v: DeploymentView) -> str:
    """What the deployment ran on, for the report's title: the executor it was initialised with, and for mlir-air
    whether its rows came from NPU2 or a stand-in checkout (`ledger twin`); never "NPU2" for a CPU run."""
    rec = v.latest("DeploymentRequested")
    executor = rec.event.executor if rec is not None else "emulated"
    target = (rec.event.target if rec is not None else "npu2").upper()
    if executor == "emulated":
        return f"the CPU emulator of {target} (executor emulated; times modelled, not measured)"
    if executor != "mlir-air":
        return f"the CPU (executor {executor}; {target} times modelled, not measured)"
    kinds = {kernel_row_provenance(r.event.model_dump()) for r in v.of("KernelVerified")}
    if STANDIN_REHEARSAL in kinds:
        return f"a stand-in mlir-air checkout (`ledger twin`: emulated numerics, modelled time), rehearsing {target}"
    if kinds and kinds <= {NPU2_MEASURED}:
        return f"{target} through mlir-air"
    return f"mlir-air (executor mlir-air; rows {', '.join(sorted(kinds)) or 'none yet'})"


def render_evaluation(v: DeploymentView) -> str:
    """The Phase 7 playbook's report: verdict, yes/no audit lines, findings, re-measured numbers, how to reproduce."""
    parts = [header(v, "evaluation_report.md"), f"# Evaluation Report: {v.name} on {ran_on(v)}\n"]
    evals = v.of("EvaluationRecorded")
    if not evals:
        parts.append("## Verdict: not evaluated yet\n\nPhase 7 (independent evaluation) has not recorded a verdict.\n")
    else:
        rec = evals[-1]
        e = rec.event
        parts.append(f"## Verdict: {e.verdict}  ({show_time(rec.recorded_at)[:10]}, EvaluationRecorded seq {rec.seq})\n")
        parts.append("The evaluator, in a fresh process, replays the ledger from nothing, re-judges every attempt with "
                     "the gates' own predicates on all of its evidence, re-derives each figure from its samples, "
                     "re-hashes the model folder, and re-measures on the deployment's executor: a sample of Phase 1 "
                     "rows chosen from the ledger's head hash, the block gate and the token gate.\n")
        parts.append("## 1. Audit\n")
        parts.append("\n".join(f"- **{'yes' if ok else 'NO'}** — {text}"
                               + (f" ({len(errs)} finding(s), first seq {errs[0].get('seq')})" if errs else "")
                               for text, ok, errs in audit_lines(e.findings)) + "\n")
        parts.append("## 2. Findings\n")
        rows = [[f.get("severity"), f.get("seq"), f.get("check"), f.get("message")] for f in e.findings]
        parts.append(table(["severity", "seq", "check", "finding"], rows) if rows else "No findings.\n")
        split = render_split(v)
        if split:
            parts.append(split)
        parts.append("## 3. Re-measured numbers\n")
        tables = _remeasured_tables(e.remeasured)
        parts.append("\n".join(tables) if tables else "None recorded.\n")
        if len(evals) > 1:
            parts.append("## Earlier evaluations\n")
            parts.append(table(["seq", "date", "verdict", "findings"],
                               [[r.seq, show_time(r.recorded_at)[:10], r.event.verdict, len(r.event.findings)] for r in evals[:-1]]))
    parts.append(f"## {4 if evals else 1}. How to reproduce\n")
    parts.append("```bash\n"
                 "# the hash chain is intact (a non-zero exit names the first bad seq)\n"
                 "ledger verify\n"
                 "# every event the verdicts rest on\n"
                 f"ledger log --stream {shlex.quote(deployment_stream(v.name))}\n"
                 "# the independent evaluator again: replay, re-judge, re-hash, re-measure (a new head hash draws a new sample)\n"
                 f"{ledger_command('audit', v.name)}\n"
                 "# the docs on disk equal the projection of the ledger (no hand edits)\n"
                 "ledger registry build --check\n"
                 "```\n")
    return "\n".join(parts)
