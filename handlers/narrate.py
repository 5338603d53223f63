"""One readable line per event, for `ledger history` (the timeline) and progress output."""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator, TextIO

from registry.text import shown


def _f(x: Any, spec: str = ".4g") -> str:
    return "—" if x is None else format(x, spec)


def describe(type_: str, p: dict[str, Any]) -> str:
    """A one-line account of an event payload; unknown types fall back to their keys."""
    if type_ == "DeploymentRequested":
        return f"deploy {shown(p['name'])} from {shown(p['model_path'])} on {p['executor']}/{p['target']} ({p['dtype']})"
    if type_ == "ArchitectureAssessed":
        verdict = "in scope" if p["in_scope"] else "OUT OF SCOPE: " + " ".join(p["reasons"])
        return f"{p['architecture']}: {verdict}"
    if type_ == "ConfigResolved":
        return (f"{p['n_layers']} layers, E={p['emb_dim']}, H={p['n_heads']}/{p['n_kv_heads']}, D={p['head_dim']}, "
                f"F={p['hidden_dim']}, V={p['vocab_size']}, rope_theta={p['rope_theta']:g}")
    if type_ == "PhaseStarted":
        return f"phase {p['phase']} attempt {p['attempt']} started"
    if type_ == "PhasePassed":
        return f"PHASE {p['phase']} PASSED (attempt {p['attempt']}, {len(p['evidence_seqs'])} evidence events): {p['summary']}"
    if type_ == "PhaseFailed":
        return f"PHASE {p['phase']} FAILED (attempt {p['attempt']}): " + "; ".join(p["reasons"])
    if type_ == "PhaseInconclusive":
        return (f"PHASE {p['phase']} INCONCLUSIVE (attempt {p['attempt']}, {p.get('tries', 1)} tries, no verdict: "
                "neither passed nor failed): " + "; ".join(p["reasons"]))
    if type_ == "BlockerRaised":
        return f"BLOCKER at phase {p['phase']}: {p['reason']}"
    if type_ == "DeploymentResumed":
        return f"resumed phase {p['phase']}: {p['note']}"
    if type_ == "WeightsChecked":
        extra = "" if p["ok"] else f" missing {p['missing'][:3]} misshaped {p['misshaped'][:3]}"
        return f"weights {'complete' if p['ok'] else 'INCOMPLETE'}: {p['n_tensors']}/{p['expected']} tensors{extra}"
    if type_ == "ReferenceBaselineRecorded":
        return (f"HF bf16 baseline: top-1 {p['top1_token']} {p['top1_text']!r} p={p['top1_prob']:.3f} "
                f"entropy={p['entropy']:.3f} finite={p['logits_finite']} -> {'ok' if p['passed'] else 'NOT OK'}")
    if type_ == "KernelVerified":
        shape = ",".join(f"{k}={v}" for k, v in p["shape"].items())
        return (f"{p['kernel']} {shape} [{p['contract']}] {p['verdict']} mean_rel_L1={_f(p.get('mean_rel_L1'))} "
                f"max_abs={_f(p.get('max_abs'))} (atol {p['atol']}, rtol {p['rtol']}) on {p['executor']}"
                + (f" — {p['role']}" if p.get("role") else ""))
    if type_ == "BlockValidated":
        return (f"block layer {p['layer']}: cosine {p['cosine']:.5f} (≥{p['thresholds'].get('cosine')}), per-position min "
                f"{p['per_position_min']:.5f} (≥{p['thresholds'].get('per_position_min')}), NaN {p['nan_count']} -> "
                f"{'PASS' if p['passed'] else 'FAIL'}" + (f", bisect culprit {p['culprit']}" if p.get("culprit") else ""))
    if type_ == "LayerDiagnosed":
        return (f"layer {p['layer']}: cosine min {p['cos_min']:.4f} p5 {p['cos_p5']:.4f} median {p['cos_median']:.5f} "
                f"max_abs {p['max_abs']:.3g}")
    if type_ == "TokenGateChecked":
        where = ("agreed on all %d tokens" % p["n_tokens"]) if p.get("divergence_step") is None else (
            f"diverged at step {p['divergence_step']}: ours {p['chosen_ours']} (rank {p['rank_ours_in_ref']} in ref top-5) "
            f"vs ref {p['chosen_ref']} (rank {p['rank_ref_in_ours']} in our top-5)")
        kl = f", KL {p['kl_divergence']:.3g}" if p.get("kl_divergence") is not None else ""
        tf = ""
        if p.get("tf_steps"):
            kls = p.get("tf_kl_per_step") or [0.0]
            incl = sum(1 for o, r in zip(p.get("tf_topk_ours", []), p.get("tf_topk_ref", []))
                       if o and r and o[0] in r and r[0] in o)
            ppl = p.get("tf_ppl_ratio")
            tf = (f"; first divergence {'PASS' if p.get('first_divergence_passed') else 'FAIL'}, teacher-forced "
                  f"{'PASS' if p.get('tf_passed') else 'FAIL'} (KL max {max(kls):.3g} mean {sum(kls) / len(kls):.3g}, "
                  f"top-5 inclusion {incl}/{p['tf_steps']}, PPL ratio {ppl:.4g})" if ppl is not None else "")
        return (f"token gate [{p['context']}] prompt {p['prompt_index']}: {'PASS' if p['passed'] else 'FAIL'}, {where}"
                f"{kl}{tf}; ours {p['text_ours'][:60]!r}")
    if type_ == "OptimizationTried":
        return (f"phase {p['phase']} {p['optimisation']}: {p['outcome']} ({_f(p.get('before_s'), '.4f')}s -> "
                f"{_f(p.get('after_s'), '.4f')}s, gate {'kept' if p.get('gate_passed') else 'BROKEN' if p.get('gate_passed') is False else 'n/a'}) {p.get('reason', '')}")
    if type_ == "PerformanceMeasured":
        return (f"phase {p['phase']} performance: TTFT {_f(p.get('ttft_s'), '.4f')}s, {_f(p.get('tokens_per_s'), '.2f')} tok/s, "
                f"{_f(p.get('ms_per_token'), '.2f')} ms/token, prefill {_f(p.get('prefill_s'), '.4f')}s")
    if type_ == "EvaluationRecorded":
        return f"evaluation {p['verdict']}: {len(p['findings'])} findings"
    if type_ == "FailureTriaged":
        what = " (inconclusive)" if p.get("subject_type") == "PhaseInconclusive" else ""
        return f"triage of seq {p.get('subject_seq')}{what}: {p.get('summary')}"
    if type_ == "LessonRecorded":
        return f"lesson: {p['text']}"
    if type_ == "PerformanceCalibrated":
        return (f"NPU2 model calibrated {shown(p['name'])}: {len(p.get('rows', []))} NPU2-measured figures, "
                + ", ".join(f"{k} {v.get('value', 0):.4g}" for k, v in (p.get("constants") or {}).items()))
    return ", ".join(f"{k}={v}" for k, v in sorted(p.items()))[:160]


Reporter = Callable[[str], None]  # one progress message at a time: TerminalProgress, ProgressLines, an MCP sink


def _silent(message: str) -> None:
    return None


_REPORTER: ContextVar[Reporter] = ContextVar("npu_ledger_reporter", default=_silent)


def report(message: str) -> None:
    """One progress message to the reporter the command's boundary installed (`reporting`); silent without one.
    The work below a command (gates, the evaluator, the coordinator) reports here instead of taking a progress
    callback in every signature."""
    _REPORTER.get()(message)


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Install `reporter` for the work inside (None: silent). Set by a command's boundary: the CLI (the terminal's
    bars, or nothing under --json), the MCP server (each call's notifications, in the call's own thread), the
    evaluator's fresh process (ProgressLines to its parent)."""
    token = _REPORTER.set(reporter or _silent)
    try:
        yield
    finally:
        _REPORTER.reset(token)


class TerminalProgress:
    """Progress on stderr: `[i/n] ...` messages draw a bar; others print as lines."""

    _STEP = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$")

    def __init__(self, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.stream, self.width = stream, width
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self._open_bar = False

    def __call__(self, message: str) -> None:
        m = self._STEP.match(message)
        if not m:
            self._end_bar()
            print(f"  {message}", file=self.stream, flush=True)
            return
        i, n, text = int(m.group(1)), int(m.group(2)), m.group(3)
        filled = self.width * i // max(n, 1)
        line = f"  [{'#' * filled}{'.' * (self.width - filled)}] {i}/{n} {text}"
        if self.tty:
            print("\r" + line[:120].ljust(120), end="", file=self.stream, flush=True)
            self._open_bar = i < n
            if i == n:
                print(file=self.stream, flush=True)
        else:
            print(line, file=self.stream, flush=True)

    def _end_bar(self) -> None:
        if self._open_bar:
            print(file=self.stream, flush=True)
            self._open_bar = False


PROGRESS_PREFIX = "npu-ledger-progress: "  # a child process's progress line on its stderr (ProgressLines)


class ProgressLines:
    """Progress of a child process for its parent: each message as one `PROGRESS_PREFIX` line on stderr, which
    the parent (`relay_progress`) hands to its own progress (the terminal's bars, an MCP client's notifications)."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream

    def __call__(self, message: str) -> None:
        print(PROGRESS_PREFIX + " ".join(str(message).splitlines()), file=self.stream, flush=True)


def relay_progress(lines, passthrough: TextIO = sys.stderr) -> None:
    """Read a child's stderr `lines` to the end: its ProgressLines messages go to this process's reporter, every
    other line (logs, warnings) to `passthrough` unchanged."""
    for line in lines:
        if line.startswith(PROGRESS_PREFIX):
            report(line[len(PROGRESS_PREFIX):].rstrip("\n"))
        else:
            passthrough.write(line)
            passthrough.flush()
