"""Phase 5's speculative-decoding gate (issue 46 item 3), for a deployment that declared a drafter at init.

On every gate prompt (the token gate's: 2, or 8 with `advance --full`), the deployment's backend with the switches
Phase 5 kept decodes `TOKEN_GATE_STEPS` greedy tokens twice: with the drafter (npu_kernels.model.speculative) and
without it. Where the two differ, the verify pass is also run teacher-forced on the plain stream
(`teacher_forced_verify`), so the reason says whether the verify pass or what the loop did with it is at fault.
Speculation is accepted only if the two streams are equal on every prompt; the acceptance length (tokens committed
per verify pass) with its standard error is recorded beside it as a performance figure of the CPU emulator, never
as pass/fail. One `SpeculationChecked` holds both streams of every prompt, so the state
machine and the evaluator re-derive the verdict from it (statemachine.checks.speculation_problem).

On the mlir-air path the backend runs the model directory's `make dflash-exactness` (the flags of mlir-air's
qwen3_4b_q4nx dflash_acceptance_device.py --exactness, which `ledger scaffold` writes for a deployment with a
drafter; MlirAirBackend.speculation_check): per prompt the first position the two streams part (`exact_for`, the
script prints no stream, so no teacher-forced run), the per-block acceptance lengths from its --out record, the
provenance of the run (standin-rehearsal on a twin). A run that does not read as the script's is a FAIL with its
one-line `problem`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from handlers import narrate
from handlers.gates import GateRun
from handlers.gates.runtime import backend_class, model_backend
from ledger.events import OptimizationTried, SpeculationChecked
from npu_kernels.backends.in_process import InProcessBackend
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.digest import model_digest
from npu_kernels.model.faults import speculation_acceptance
from npu_kernels.model.speculative import (
    DEFAULT_BLOCK,
    acceptance_summary,
    first_divergence,
    greedy_stream,
    speculative_stream,
    teacher_forced_verify,
)
from npu_kernels.provenance import CPU_EMULATOR
from npu_kernels.thresholds import TOKEN_GATE_STEPS


def drafter_problem(state, drafter: dict[str, Any]) -> str | None:
    """Why the declared drafter cannot run now (None: it can): the executor, or its folder changed since init."""
    if not backend_class(state).runs_speculation:
        return f"speculative decoding is not driven on --executor {state.executor}"
    folder = Path(drafter.get("path", ""))
    if not (folder / "config.json").is_file():
        return f"the drafter folder {folder} has no config.json"
    now = model_digest(folder).digest
    if drafter.get("digest") and now != drafter["digest"]:
        return f"the drafter folder {folder} changed since init (digest {drafter['digest'][:12]} -> {now[:12]})"
    return None


def speculation_event(ctx: GateRun, phase_events: list) -> SpeculationChecked | str:
    """The deployment's SpeculationChecked on its gate prompts, or one line saying why it could not run."""
    state, drafter = ctx.state, dict(ctx.state.drafter)
    problem = drafter_problem(state, drafter)
    if problem:
        return problem
    kept = {t.optimisation: True for t in phase_events
            if isinstance(t, OptimizationTried) and t.outcome == "applied" and t.phase == 5}
    backend = model_backend(state, ctx.config, kept)
    block = int(drafter.get("block", DEFAULT_BLOCK))
    faults = frozenset(drafter.get("faults", ()))
    if hasattr(backend, "speculation_check"):  # mlir-air: the model directory's `make dflash-exactness`
        narrate.report(f"speculation: make dflash-exactness, drafter block {block}, with and without the drafter")
        return SpeculationChecked(drafter=drafter, **backend.speculation_check(
            backend.prompts(ctx.options.full), drafter["path"], block, TOKEN_GATE_STEPS, faults))
    draft = InProcessBackend(drafter["path"], resolve(load_raw_config(drafter["path"])), state.executor, state.target,
                             dict(backend.options.get("switches", {})))
    rows, lengths = [], []
    for prompt in backend.prompts(ctx.options.full):
        narrate.report(f"speculation: prompt {prompt.index}, drafter block {block}, with and without the drafter")
        spec = speculative_stream(backend.pipeline, draft.pipeline, prompt.tokens, TOKEN_GATE_STEPS, block,
                                  speculation_acceptance(faults))
        plain = greedy_stream(backend.pipeline, prompt.tokens, TOKEN_GATE_STEPS)
        row = {"index": prompt.index, "prompt": prompt.text, "tokens_spec": spec.tokens, "tokens_plain": plain,
               "first_divergence": first_divergence(spec.tokens, plain), "acceptance": spec.acceptance}
        if row["first_divergence"] is not None:  # where needed: is it the verify pass, or what is done with it?
            row["teacher_forced_divergence"] = teacher_forced_verify(backend.pipeline, prompt.tokens, plain, block)
        rows.append(row)
        lengths += spec.acceptance
    mean, sem = acceptance_summary(lengths)
    exact = sum(r["first_divergence"] is None for r in rows)
    return SpeculationChecked(
        executor=state.executor, drafter=drafter, block=block, n_tokens=TOKEN_GATE_STEPS, prompts=rows,
        passed=bool(rows) and exact == len(rows), exact_prompts=exact, acceptance_mean=mean, acceptance_sem=sem,
        n_verify_passes=len(lengths), faults=sorted(faults), source=CPU_EMULATOR, provenance_class=CPU_EMULATOR)


def speculation_reasons(event: SpeculationChecked) -> list[str]:
    """Why speculation was refused, one line per prompt whose streams differ ([] when exact)."""
    if event.problem:
        return [f"speculation: {event.problem}"]
    if not event.prompts:
        return ["speculation: no gate prompt ran"]
    drill = f" [test faults {', '.join(event.faults)}]" if event.faults else ""
    out = []
    for r in event.prompts:
        i = r["first_divergence"]
        if i is None:
            continue
        if "exact_for" in r:  # mlir-air's --exactness prints where the streams part, not the tokens
            out.append(f"speculation: prompt {r['index']}: the tokens with the drafter differ from those without it "
                       f"at step {i} (`{event.source}`: exact for {r['exact_for'][0]}/{r['exact_for'][1]}; this path "
                       "runs no teacher-forced verify)" + drill)
            continue
        spec, plain = r["tokens_spec"], r["tokens_plain"]
        tf = r.get("teacher_forced_divergence")
        where = ("; teacher-forced on the plain stream the verify pass agrees at every step: the acceptance or the "
                 "caches between rounds are at fault" if tf is None else
                 f"; teacher-forced on the plain stream the verify pass itself differs at step {tf}")
        out.append(f"speculation: prompt {r['index']}: the tokens with the drafter differ from those without it at "
                   f"step {i} ({spec[i] if i < len(spec) else 'none'} vs {plain[i] if i < len(plain) else 'none'})"
                   + where + drill)
    return out


def speculation_summary(event: SpeculationChecked) -> str:
    """The figure as the phase summary shows it: exactness, then the acceptance length with its provenance."""
    sem = "n/a" if event.acceptance_sem is None else f"{event.acceptance_sem:.3f}"
    mean = "n/a" if event.acceptance_mean is None else f"{event.acceptance_mean:.3f}"
    return (f"speculation exact on {event.exact_prompts}/{len(event.prompts)} prompts; acceptance {mean} +/- {sem} "
            f"tokens per verify pass (1 s.e., block {event.block}, {event.n_verify_passes} passes, "
            f"{event.provenance_class}; a performance figure, not a verdict)")
