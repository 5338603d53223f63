"""`ledger reverify --all`: after a shared change, re-check every deployed model and block what regressed.

For each deployment at `deployed`:

1. Phase 1 rows: the latest KernelVerified per (kernel, shape) of its passed Phase 1 whose recorded
   toolchain (`provenance["toolchain"]`) differs from the toolchain the executor runs on now
   (`KernelRunner.toolchain`, npu_kernels.toolchain: npu-ledger, the emulated numerics' or the perf model's version,
   the mlir-air commit and aie/peano/XRT versions; a row without one counts as changed) are run again, exactly as
   the gate runs them (`handlers.gates.kernel_rows.verify_row`), and recorded.
2. The token gate (Phase 3's, 2 prompts) runs again through `handlers.gates.runtime.model_backend` and is
   recorded (context "reverify").
3. The Phase 6 curve (TTFT against prefill length, decode tokens/s against context) is compared with the one
   the backend gives now, point by point (`_compare_curve`), not one point.
4. A row that passed and now FAILs (without the documented caveat), a prompt that passed and now fails, or a
   curve point that is slower beyond its band (or lost its figure), is a regression: one BlockerRaised(phase 7)
   names each and what changed, and the deployment goes to `needs_human_review` (as a failed re-audit does);
   `ledger resume` after a fix re-runs the evaluation.
A declared stand-in fault (`standin_fault`, npu_kernels.numerics.executors.standin) makes the matching rows' harness fail,
standing for a broken toolchain in tests; it is recorded in those rows' toolchain (the emulated runner wrapped by
`npu_kernels.backends.in_process_runner.StandinFaultRunner`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from handlers.deploy import bind
from handlers.gates import GateRun
from handlers.gates.kernel_rows import kernel_row, verify_row
from handlers.gates.block_and_tokens import token_gate_events
from handlers.gates.runtime import model_backend
from handlers import narrate
from handlers.planning import deployment_weights, recorded_sources
from handlers.uow import DeploymentError, DeploymentUnit
from npu_kernels.backends.kernel_runners import make_runner
from npu_kernels.numerics.executors.standin import StandinError, StandinFault
from npu_kernels.model.plan_record import replan
from npu_kernels.perf.curve import compare_curves
from npu_kernels.thresholds import CURVE_COMPARE_RTOL
from npu_kernels.toolchain import current_toolchain, toolchain_changes, toolchain_label
from ledger import Ledger
from ledger.events import BlockerRaised, KernelVerified, PerformanceMeasured, TokenGateChecked
from statemachine.gate import kernel_key
from registry.text import shown
from statemachine.phases import Phase, Status
from ledger.streams import DEPLOYMENT_PREFIX


@dataclass
class Reverified:
    name: str
    status_before: str
    status: str = ""
    executor: str = ""
    rows_rerun: int = 0
    rows_unchanged: int = 0
    token_prompts: int = 0
    curve_points: int = 0  # Phase 6 curve points compared (both sides with a figure)
    regressions: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # what changed, per re-run row kind
    skipped: str = ""

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        return "REGRESSED" if self.regressions else "green"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "verdict": self.verdict, "status_before": self.status_before,
                "status": self.status, "executor": self.executor, "rows_rerun": self.rows_rerun,
                "rows_unchanged": self.rows_unchanged, "token_prompts": self.token_prompts,
                "curve_points": self.curve_points,
                "regressions": self.regressions, "changed": self.changed, "skipped": self.skipped}


def reverify_all(ledger: Ledger, *, workspace: Path, executor: str | None = None, standin_fault: str | None = None) -> list[Reverified]:
    """Re-verify every deployed model (see the module docstring); one Reverified per deployment."""
    fault = StandinFault.parse(standin_fault) if standin_fault else None
    out = []
    for stream in ledger.streams(DEPLOYMENT_PREFIX):
        name = stream.split(":", 1)[1]
        unit = DeploymentUnit(ledger, name)
        state = unit.state
        result = Reverified(name, state.status.value, executor=executor or state.executor)
        if state.status is not Status.DEPLOYED:
            result.skipped = f"at {state.status.value}, not deployed"
            result.status = state.status.value
        else:
            _reverify_one(unit, result, workspace, fault)
        out.append(result)
    return out


def _reverify_one(unit: DeploymentUnit, result: Reverified, workspace: Path, fault) -> None:
    state = unit.state
    executor = result.executor
    try:
        runner = make_runner(executor, state.target, standin_fault=fault)
    except StandinError:
        raise DeploymentError(f"--standin-fault is a stand-in of the emulated executor; {state.name} reverifies on "
                              f"{executor}") from None
    run_state = replace(state, executor=executor)
    narrate.report(f"{shown(state.name)}: re-verifying on {executor}")
    ctx = GateRun(state=run_state, workspace=workspace)
    latest: dict[tuple[str, str], KernelVerified] = {}
    for ev in state.passed[Phase.KERNELS].evidence:
        if isinstance(ev.event, KernelVerified):
            latest[kernel_key(ev.event.kernel, ev.event.shape)] = ev.event
    sources = recorded_sources(unit.events, state.passed[Phase.KERNELS].attempt)  # the rows as Phase 1 planned them
    planned = {r.key: r for r in replan(ctx.config, state.target, sources, deployment_weights(state))}
    now = current_toolchain(executor)
    new_events: list = []
    for i, (key, old) in enumerate(sorted(latest.items()), start=1):
        planned_row = planned.get(key)
        row = kernel_row(run_state, planned_row) if planned_row is not None else None
        changes = toolchain_changes((old.provenance or {}).get("toolchain"), runner.toolchain(row)) if row else []
        if not changes:
            result.rows_unchanged += 1
            continue
        narrate.report(f"[{i}/{len(latest)}] re-running {old.kernel} {key[1]} ({'; '.join(changes)})")
        tries, _ = verify_row(runner, row)
        new_events.extend(tries)
        result.rows_rerun += 1
        result.changed.extend(c for c in changes if c not in result.changed)
        last = tries[-1]
        was_ok = old.verdict == "PASS" or bool(old.caveat)
        if was_ok and last.verdict != "PASS" and not last.caveat:
            result.regressions.append(
                f"Phase 1 {old.kernel} {key[1]} now FAILs (mismatches {last.mismatches}/{last.n_elements}, max_abs "
                f"{last.max_abs} vs atol {last.atol}) after {'; '.join(changes)}")
    recorded_gate = [ev.event for ev in state.passed[Phase.FULL_MODEL].evidence if isinstance(ev.event, TokenGateChecked)]
    backend = model_backend(run_state, ctx.config)
    gate = token_gate_events(ctx, backend, "reverify", full=False)
    result.token_prompts = len(gate)
    new_events.extend(gate)
    was = {e.prompt_index: e.passed for e in recorded_gate}
    for e in gate:
        if was.get(e.prompt_index, True) and not e.passed:
            result.regressions.append(f"token gate prompt {e.prompt_index} now fails (divergence step "
                                      f"{e.divergence_step}) on {executor}, toolchain {_short(now)}")
    _compare_curve(state, backend, result)
    events = bind(new_events, state.model_digest)
    if result.regressions:
        head = result.regressions[0] + (f" (+{len(result.regressions) - 1} more)" if len(result.regressions) > 1 else "")
        events.append(BlockerRaised(phase=7, reason=f"reverify regression: {head}"))
    unit.commit(events)
    result.status = unit.state.status.value


def _compare_curve(state, backend, result: Reverified) -> None:
    """3. The Phase 6 curve (PerformanceMeasured.curve: TTFT against prefill length, decode tokens/s against
    context) against the one the backend gives now, point by point (npu_kernels.perf.curve.compare_curves, in
    npu_kernels.thresholds.CURVE_COMPARE_RTOL's band for its source): a slower point, or one that lost its figure, is a
    regression; a deployment recorded before curves has none to compare."""
    passed = state.passed.get(Phase.FINALIZE)
    recorded = [ev.event for ev in (passed.evidence if passed else [])
                if isinstance(ev.event, PerformanceMeasured) and ev.event.phase == 6 and ev.event.curve]
    if not recorded:
        return
    old = recorded[-1].curve
    cmp = compare_curves(old, backend.npu2_figures().curve, CURVE_COMPARE_RTOL.get(old.get("source")))
    result.curve_points = cmp.compared
    result.regressions += [f"Phase 6 curve {r}" for r in cmp.regressions]
    result.changed += [f"Phase 6 curve {c}" for c in cmp.changes]


def _short(tc: dict) -> str:
    return toolchain_label(tc)


def render_table(results: list[Reverified]) -> str:
    """The summary table: one line per deployment, green / REGRESSED / skipped, and why."""
    lines = [f"{'deployment':<24} {'verdict':<10} {'executor':<9} {'rows re-run':>11} {'prompts':>7}  detail"]
    for r in results:
        detail = r.skipped or ("; ".join(r.regressions) if r.regressions else
                               ("changed: " + "; ".join(r.changed) if r.changed else "toolchain unchanged"))
        lines.append(f"{shown(r.name):<24} {r.verdict:<10} {r.executor:<9} {r.rows_rerun:>11} {r.token_prompts:>7}  {detail}")
    return "\n".join(lines)
