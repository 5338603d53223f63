"""Parser for what a standalone mlir-air kernel harness prints: pure functions from text to records.

One promise: a transcript either parses into a result whose verdict can be re-derived from
its own numbers, or it raises `TranscriptError` with one sentence saying why. Garbage, a run cut off before
its verdict, and a transcript that contradicts itself are errors, never a PASS.

* `parse_harness_transcript` reads a standalone kernel harness (`make run` of a programming example). The
  lines come from mlir-air's `XRTRunner` (python/air/backend/xrt_runner.py):

      [precision] Output 0 (4194304 elements): mean_rel_L1=9.312e-03 | rel_err max=3.906e-01 | \
                  abs_err max=6.104e-04 | rtol=1.6e-02 atol=1.5e-03          (one line)
      Latency (us): 2017.3 | Throughput: 8.515000e+03 GFLOP/s
      PASS!

  and on failure `ERROR: Output 0 does not meet expected output.`, `Shape: (...)`,
  `Mismatches: 12 / 4194304 elements (0.00%)`, up to 20 `Index (...)` lines, then `failed.`. Outputs are
  checked in order and the check stops at the first failing one, so a FAIL transcript shows the outputs up
  to the failing one. Non-finite statistics print as `nan` / `inf`. A correlation check, when a harness
  asks for one, prints `Output 0 correlation: ... (threshold: ...)`.
The verify and diagnosis reports of a model directory have their own modules (`verify_report`,
`diagnosis_report`); what every parser shares (`TranscriptError`, `NUMBER`, `clean_lines`) is `output`.

This module never touches the ledger; it returns plain dicts whose keys are the event field names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from npu_kernels.mlir_air.output import NUMBER, TranscriptError, Verdict, clean_lines, exception_line, last_words

_PRECISION = re.compile(
    rf"^\[precision\]\s*(?:Output\s+(?P<index>\d+)\s*\((?P<n>\d+)\s+elements\)\s*:\s*)?"
    rf"mean_rel_L1=(?P<l1>{NUMBER})\s*\|\s*rel_err max=(?P<rel>{NUMBER})\s*\|\s*"
    rf"abs_err max=(?P<abs>{NUMBER})\s*\|\s*rtol=(?P<rtol>{NUMBER})\s+atol=(?P<atol>{NUMBER})$",
    re.IGNORECASE,
)
_LATENCY = re.compile(
    rf"^Latency \(us\):\s*(?P<lat>{NUMBER})(?:\s*\|\s*Throughput:\s*(?P<gf>{NUMBER})\s*GFLOP/s)?$", re.IGNORECASE
)
_ERROR_OUTPUT = re.compile(r"^ERROR: Output (?P<index>\d+) does not meet expected output\.$")
_ERROR_CORR = re.compile(rf"^ERROR: Output (?P<index>\d+) correlation (?P<c>{NUMBER}) below threshold", re.I)
_CORRELATION = re.compile(rf"^Output (?P<index>\d+) correlation: (?P<c>{NUMBER}) \(threshold: (?P<t>{NUMBER})\)$", re.I)
_MISMATCHES = re.compile(
    r"^Mismatches:\s*(?P<bad>\d+)\s*/\s*(?P<total>\d+)(?:\s+elements)?\s*\((?:[-+\d.eE]+%|empty array)\)$"
)
_SHAPE = re.compile(r"^Shape:\s*(?P<shape>\(.*\)|\[.*\])$")
# `  Index {idx}: expected={e}, actual={a}, diff={d}` (xrt_runner.py:459-463); idx is a tuple of numpy ints,
# `(np.int64(0), np.int64(5))` under numpy 2 and `(0, 5)` under numpy 1; integer outputs print no diff
_INDEX = re.compile(
    rf"^Index\s+(?P<idx>\(.*?\)|\S+):\s*expected=(?P<e>{NUMBER}),\s*actual=(?P<a>{NUMBER})(?:,\s*diff=(?P<d>{NUMBER}))?$",
    re.IGNORECASE,
)
_MORE = re.compile(r"^\.\.\. and (?P<n>\d+) more mismatches$")
_FIRST = re.compile(r"^First (?P<n>\d+) mismatched locations:$")
_MAX_ACCEPTABLE = re.compile(r"^Max acceptable:\s*(?P<n>\d+)\s*\(")
_SAMPLED = re.compile(r"^Stochastic check:\s*(?P<n>\d+) sampled elements$")
# what a harness prints instead of a check when it only compiled (run.py:1268-1281, attn_npu2.py:1524,
# eltwise_add.py:219-220): never a verdict
_COMPILE_ONLY = ("Compile-only done.", "Compilation complete.", "Compiled successfully.")
_VERDICT_PASS = "PASS!"
_VERDICT_FAIL = "failed."


@dataclass(frozen=True)
class OutputCheck:
    """One checked output of a harness run (an `Output i` of the transcript)."""

    index: int
    n_elements: int | None
    mean_rel_L1: float
    max_rel: float
    max_abs: float
    rtol: float
    atol: float
    passed: bool | None  # None: the check stopped at an earlier output, or the transcript does not say
    mismatches: int | None  # 0 for a passing output; the printed count for the failing one
    shape: str | None = None
    correlation: float | None = None
    # the printed `Index` lines (at most 20, row-major order): max |expected| and max diff over them, how many
    # were listed, and whether that is every mismatch (then they are the maxima over all mismatching elements)
    listed_ref_max: float | None = None
    listed_err_max: float | None = None
    listed: int = 0
    listed_all: bool = False
    sampled: int | None = None  # a stochastic (sampled) check over this many elements, not the full output


@dataclass(frozen=True)
class HarnessResult:
    """A parsed `make run` transcript. `outputs` are in printed order."""

    verdict: Verdict
    outputs: tuple[OutputCheck, ...]
    latency_us: float | None = None
    gflops: float | None = None
    failing_output: int | None = None
    failure_reasons: tuple[str, ...] = ()
    # the latency and throughput exactly as printed: their digits bound how far the two may disagree
    latency_text: str | None = None
    gflops_text: str | None = None

    def kernel_verified_fields(self) -> dict[str, Any]:
        """The `KernelVerified` fields this transcript determines.

        With several outputs the row reports the worst of each figure (max mean_rel_L1 / max_abs /
        max_rel, NaN if any output is NaN), the summed mismatches and element counts, and the tolerances
        of output 0 (one harness call checks every output at the same rtol/atol)."""
        outs = self.outputs
        first = outs[0] if outs else None
        counts = [o.n_elements for o in outs]
        bad = [o.mismatches for o in outs]
        known_counts = bool(counts) and all(c is not None for c in counts)
        known_bad = bool(bad) and all(b is not None for b in bad)
        failing = [o for o in outs if o.passed is False]
        complete = bool(failing) and all(o.listed_all and o.listed_ref_max is not None for o in failing)
        return {
            "verdict": self.verdict,
            "rtol": first.rtol if first else None,
            "atol": first.atol if first else None,
            "mean_rel_L1": _worst(o.mean_rel_L1 for o in outs),
            "max_abs": _worst(o.max_abs for o in outs),
            "max_rel": _worst(o.max_rel for o in outs),
            "mismatches": sum(bad) if known_bad else None,  # type: ignore[arg-type]
            "n_elements": sum(counts) if known_counts else None,  # type: ignore[arg-type]
            "latency_us": self.latency_us,
            "gflops": self.gflops,
            # over every mismatching element only when every one was listed (<= 20 of them): a max over the
            # first 20 of more is a lower bound and is not recorded as the maximum
            "mismatch_ref_max": _worst(o.listed_ref_max for o in failing) if complete else None,
            "mismatch_err_max": _worst(o.listed_err_max for o in failing) if complete else None,
        }


def _worst(values) -> float | None:
    vals = list(values)
    if not vals:
        return None
    if any(math.isnan(v) for v in vals):
        return math.nan
    return max(vals)


def parse_harness_transcript(text: str, *, require_precision: bool = True) -> HarnessResult:
    """Parse one standalone harness run into a `HarnessResult`; raise `TranscriptError` on anything else.

    Exactly one verdict line (`PASS!` or `failed.`) is required, and every bf16 harness in mlir-air's
    registry prints a `[precision]` line per output (set `require_precision=False` for integer-output
    harnesses, which print none). Contradictions that raise: both verdicts, a verdict printed twice,
    `PASS!` alongside an `ERROR: Output` / `Mismatches:` line or a non-finite error figure, a mismatch
    count larger than its total, a mismatch total that differs from that output's `[precision]` element
    count, an output reported twice, and check lines printed after the verdict."""
    if not text or not text.strip():
        raise TranscriptError("the harness transcript is empty.", text)
    lines = clean_lines(text)
    scan = _Scan(text)
    for lineno, line in enumerate(lines):
        if line:
            scan.feed(lineno, line)
    verdict = scan.verdict(lines, require_precision)
    scan.check_consistency(verdict)
    failing = (scan.errors + scan.corr_errors)[0] if (scan.errors or scan.corr_errors) else None
    latency = scan.latency
    return HarnessResult(
        verdict=verdict,
        outputs=tuple(scan.output(idx, verdict, failing) for idx in scan.order),
        latency_us=latency[0] if latency else None,
        gflops=latency[1] if latency else None,
        failing_output=failing,
        failure_reasons=tuple(scan.reasons()),
        latency_text=scan.printed[0] or None,
        gflops_text=scan.printed[1],
    )


@dataclass
class _Scan:
    """What one pass over a transcript's lines collects; `feed` reads one line, the rest judge the whole."""

    text: str
    precisions: dict[int, dict[str, Any]] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)
    corr_errors: list[int] = field(default_factory=list)
    mismatch: dict[int, tuple[int, int]] = field(default_factory=dict)
    shapes: dict[int, str] = field(default_factory=dict)
    correlations: dict[int, float] = field(default_factory=dict)
    latency: tuple[float, float | None] | None = None
    printed: tuple[str, str | None] = ("", None)
    verdicts: list[tuple[int, str]] = field(default_factory=list)
    listed: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # output -> [(|expected|, diff)]
    more: dict[int, int] = field(default_factory=dict)
    sampled: dict[int, int] = field(default_factory=dict)
    compile_only: str | None = None
    traceback_at: str | None = None
    current_error: int | None = None
    check_after_verdict: str | None = None

    def fail(self, message: str) -> TranscriptError:
        return TranscriptError(message, self.text)

    def feed(self, lineno: int, line: str) -> None:
        is_check_line = self._check_line(line)
        if not is_check_line:
            self._other_line(lineno, line)
        if is_check_line and self.verdicts and self.check_after_verdict is None:
            self.check_after_verdict = line

    def _check_line(self, line: str) -> bool:
        """Read `line` when it is part of an output's check; False when it is not one."""
        if line.startswith("[precision]"):
            self._precision(line)
        elif m := _ERROR_OUTPUT.match(line):
            self.current_error = int(m["index"])
            self.errors.append(self.current_error)
        elif m := _ERROR_CORR.match(line):
            self.corr_errors.append(int(m["index"]))
        elif m := _CORRELATION.match(line):
            self.correlations[int(m["index"])] = float(m["c"])
        elif line.startswith("Mismatches:"):
            self._mismatches(line)
        elif line.startswith("Index ") and self.current_error is not None:
            m = _INDEX.match(line)
            if not m:
                raise self.fail(f"malformed mismatch location line: {line!r}.")
            e, a = float(m["e"]), float(m["a"])
            d = float(m["d"]) if m["d"] is not None else abs(a - e)
            self.listed.setdefault(self.current_error, []).append((abs(e), d))
        else:
            return False
        return True

    def _other_line(self, lineno: int, line: str) -> None:
        error = self.current_error
        if line.startswith("Latency (us):"):
            m = _LATENCY.match(line)
            if not m:
                raise self.fail(f"malformed latency line: {line!r}.")
            self.latency = (float(m["lat"]), float(m["gf"]) if m["gf"] is not None else None)
            self.printed = (m["lat"], m["gf"])
        elif (m := _SHAPE.match(line)) and error is not None and error not in self.shapes:
            self.shapes[error] = m["shape"]
        elif (m := _MORE.match(line)) and error is not None:
            self.more[error] = int(m["n"])
        elif (m := _SAMPLED.match(line)) and error is not None:
            self.sampled[error] = int(m["n"])
        elif _FIRST.match(line) or _MAX_ACCEPTABLE.match(line):
            pass
        elif line in _COMPILE_ONLY:
            self.compile_only = line
        elif line.startswith("Traceback (most recent call last)"):
            self.traceback_at = self.traceback_at or line
        elif line in (_VERDICT_PASS, _VERDICT_FAIL):
            self.verdicts.append((lineno, line))

    def _precision(self, line: str) -> None:
        m = _PRECISION.match(line)
        if not m:
            raise self.fail(f"malformed [precision] line: {line!r}.")
        idx = int(m["index"]) if m["index"] is not None else len(self.order)
        if idx in self.precisions:
            raise self.fail(f"output {idx} has two [precision] lines: the transcript contradicts itself.")
        self.precisions[idx] = {
            "n": int(m["n"]) if m["n"] is not None else None, "l1": float(m["l1"]), "rel": float(m["rel"]),
            "abs": float(m["abs"]), "rtol": float(m["rtol"]), "atol": float(m["atol"]),
        }
        self.order.append(idx)

    def _mismatches(self, line: str) -> None:
        m = _MISMATCHES.match(line)
        if not m:
            raise self.fail(f"malformed mismatch line: {line!r}.")
        if self.current_error is None:
            raise self.fail("a 'Mismatches:' line appears without the 'ERROR: Output N' line it belongs to.")
        bad, total = int(m["bad"]), int(m["total"])
        if bad > total:
            raise self.fail(f"output {self.current_error} reports {bad} mismatches out of only {total} elements.")
        self.mismatch[self.current_error] = (bad, total)

    def verdict(self, lines: list[str], require_precision: bool) -> Verdict:
        """The one verdict the transcript prints, or the reason it has none (or more than one)."""
        if self.traceback_at is not None and not self.verdicts:
            raise self.fail(f"the harness raised a Python exception before its verdict ({exception_line(lines)!r}): "
                            "a compile or shape-assertion failure, not a measurement.")
        if self.compile_only is not None and not self.verdicts and not self.precisions:
            raise self.fail(f"the harness only compiled ({self.compile_only!r}): no output was checked, so there "
                            "is nothing to record.")
        if not self.verdicts:
            if self.precisions or self.errors:
                raise self.fail("the transcript ends without a verdict line ('PASS!' or 'failed.'): the run was cut "
                                f"off or the harness crashed (last line: {last_words(lines)!r}).")
            raise self.fail("the text matches none of the mlir-air harness formats: no [precision] line and no "
                            f"'PASS!' / 'failed.' verdict (last line: {last_words(lines)!r}).")
        if len({v for _, v in self.verdicts}) > 1:
            raise self.fail("the transcript prints both 'PASS!' and 'failed.': it contradicts itself.")
        if len(self.verdicts) > 1:
            raise self.fail(f"the transcript prints the verdict {len(self.verdicts)} times; one harness run prints "
                            "it once.")
        if self.check_after_verdict is not None:
            raise self.fail(f"check output continues after the verdict ({self.check_after_verdict!r}): several "
                            "runs concatenated?")
        if require_precision and not self.precisions:
            raise self.fail("the transcript has a verdict but no [precision] line: the harness must run with "
                            "report_precision=True so its tolerances and error figures can be recorded.")
        return "PASS" if self.verdicts[0][1] == _VERDICT_PASS else "FAIL"

    def check_consistency(self, verdict: Verdict) -> None:
        """A PASS without failing lines or non-finite figures; listed and counted mismatches that agree."""
        if verdict == "PASS":
            if self.errors or self.corr_errors or self.mismatch:
                bad = sum(b for b, _ in self.mismatch.values())
                raise self.fail(f"the transcript says 'PASS!' but also reports a failing output ({bad} mismatches): "
                                "it contradicts itself.")
            for idx, p in self.precisions.items():
                if not all(math.isfinite(p[k]) for k in ("l1", "rel", "abs")):
                    raise self.fail(f"the transcript says 'PASS!' but output {idx} has non-finite error figures "
                                    f"(mean_rel_L1={p['l1']}, abs_err max={p['abs']}): a NaN/Inf output cannot pass.")
        for idx, rows in self.listed.items():
            bad = self.mismatch.get(idx, (None, None))[0]
            if bad is not None and len(rows) + self.more.get(idx, 0) != bad:
                raise self.fail(f"output {idx} lists {len(rows)} mismatch locations and {self.more.get(idx, 0)} "
                                f"more, but reports {bad} mismatches: the transcript is truncated or contradicts itself.")
        for idx, (_, total) in self.mismatch.items():
            n = self.precisions.get(idx, {}).get("n")
            if n is not None and n != total:
                raise self.fail(f"output {idx} has {n} elements in its [precision] line but {total} in its "
                                "mismatch line.")

    def output(self, idx: int, verdict: Verdict, failing: int | None) -> OutputCheck:
        """Output `idx` as checked: outputs before the failing one passed; after it, the check stopped."""
        p = self.precisions[idx]
        if verdict == "PASS":
            passed, bad = True, 0
        elif failing is None or idx > failing:
            passed, bad = None, None
        elif idx < failing:
            passed, bad = True, 0
        else:
            passed = False
            bad = (self.mismatch[idx][0] if idx in self.mismatch
                   else (0 if idx in self.corr_errors and idx not in self.errors else None))
        rows = self.listed.get(idx)
        return OutputCheck(
            index=idx, n_elements=p["n"], mean_rel_L1=p["l1"], max_rel=p["rel"], max_abs=p["abs"], rtol=p["rtol"],
            atol=p["atol"], passed=passed, mismatches=bad, shape=self.shapes.get(idx),
            correlation=self.correlations.get(idx),
            listed_ref_max=_worst(r for r, _ in rows) if rows else None,
            listed_err_max=_worst(d for _, d in rows) if rows else None,
            listed=len(rows or ()), listed_all=bool(rows) and idx not in self.more, sampled=self.sampled.get(idx),
        )

    def reasons(self) -> list[str]:
        reasons = []
        for idx in self.errors:
            if idx in self.mismatch:
                bad, total = self.mismatch[idx]
                reasons.append(f"output {idx}: {bad} of {total} elements outside atol + rtol*|ref|")
            else:
                reasons.append(f"output {idx} does not meet expected output")
        for idx in self.corr_errors:
            reasons.append(f"output {idx}: correlation {self.correlations.get(idx, math.nan)} below threshold")
        return reasons
