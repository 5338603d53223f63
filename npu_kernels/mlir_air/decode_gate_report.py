"""Reader of a short-convolution model's `make decode-gate`: the lines mlir-air's lfm2 decode gate prints.

mlir-air checks LFM2's carried ShortConv state with lfm2_1_2b_q4nx's `make decode-gate` (Makefile at ff1efdb0:
`decode-gate: weights`, then `lfm2_1_2b_q4nx_decode_gate.py --lbuild $(LBUILD) --seq`). The script (at 11cad40a)
runs the tokens of `--tokens` as ONE sequence (`--seq`), each a decode step carrying the state, and prints, in main():

    <dir>: layers=<n>  ...                                        the build it scored (header)
    tok <t>: cos=<c>  dev_top1=<d>  ref_top1=<r>  top1=<y|n>       per token: the logits against its reference
    tok <t>: UNUSABLE -- <p> of <n> logit words never written (poison), <k> NaN     (before it, when so)
              layer <i>: state drift <a> -> <b> over <s> model layer(s) = <inc>/layer (> <state_rel>)
              ShortConv state read-back: max rel_l2 <x>                           (--seq)
                per layer: L<i>:<r> ...                                           (--state-verbose)
    min cosine <w> over <n> tokens (gate >= <cos_min>)
    state slots checked <n>, max rel_l2 <x>; <b> layer(s) adding more than <state_rel> of drift per model layer (gate: 0)
    HYBRID NUMERICS PASS | HYBRID NUMERICS FAIL

(`tok <t>: <state>` alone: the dispatch did not complete, and the script stops with status 1.) It passes when every
token's cosine reaches cos_min and, with --seq, at least one state slot was compared and no layer adds more than
state_rel of relative-L2 drift per model layer (npu_kernels.thresholds.DECODE_GATE_THRESHOLDS,
state_drift_increments).

`parse_decode_gate(text, returncode)` re-derives the verdict, the summary's minimum, maximum and count from the
token lines, and (with the per-layer lines) every printed drift line, before any of it is evidence; it gives the
`ConvStateChecked` fields (method "decode-gate"). Garbage, a truncated run and contradictions raise TranscriptError
in one line; nothing here touches the ledger.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from npu_kernels.mlir_air.output import TranscriptError
from npu_kernels.thresholds import DECODE_GATE_PRINTED_REL, state_drift_increments

DECODE_GATE_TARGET = "decode-gate"  # the make target (mlir-air's lfm2_1_2b_q4nx/Makefile at ff1efdb0)

_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"
_HEADER = re.compile(r"^\S+: layers=(?P<n>\d+)\b")
_TOK = re.compile(rf"^tok\s+(?P<tok>\d+): cos=(?P<cos>{_NUM})\s+dev_top1=\s*(?P<dev>\d+)\s+ref_top1=\s*(?P<ref>\d+)"
                  r"\s+top1=(?P<top1>[yn])$")
_UNUSABLE = re.compile(r"^tok\s+(?P<tok>\d+): UNUSABLE -- (?P<poison>\d+) of (?P<n>\d+) logit words never written "
                       r"\(poison\), (?P<nan>\d+) NaN$")
_TOK_OTHER = re.compile(r"^tok\s+(?P<tok>\d+): (?P<what>.+)$")
_DRIFT = re.compile(rf"^\s+layer (?P<layer>\d+): state drift (?P<prev>{_NUM}) -> (?P<this>{_NUM}) over (?P<span>\d+) "
                    rf"model layer\(s\) = (?P<inc>{_NUM})/layer \(> (?P<limit>{_NUM})\)$")
_READBACK = re.compile(rf"^\s+ShortConv state read-back: max rel_l2 (?P<hi>{_NUM})$")
_PER_LAYER = re.compile(r"^\s+per layer: (?P<rest>.*)$")
_PER_LAYER_ITEM = re.compile(rf"^L(?P<layer>\d+):(?P<r>{_NUM})$")
_SUMMARY = re.compile(rf"^min cosine (?P<worst>{_NUM}) over (?P<n>\d+) tokens \(gate >= (?P<gate>{_NUM})\)$")
_STATE_SUMMARY = re.compile(rf"^state slots checked (?P<slots>\d+), max rel_l2 (?P<hi>{_NUM}); (?P<bad>\d+) layer\(s\) "
                            rf"adding more than (?P<limit>{_NUM}) of drift per model layer \(gate: 0\)$")
_VERDICT = re.compile(r"^HYBRID NUMERICS (?P<v>PASS|FAIL)$")


@dataclass
class DecodeGateStep:
    """One token of the sequence: its logits against the reference, and (--seq) the state read back after it."""

    token: int
    cosine: float
    dev_top1: int
    ref_top1: int
    top1: bool
    unusable: str = ""  # the UNUSABLE line's text, when the script printed one for this token
    state_max_rel_l2: float | None = None
    per_layer: list[dict[str, Any]] = field(default_factory=list)  # [{layer, rel_l2}] (--state-verbose)
    drift: list[dict[str, Any]] = field(default_factory=list)  # [{layer, previous, this, span, increment, limit}]

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "cosine": self.cosine, "dev_top1": self.dev_top1, "ref_top1": self.ref_top1,
                "top1": self.top1, "unusable": self.unusable, "state_max_rel_l2": self.state_max_rel_l2,
                "per_layer": list(self.per_layer), "drift": list(self.drift)}


@dataclass
class DecodeGateReport:
    n_layers: int | None
    steps: list[DecodeGateStep]
    min_cosine: float
    cos_min: float
    seq: bool  # the run carried the state (its state summary line)
    state_slots: int
    max_rel_l2: float | None
    drift_layers: int  # the layers that added more than state_rel, over every token (the script's count)
    state_rel: float | None
    verdict: str

    def conv_layers(self) -> list[dict[str, Any]]:
        """Per short-convolution layer its largest relative L2 over the tokens (from the per-layer lines)."""
        worst: dict[int, float] = {}
        for s in self.steps:
            for x in s.per_layer:
                worst[x["layer"]] = max(worst.get(x["layer"], -math.inf), x["rel_l2"])
        return [{"layer": k, "rel_l2": v} for k, v in sorted(worst.items())]

    def event_fields(self) -> dict[str, Any]:
        """The ConvStateChecked fields this run gives (method "decode-gate"; the executor and provenance are the
        caller's)."""
        thresholds = {"logits_cosine": self.cos_min}
        if self.state_rel is not None:
            thresholds["state_rel_per_layer"] = self.state_rel
        return {"method": "decode-gate", "n_positions": len(self.steps), "layers": self.conv_layers(),
                "logits_cosine": self.min_cosine, "top1_agrees": all(s.top1 for s in self.steps),
                "thresholds": thresholds, "passed": self.verdict == "PASS",
                "steps": [s.to_json() for s in self.steps], "state_slots": self.state_slots,
                "drift_layers": self.drift_layers, "carried_state": self.seq}


def _f(text: str) -> float:
    return float(text)


def _min(values: list[float]) -> float:
    """min() that a NaN wins (the script's own rule: a NaN cosine is never a perfect score)."""
    return math.nan if any(math.isnan(v) for v in values) else min(values)


def _check_drift(step: DecodeGateStep, state_rel: float) -> None:
    """The printed drift lines of one token against those its per-layer figures give (state_drift_increments),
    to the figures' printed precision."""
    printed = {d["layer"] for d in step.drift}
    for layer, _prev, _this, _span, inc in state_drift_increments([(x["layer"], x["rel_l2"]) for x in step.per_layer]):
        if inc > state_rel + DECODE_GATE_PRINTED_REL and layer not in printed:
            raise TranscriptError(f"token {step.token}: the per-layer figures put layer {layer}'s drift at {inc:.4f}"
                                  f"/layer (> {state_rel}), but no drift line names it")
        if layer in printed and inc < state_rel - DECODE_GATE_PRINTED_REL:
            raise TranscriptError(f"token {step.token}: a drift line names layer {layer}, but its per-layer figures "
                                  f"give {inc:.4f}/layer (<= {state_rel})")


def _state_figures(steps: list[DecodeGateStep], state_summary: re.Match | None, n_layers: int | None):
    """(state rows compared, max rel_l2, layers over the bound, the bound) of a --seq run's summary, checked against
    its per-token lines (every token read back, the maximum, the drift lines' count and bound, and with per-layer
    figures each drift line re-derived); (0, None, 0, None) for a run without --seq, which must print no state line."""
    if state_summary is None:
        if any(s.state_max_rel_l2 is not None or s.drift for s in steps):
            raise TranscriptError("state lines were printed, but no `state slots checked ...` summary: a truncated run")
        return 0, None, 0, None
    slots, hi, bad, limit = (int(state_summary["slots"]), _f(state_summary["hi"]), int(state_summary["bad"]),
                             _f(state_summary["limit"]))
    missing = [s.token for s in steps if s.state_max_rel_l2 is None]
    if missing:
        raise TranscriptError(f"a --seq run, but token {missing[0]} has no `ShortConv state read-back` line")
    if hi != max(s.state_max_rel_l2 for s in steps):
        raise TranscriptError(f"its summary's max rel_l2 {state_summary['hi']} is not the largest read-back "
                              f"{max(s.state_max_rel_l2 for s in steps):.4f}")
    if bad != sum(len(s.drift) for s in steps):
        raise TranscriptError(f"its summary counts {bad} layer(s) over the drift bound, but "
                              f"{sum(len(s.drift) for s in steps)} drift line(s) were printed")
    for s in steps:
        if any(d["limit"] != limit for d in s.drift):
            raise TranscriptError(f"token {s.token}: a drift line's bound differs from the summary's {limit}")
        if s.per_layer:
            if n_layers is not None and any(x["layer"] >= n_layers for x in s.per_layer):
                raise TranscriptError(f"token {s.token}: a per-layer figure past the header's {n_layers} layers")
            _check_drift(s, limit)
    return slots, hi, bad, limit


def parse_decode_gate(text: str, returncode: int | None = None) -> DecodeGateReport:
    """The `make decode-gate` transcript, re-derived (module docstring); TranscriptError says what is wrong."""
    n_layers, steps, summary, state_summary, verdicts = None, [], None, None, []
    unusable: dict[int, str] = {}
    for raw in text.splitlines():
        line = raw.rstrip()
        if m := _HEADER.match(line):
            n_layers = int(m["n"]) if n_layers is None else n_layers
        elif m := _TOK.match(line):
            steps.append(DecodeGateStep(int(m["tok"]), _f(m["cos"]), int(m["dev"]), int(m["ref"]), m["top1"] == "y",
                                        unusable.pop(int(m["tok"]), "")))
        elif m := _UNUSABLE.match(line):
            unusable[int(m["tok"])] = line.strip()
        elif m := _TOK_OTHER.match(line):
            if m["what"].startswith(("cos=", "UNUSABLE")):
                raise TranscriptError(f"an unreadable token line {line.strip()[:120]!r}")
            raise TranscriptError(f"the dispatch for token {m['tok']} did not complete: {m['what'][:120]}")
        elif m := (_DRIFT.match(line) or _READBACK.match(line) or _PER_LAYER.match(line)):
            if not steps:
                raise TranscriptError(f"a state line before any token line: {line.strip()[:120]!r}")
            step = steps[-1]
            if m.re is _DRIFT:
                step.drift.append({"layer": int(m["layer"]), "previous": _f(m["prev"]), "this": _f(m["this"]),
                                   "span": int(m["span"]), "increment": _f(m["inc"]), "limit": _f(m["limit"])})
            elif m.re is _READBACK:
                if step.state_max_rel_l2 is not None:
                    raise TranscriptError(f"token {step.token} has two state read-back lines")
                step.state_max_rel_l2 = _f(m["hi"])
            else:
                items = [_PER_LAYER_ITEM.match(x) for x in m["rest"].split()]
                if not items or not all(items):
                    raise TranscriptError(f"token {step.token}: an unreadable per-layer line {line.strip()[:120]!r}")
                step.per_layer = [{"layer": int(x["layer"]), "rel_l2": _f(x["r"])} for x in items]
        elif m := _SUMMARY.match(line):
            if summary is not None:
                raise TranscriptError("two `min cosine ... over N tokens` lines: two runs in one transcript")
            summary = m
        elif m := _STATE_SUMMARY.match(line):
            state_summary = m
        elif m := _VERDICT.match(line):
            verdicts.append(m["v"])
    if not verdicts:
        raise TranscriptError("printed no `HYBRID NUMERICS PASS` / `HYBRID NUMERICS FAIL` line: not mlir-air's lfm2 "
                              "decode gate, or it stopped before its verdict")
    if len(verdicts) > 1:
        raise TranscriptError(f"printed {len(verdicts)} verdict lines ({', '.join(verdicts)}): two runs in one transcript")
    if summary is None:
        raise TranscriptError("printed its verdict but no `min cosine <w> over <n> tokens (gate >= <c>)` line")
    if not steps:
        raise TranscriptError("printed no `tok <t>: cos=...` line: no token was scored")
    if unusable:
        raise TranscriptError(f"an UNUSABLE line for token {next(iter(unusable))} with no score after it")
    verdict, n = verdicts[0], int(summary["n"])
    if n != len(steps):
        raise TranscriptError(f"its summary counts {n} tokens, but {len(steps)} `tok` lines were printed")
    worst, gate = _f(summary["worst"]), _f(summary["gate"])
    derived = _min([s.cosine for s in steps])
    if not (worst == derived or (math.isnan(worst) and math.isnan(derived))):
        raise TranscriptError(f"its summary's min cosine {summary['worst']} is not the lowest token cosine {derived:.6f}")
    seq = state_summary is not None
    slots, hi, bad, limit = _state_figures(steps, state_summary, n_layers)
    ok = all(s.cosine >= gate for s in steps) and (not seq or (slots > 0 and bad == 0))
    if ok != (verdict == "PASS"):
        raise TranscriptError(f"printed HYBRID NUMERICS {verdict}, but its own figures give "
                              f"{'PASS' if ok else 'FAIL'}")
    if returncode is not None and (returncode == 0) != (verdict == "PASS"):
        raise TranscriptError(f"printed HYBRID NUMERICS {verdict} but exited with status {returncode}")
    return DecodeGateReport(n_layers, steps, worst, gate, seq, slots, hi, bad, limit, verdict)
