"""The phase pages of the per-model docs (phases 1-6, lessons) and their shared helpers (the evaluation
report is `registry.evaluation_page`).

Each `render_*` takes a `DeploymentView` (registry.model_fold) and returns markdown text; `render_phase3`
also returns its charts' PNG bytes by file name (the per-layer cosine chart when a layer was diagnosed, the
per-step teacher-forced KL chart when a Phase 3 token gate recorded its walk). Pure.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

from npu_kernels.provenance import CPU_EMULATOR, LABELS, MODELLED_NPU2, SHORT, kernel_row_provenance, perf_row_provenance
from ledger.record import RecordedEvent
from registry.catalog import shape_key, spec_for
from registry.chart import elf_breakdown_png, layer_cosine_png, step_kl_png
from registry.conv_state_page import conv_state_parts
from registry.curve_page import CURVE_CHART, curve_section
from registry.model_fold import PHASE_TITLES, DeploymentView, show_time
from registry.perf_records import RecordedFigures, Profile
from registry.quantisation_page import render_split
from registry.render_markdown import tile_text
from registry.text import cell, fixed, num, sci, shape_args, table

GLYPH = {"passed": "✅", "failed": "❌", "inconclusive": "❔", "in progress": "⏳", "pending": "⏳"}
CHART = "phase3_layer_cosine.png"
ELF_CHART = "phase6_npu2_breakdown.png"
KL_CHART = "phase3_step_kl.png"


def val(v: Any) -> str:
    """A payload value as table text: booleans lower-case, small/huge/non-finite floats in `1e-5` style."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if not math.isfinite(v) or (v != 0 and not 1e-3 <= abs(v) < 1e7):
            return sci(v, 3)
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(val(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, default=str)
    return str(v)


def header(v: DeploymentView, what: str) -> str:
    last = v.events[-1].seq if v.events else 0
    return (
        f"<!-- {what}: projected by npu-ledger from stream `{v.stream_id}` ({len(v.events)} events, seq <= "
        f"{last}). Do not edit by hand: `ledger registry build` rewrites it. -->\n"
    )


def kernel_groups(v: DeploymentView) -> list[list[RecordedEvent]]:
    """KernelVerified runs grouped by (kernel page, shape, contract), first-seen order."""
    groups: dict[tuple, list[RecordedEvent]] = {}
    for rec in v.of("KernelVerified"):
        e = rec.event
        spec = spec_for(e.kernel, e.contract)
        groups.setdefault((spec.key, shape_key(spec, e.shape), e.contract), []).append(rec)
    return list(groups.values())


def kernel_tally(v: DeploymentView) -> tuple[int, int]:
    latest = [g[-1] for g in kernel_groups(v)]
    return sum(1 for r in latest if r.event.verdict == "PASS"), len(latest)


def _tiles(e) -> str | None:
    if e.tiles_in_flight is None:
        return None
    text = f"{e.tiles_in_flight}/{e.tiles_target}" if e.tiles_target is not None else str(e.tiles_in_flight)
    return text + (f" — {e.tile_justification}" if e.tile_justification else "")


def _tile(tile: dict) -> str | None:
    return tile_text(tile)


def _kernel_notes(v: DeploymentView, rec: RecordedEvent) -> str:
    e = rec.event
    notes = [e.note] if e.note else []
    tri = v.triage_by_subject.get(rec.seq)
    if tri is not None:
        for m in tri.event.matches:
            notes.append(f"triage seq {tri.seq}: {m.get('rule_id', '?')}: {m.get('root_cause', '')} → {m.get('remedy', '')}")
        if not tri.event.matches and tri.event.summary:
            notes.append(f"triage seq {tri.seq}: {tri.event.summary}")
    return "; ".join(notes)


def render_phase1(v: DeploymentView) -> str:
    parts = [header(v, "phase1_kernels.md"), f"# Phase 1 — Kernel Validation — {v.name}\n"]
    groups = kernel_groups(v)
    if not groups:
        return "\n".join(parts + ["No KernelVerified recorded yet.\n"])
    ok, total = kernel_tally(v)
    parts.append(f"{ok}/{total} kernel × shape × contract rows PASS (latest run of each). A row passes when every "
                 "output element satisfies `|out - ref| <= atol + rtol * |ref|`.\n")
    rows = []
    for g in groups:
        rec = g[-1]
        e = rec.event
        rows.append([e.kernel, shape_args(shape_key(spec_for(e.kernel, e.contract), e.shape)), e.contract, e.role,
                     e.stage, e.verdict, sci(e.mean_rel_L1), sci(e.max_abs), _tile(e.tile), _tiles(e), e.executor,
                     SHORT[kernel_row_provenance(e.model_dump())], len(g), rec.seq, _kernel_notes(v, rec)])
    parts.append(table(["kernel", "shape", "contract", "role", "stage", "verdict", "mean_rel_L1", "max_abs", "tile",
                        "tiles in flight", "executor", "provenance", "runs", "seq", "notes"], rows))
    parts.append("## Every run\n")
    rows = []
    for rec in v.of("KernelVerified"):
        e = rec.event
        mism = f"{e.mismatches}/{e.n_elements}" if e.mismatches is not None and e.n_elements else e.mismatches
        rows.append([rec.seq, show_time(rec.recorded_at), e.kernel, shape_args(shape_key(spec_for(e.kernel, e.contract), e.shape)),
                     e.contract, e.executor, SHORT[kernel_row_provenance(e.model_dump())], e.verdict,
                     sci(e.mean_rel_L1), sci(e.max_abs), sci(e.max_rel),
                     mism, f"{sci(e.rtol)} / {sci(e.atol)}", fixed(e.latency_us, 1), num(e.gflops)])
    parts.append("Latency and GFLOP/s are NPU2 figures only where the provenance says measured NPU2 (a stand-in "
                 "rehearsal prints the performance model's figures).\n")
    parts.append(table(["seq", "recorded (UTC)", "kernel", "shape", "contract", "executor", "provenance", "verdict",
                        "mean_rel_L1", "max_abs", "max_rel", "mismatches", "rtol / atol", "latency (µs)", "GFLOP/s"], rows))
    return "\n".join(parts)


def render_phase2(v: DeploymentView) -> str:
    parts = [header(v, "phase2_block.md"), f"# Phase 2 — Single-Block Validation — {v.name}\n"]
    blocks = v.of("BlockValidated")
    if not blocks:
        return "\n".join(parts + ["No BlockValidated recorded yet.\n"])
    rows = []
    for rec in blocks:
        b = rec.event
        th = ", ".join(f"{k} ≥ {val(b.thresholds[k])}" for k in sorted(b.thresholds))
        rows.append([rec.seq, b.layer, b.executor, b.n_positions, fixed(b.cosine, 5), fixed(b.per_position_min, 5),
                     fixed(b.p5, 5), fixed(b.median, 5), sci(b.max_abs), sci(b.max_rel), b.nan_count, th,
                     "PASS" if b.passed else "FAIL"])
    parts.append(table(["seq", "layer", "executor", "positions", "cosine", "per-position min", "p5", "median",
                        "max_abs", "max_rel", "NaN", "thresholds", "verdict"], rows))
    for rec in blocks:
        b = rec.event
        if not b.bisect:
            continue
        parts.append(f"## Bisect of seq {rec.seq} (layer {b.layer})\n")
        parts.append("Kernels swapped to their FP32 CPU versions one at a time, in block order; the first swap that "
                     "clears the thresholds names the culprit.\n")
        brows = []
        for i, step in enumerate(b.bisect, start=1):
            swapped = step.get("swapped", [])
            brows.append([i, ", ".join(swapped) if isinstance(swapped, list) else swapped,
                          fixed(step.get("cosine"), 5), fixed(step.get("per_position_min"), 5),
                          val(step["passed"]) if "passed" in step else None])
        parts.append(table(["step", "swapped to FP32", "cosine", "per-position min", "clears"], brows))
        parts.append(f"Culprit: **{b.culprit}**\n" if b.culprit else "Culprit: none found.\n")
    return "\n".join(parts + conv_state_parts(v))


def _layer_rows(v: DeploymentView) -> dict[int, dict[int, RecordedEvent]]:
    """prompt index -> layer -> latest LayerDiagnosed."""
    out: dict[int, dict[int, RecordedEvent]] = {}
    for rec in v.of("LayerDiagnosed"):
        out.setdefault(rec.event.prompt_index, {})[rec.event.layer] = rec
    return {p: dict(sorted(out[p].items())) for p in sorted(out)}


def _is_drill(g) -> bool:
    return g.context.startswith("drill")


def _walk_cells(g) -> list[Any]:
    """first-divergence verdict, teacher-forced verdict, KL max / mean, inclusion, PPL ratio of one gate."""
    if not g.tf_steps:
        return [None] * 6
    kls = g.tf_kl_per_step or [float("nan")]
    incl = sum(1 for o, r in zip(g.tf_topk_ours, g.tf_topk_ref) if o and r and o[0] in r and r[0] in o)
    return ["PASS" if g.first_divergence_passed else "FAIL", "PASS" if g.tf_passed else "FAIL", sci(max(kls)),
            sci(sum(kls) / len(kls)), f"{incl}/{g.tf_steps}", fixed(g.tf_ppl_ratio, 4)]


def _latest_phase3_walks(gates: Sequence[RecordedEvent]) -> dict[int, RecordedEvent]:
    """prompt index -> the latest Phase 3 TokenGateChecked that recorded a teacher-forced walk."""
    out: dict[int, RecordedEvent] = {}
    for rec in gates:
        if rec.event.context == "phase3" and rec.event.tf_steps:
            out[rec.event.prompt_index] = rec
    return dict(sorted(out.items()))


def render_phase3(v: DeploymentView) -> tuple[str, dict[str, bytes]]:
    parts = [header(v, "phase3_full.md"), f"# Phase 3 — Full-Model Validation — {v.name}\n", "## Token gate\n",
             "Two walks per prompt. First divergence (vLLM's check, what mlir-air's `make verify` decides): greedy "
             "decode on both sides, top-5 kept per step; at the first divergence each side's chosen token must be in "
             "the other's top-5. Teacher-forced: both sides are fed the reference's greedy tokens for every step; at "
             "every step each side's argmax must be in the other's top-5, and the per-step KL(reference || ours) and "
             "the perplexity ratio of the reference continuation must stay under the recorded thresholds. A prompt "
             "passes when both walks do.\n"]
    split = render_split(v)  # a 4-bit deployment: the implementation's figures beside the quantisation's
    if split:
        parts.append(split)
    all_gates = v.of("TokenGateChecked")
    gates = [r for r in all_gates if not _is_drill(r.event)]
    drills = [r for r in all_gates if _is_drill(r.event)]
    charts: dict[str, bytes] = {}
    rows = []
    for rec in gates:
        g = rec.event
        rows.append([rec.seq, g.context, g.prompt_index, g.prompt, g.executor, g.n_tokens, "PASS" if g.passed else "FAIL",
                     g.divergence_step if g.divergence_step is not None else "none", g.agreed_prefix,
                     f"{g.chosen_ours} (#{g.rank_ours_in_ref if g.rank_ours_in_ref is not None else 'absent'})"
                     if g.chosen_ours is not None else None,
                     f"{g.chosen_ref} (#{g.rank_ref_in_ours if g.rank_ref_in_ours is not None else 'absent'})"
                     if g.chosen_ref is not None else None,
                     val(g.topk_ours) if g.topk_ours else None, val(g.topk_ref) if g.topk_ref else None,
                     sci(g.kl_divergence), *_walk_cells(g), g.nan_count])
    parts.append(table(["seq", "context", "prompt #", "prompt", "executor", "tokens", "verdict", "divergence step",
                        "agreed prefix", "ours (rank in ref)", "ref (rank in ours)", "top-k ours", "top-k ref", "KL",
                        "first divergence", "teacher-forced", "TF KL max", "TF KL mean", "TF top-5 inclusion",
                        "PPL ratio", "NaN"], rows) if rows else "No TokenGateChecked recorded yet.\n")
    walks = _latest_phase3_walks(gates)
    if walks:
        t = next(iter(walks.values())).event.thresholds
        parts.append("## Teacher-forced KL per step (latest Phase 3 walk per prompt)\n")
        parts.append(f"Thresholds recorded with the walk: KL max {val(t.get('kl_max'))}, KL mean "
                     f"{val(t.get('kl_mean'))}, PPL ratio {val(t.get('ppl_ratio_max'))}, top-{val(t.get('top_k'))} "
                     "inclusion at every step.\n")
        series = [(f"prompt {p}", list(range(len(r.event.tf_kl_per_step))), r.event.tf_kl_per_step)
                  for p, r in walks.items()]
        last = max(r.seq for r in walks.values())
        charts[KL_CHART] = step_kl_png(series, f"{v.name}: teacher-forced KL per step (TokenGateChecked, seq <= {last})")
        parts.append(f"![teacher-forced KL per step]({KL_CHART})\n")
        n_steps = max(len(r.event.tf_kl_per_step) for r in walks.values())
        krows = [[step, *[sci(r.event.tf_kl_per_step[step]) if step < len(r.event.tf_kl_per_step) else None
                          for r in walks.values()]] for step in range(n_steps)]
        parts.append(table(["step", *[f"prompt {p} (seq {r.seq})" for p, r in walks.items()]], krows))
    if drills:
        parts.append("## Gate drills (an injected fault; never evidence)\n")
        drows = [[rec.seq, rec.event.context.partition(":")[2], rec.event.prompt_index, rec.event.executor,
                  "caught" if not rec.event.passed else "MISSED", *_walk_cells(rec.event)] for rec in drills]
        parts.append(table(["seq", "fault", "prompt #", "executor", "gate", "first divergence", "teacher-forced",
                            "TF KL max", "TF KL mean", "TF top-5 inclusion", "PPL ratio"], drows))
    parts.append("## Per-layer cosine (diagnosis, informational — never a gate)\n")
    layers = _layer_rows(v)
    if not layers:
        parts.append("No LayerDiagnosed recorded yet.\n")
    else:
        last = max(r.seq for per in layers.values() for r in per.values())
        series = []
        for prompt, per in layers.items():
            xs = list(per)
            series.append((f"prompt {prompt} median", xs, [per[x].event.cos_median for x in xs]))
            series.append((f"prompt {prompt} min", xs, [per[x].event.cos_min for x in xs]))
        charts[CHART] = layer_cosine_png(series, f"{v.name}: per-layer cosine (LayerDiagnosed, seq <= {last})")
        parts.append(f"![per-layer cosine]({CHART})\n")
        rows = []
        for prompt, per in layers.items():
            for layer, rec in per.items():
                d = rec.event
                rows.append([prompt, layer, fixed(d.cos_min, 5), fixed(d.cos_p5, 5), fixed(d.cos_median, 5),
                             fixed(d.cos_mean, 5), sci(d.max_abs), sci(d.mean_abs), d.executor, rec.seq])
        parts.append(table(["prompt #", "layer", "cos min", "cos p5", "cos median", "cos mean", "max_abs", "mean_abs",
                            "executor", "seq"], rows))
    return "\n".join(parts), charts


def _perf_table(recs: Sequence[RecordedEvent]) -> str:
    rows = []
    for rec in recs:
        p = rec.event
        source = SHORT[perf_row_provenance(p.model_dump())]
        rows.append([rec.seq, p.phase, p.executor, source, fixed(p.prefill_s, 4), fixed(p.ttft_s, 4),
                     fixed(p.ms_per_token, 3), num(p.tokens_per_s), f"{p.warmup} + {p.runs}",
                     val(dict(sorted(p.pipeline.items()))) if p.pipeline else None])
    return table(["seq", "phase", "executor", "figure from", "prefill (s)", "TTFT (s)", "ms/token", "tokens/s",
                  "warm-up + runs", "pipeline"], rows)


def render_optimisation(v: DeploymentView, phase: int) -> str:
    title = PHASE_TITLES[phase]
    what = "prefill time" if phase == 4 else "decode ms per token"
    parts = [header(v, "phase4_prefill.md" if phase == 4 else "phase5_decode.md"), f"# Phase {phase} — {title} — {v.name}\n",
             f"{GLYPH[v.phases[phase].status]} {v.phases[phase].status}. Gate: the token gate still passes after every "
             f"applied optimisation, and {what} is strictly below the Phase {phase - 1} baseline.\n",
             "## Baseline\n"]
    perf = v.of("PerformanceMeasured")
    base = [r for r in perf if r.event.phase == phase - 1]
    parts.append(_perf_table(base[-1:]) if base else f"No Phase {phase - 1} PerformanceMeasured recorded.\n")
    parts.append("## Measurements\n")
    mine = [r for r in perf if r.event.phase == phase]
    parts.append(_perf_table(mine) if mine else "None recorded yet.\n")
    parts.append("## Optimisations tried\n")
    rows = []
    for rec in v.of("OptimizationTried"):
        o = rec.event
        if o.phase != phase:
            continue
        speed = f"{o.before_s / o.after_s:.2f}×" if o.before_s and o.after_s else None
        gate = None if o.gate_passed is None else ("PASS" if o.gate_passed else "FAIL")
        rows.append([rec.seq, o.optimisation, o.outcome, fixed(o.before_s, 4), fixed(o.after_s, 4), speed, gate, o.reason])
    parts.append(table(["seq", "optimisation", "outcome", "before (s)", "after (s)", "speed-up", "gate", "reason"], rows)
                 if rows else "None recorded yet.\n")
    if phase == 5 and v.of("SpeculationChecked"):
        parts.append(_speculation_section(v.of("SpeculationChecked")))
    return "\n".join(parts)


def _speculation_section(recs: Sequence[RecordedEvent]) -> str:
    """Phase 5's speculative-decoding gate: exactness per prompt (the verdict) and the acceptance length (a figure)."""
    rows = []
    for rec in recs:
        s = rec.event
        sem = "n/a" if s.acceptance_sem is None else f"{s.acceptance_sem:.3f}"
        mean = "n/a" if s.acceptance_mean is None else f"{s.acceptance_mean:.3f}"
        rows.append([rec.seq, s.context, f"{s.exact_prompts}/{len(s.prompts)}", "PASS" if s.passed else "FAIL",
                     s.block, f"{mean} ± {sem}", s.n_verify_passes, SHORT.get(s.provenance_class, s.provenance_class),
                     ", ".join(s.faults) or None])
    return "\n".join([
        "## Speculative decoding\n",
        "Gate: on every gate prompt the greedy tokens with the drafter equal those without it. The acceptance "
        "length (tokens committed per verify pass, ± 1 standard error over the passes: a floor, since passes "
        "within a prompt correlate) is a performance figure, never part of the verdict.\n",
        table(["seq", "context", "exact prompts", "exactness", "block", "acceptance", "verify passes", "figure from",
               "test faults"], rows)])


def _profile_table(profile: dict) -> str:
    keys = sorted(profile)
    if any(isinstance(profile[k], dict) for k in keys):
        cols = sorted({c for k in keys if isinstance(profile[k], dict) for c in profile[k]})
        rows = [[k] + ([val(profile[k].get(c)) if c in profile[k] else None for c in cols]
                       if isinstance(profile[k], dict) else [val(profile[k])] + [None] * (len(cols) - 1)) for k in keys]
        return table(["part"] + cols, rows)
    return table(["part", "value"], [[k, val(profile[k])] for k in keys])


def _npu2_section(npu2: RecordedFigures) -> tuple[str, list[tuple[str, float, float, float, float]]]:
    """The modelled NPU2 per-ELF table of a Phase 6 record, and the bars of its chart."""
    rows = [[f.path, f.elf, f.calls, fixed(f.per_call_ms, 3), fixed(f.npu_ms, 3), fixed(f.bo_write_ms, 3),
             fixed(f.bo_read_ms, 3), fixed(f.total_ms, 2)] for f in npu2.elfs]
    bars = [f.bar() for f in npu2.elfs]
    text = table(["path", "ELF", "calls", "per call (ms)", "NPU run / call", "BO write / call", "BO read / call",
                  "total (ms)"], rows)
    return text, bars


def render_phase6(v: DeploymentView) -> tuple[str, dict[str, bytes]]:
    """phase6_finalize.md, and its charts by file name: the modelled NPU2 per-ELF breakdown and the curves against
    prefill length and context (registry.curve_page), each where the last Phase 6 record has it."""
    parts = [header(v, "phase6_finalize.md"), f"# Phase 6 — Finalize & Learn — {v.name}\n",
             f"{GLYPH[v.phases[6].status]} {v.phases[6].status}.\n"]
    perf = [r for r in v.of("PerformanceMeasured") if r.event.phase == 6]
    png = curve_chart = None
    profile = Profile.of(perf[-1].event.profile) if perf else None
    if profile is not None and profile.npu2 is not None:
        rec = perf[-1]
        p = rec.event
        npu2, wall = profile.npu2, profile.wall
        gate_class = perf_row_provenance(p.model_dump())  # re-derived from the record's facts
        run_class = CPU_EMULATOR if gate_class == MODELLED_NPU2 else gate_class  # make run on the same checkout
        parts.append(f"## Final numbers (PerformanceMeasured seq {rec.seq}, executor {p.executor})\n")
        parts.append(f"The gate's figures are **{LABELS[gate_class]}** ({npu2.source}: prefill at seq {npu2.seq}, "
                     f"decode at context {npu2.ctx}); the integrated run's figures beside them are "
                     f"**{LABELS[run_class]}**" + (", information, never NPU2's" if run_class == CPU_EMULATOR else "")
                     + ".\n")
        calls = ("— (mlir-air's `make profile` does not print it)" if npu2.prefill_calls_per_layer is None
                 else f"{npu2.prefill_calls_per_layer} / {npu2.decode_calls_per_layer}")
        parts.append(table(["metric", f"gate figure: {SHORT[gate_class]}",
                            f"integrated run: {SHORT[run_class]} ({wall.n_prompt_tokens} prompt tokens)"], [
            ["TTFT (s)", fixed(p.ttft_s, 4), fixed(wall.ttft_s, 4)],
            ["tokens/s", num(p.tokens_per_s), num(wall.tokens_per_s)],
            ["ms/token", fixed(p.ms_per_token, 3), fixed(wall.ms_per_token, 3)],
            ["prefill (s)", fixed(p.prefill_s, 4), fixed(wall.prefill_s, 4)],
            ["XRT calls per layer (prefill / decode)", calls, "— (not counted by the integrated run)"],
            ["setup (s, outside the timed region)", "— (not part of the gate figure)", fixed(p.setup_s, 3)],
        ]))
        text, bars = _npu2_section(npu2)
        what = SHORT[gate_class]
        parts.append(f"## {what[:1].upper() + what[1:]} breakdown per ELF\n")
        parts.append(f"![{what} time per ELF]({ELF_CHART})\n")
        parts.append(text)
        png = elf_breakdown_png(bars, f"{v.name}: {what} time per ELF (PerformanceMeasured seq {rec.seq})")
        if len(perf) > 1:
            parts.append("## All Phase 6 measurements\n")
            parts.append(_perf_table(perf))
    elif not perf:
        parts.append("No Phase 6 PerformanceMeasured recorded yet.\n")
    else:
        rec = perf[-1]
        p = rec.event
        parts.append(f"## Final numbers (PerformanceMeasured seq {rec.seq}, executor {p.executor})\n")
        parts.append(table(["metric", "value"], [
            ["TTFT (s)", fixed(p.ttft_s, 4)], ["tokens/s", num(p.tokens_per_s)], ["ms/token", fixed(p.ms_per_token, 3)],
            ["prefill (s)", fixed(p.prefill_s, 4)], ["setup (s, outside the timed region)", fixed(p.setup_s, 3)],
            ["prompt tokens", p.n_prompt_tokens], ["generated tokens", p.n_tokens], ["warm-up + timed runs", f"{p.warmup} + {p.runs}"],
        ]))
        if p.profile:
            parts.append("## Profile\n")
            parts.append(_profile_table(p.profile))
        if len(perf) > 1:
            parts.append("## All Phase 6 measurements\n")
            parts.append(_perf_table(perf))
    if perf:
        curve_text, curve_chart = curve_section(perf[-1].event.curve, v.name, perf[-1].seq)
        parts += [curve_text] if curve_text else []
    gates = [r for r in v.of("TokenGateChecked") if r.event.context == "phase6"]
    parts.append("## Token gate (integrated runner)\n")
    rows = [[r.seq, r.event.prompt_index, "PASS" if r.event.passed else "FAIL",
             r.event.divergence_step if r.event.divergence_step is not None else "none", r.event.agreed_prefix] for r in gates]
    parts.append(table(["seq", "prompt #", "verdict", "divergence step", "agreed prefix"], rows) if rows else "None recorded yet.\n")
    parts.append(f"Lessons recorded: {len(v.of('LessonRecorded'))} — see [LESSONS.md](LESSONS.md).\n")
    charts = {name: b for name, b in ((ELF_CHART, png), (CURVE_CHART, curve_chart)) if b is not None}
    return "\n".join(parts), charts


def render_lessons(v: DeploymentView) -> str:
    parts = [header(v, "LESSONS.md"), f"# Lessons — {v.name}\n"]
    lessons = v.of("LessonRecorded")
    lines = [f"- **{'Phase ' + str(r.event.phase) if r.event.phase is not None else 'General'}** "
             f"(seq {r.seq}, {show_time(r.recorded_at)[:10]}): {cell(r.event.text)}" for r in lessons]
    parts.append("\n".join(lines) + "\n" if lines else "None recorded yet.\n")
    return "\n".join(parts)
