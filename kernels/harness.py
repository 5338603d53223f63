"""Parsers for what mlir-air's harnesses print: pure functions from text (and report JSON) to records.

Three sources, one promise: a transcript either parses into a result whose verdict can be re-derived from
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
* `parse_verify_output` reads `make verify` of an mlir-air LLM directory (programming_examples/llms/verify/
  verify_runner.py): `[verify] Summary: {...}` (a Python dict repr), `[verify] PASS` or `[verify] FAIL ...`,
  and the `reports/verify_topk_token_<stamp>.json` report, whose `topk_checks` rows are mapped onto the
  fields of the `TokenGateChecked` event. Each row's ranks and status are re-derived from its top-k lists.
* `parse_diagnosis_report` / `parse_diagnosis_output` read `make diagnosis`: per-layer `ffn_out` rows
  (cosine min/p5/median/mean, max_abs, mean_abs) mapped onto `LayerDiagnosed` fields.

This module never touches the ledger; it returns plain dicts whose keys are the event field names.
"""

from __future__ import annotations

import ast
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Verdict = Literal["PASS", "FAIL"]


class TranscriptError(ValueError):
    """Raised when a harness/verify transcript or report matches none of the known formats, is truncated,
    or contradicts itself. `transcript` holds the text (when there is one) so a caller can triage it."""

    def __init__(self, message: str, transcript: str | None = None) -> None:
        super().__init__(message)
        self.transcript = transcript


def sha256_text(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes of `text` (the provenance hash of a transcript)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- standalone kernel harness -------------------------------------------------------------------------

_NUM = r"[-+]?(?:nan|inf|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

_PRECISION = re.compile(
    rf"^\[precision\]\s*(?:Output\s+(?P<index>\d+)\s*\((?P<n>\d+)\s+elements\)\s*:\s*)?"
    rf"mean_rel_L1=(?P<l1>{_NUM})\s*\|\s*rel_err max=(?P<rel>{_NUM})\s*\|\s*"
    rf"abs_err max=(?P<abs>{_NUM})\s*\|\s*rtol=(?P<rtol>{_NUM})\s+atol=(?P<atol>{_NUM})$",
    re.IGNORECASE,
)
_LATENCY = re.compile(
    rf"^Latency \(us\):\s*(?P<lat>{_NUM})(?:\s*\|\s*Throughput:\s*(?P<gf>{_NUM})\s*GFLOP/s)?$", re.IGNORECASE
)
_ERROR_OUTPUT = re.compile(r"^ERROR: Output (?P<index>\d+) does not meet expected output\.$")
_ERROR_CORR = re.compile(rf"^ERROR: Output (?P<index>\d+) correlation (?P<c>{_NUM}) below threshold", re.I)
_CORRELATION = re.compile(rf"^Output (?P<index>\d+) correlation: (?P<c>{_NUM}) \(threshold: (?P<t>{_NUM})\)$", re.I)
_MISMATCHES = re.compile(
    r"^Mismatches:\s*(?P<bad>\d+)\s*/\s*(?P<total>\d+)(?:\s+elements)?\s*\((?:[-+\d.eE]+%|empty array)\)$"
)
_SHAPE = re.compile(r"^Shape:\s*(?P<shape>\(.*\)|\[.*\])$")
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


@dataclass(frozen=True)
class HarnessResult:
    """A parsed `make run` transcript. `outputs` are in printed order."""

    verdict: Verdict
    outputs: tuple[OutputCheck, ...]
    latency_us: float | None = None
    gflops: float | None = None
    failing_output: int | None = None
    failure_reasons: tuple[str, ...] = ()

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
        }


def _worst(values) -> float | None:
    vals = list(values)
    if not vals:
        return None
    if any(math.isnan(v) for v in vals):
        return math.nan
    return max(vals)


def _clean_lines(text: str) -> list[str]:
    return [_ANSI.sub("", line).strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


def _last_words(lines: list[str]) -> str:
    for line in reversed(lines):
        if line:
            return line if len(line) <= 160 else line[:157] + "..."
    return ""


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
    lines = _clean_lines(text)

    precisions: dict[int, dict[str, Any]] = {}
    order: list[int] = []
    errors: list[int] = []
    corr_errors: list[int] = []
    mismatch: dict[int, tuple[int, int]] = {}
    shapes: dict[int, str] = {}
    correlations: dict[int, float] = {}
    latency: tuple[float, float | None] | None = None
    verdicts: list[tuple[int, str]] = []
    current_error: int | None = None
    check_after_verdict: str | None = None

    for lineno, line in enumerate(lines):
        if not line:
            continue
        is_check_line = False
        if line.startswith("[precision]"):
            m = _PRECISION.match(line)
            if not m:
                raise TranscriptError(f"malformed [precision] line: {line!r}.", text)
            idx = int(m["index"]) if m["index"] is not None else len(order)
            if idx in precisions:
                raise TranscriptError(
                    f"output {idx} has two [precision] lines: the transcript contradicts itself.", text
                )
            precisions[idx] = {
                "n": int(m["n"]) if m["n"] is not None else None,
                "l1": float(m["l1"]),
                "rel": float(m["rel"]),
                "abs": float(m["abs"]),
                "rtol": float(m["rtol"]),
                "atol": float(m["atol"]),
            }
            order.append(idx)
            is_check_line = True
        elif line.startswith("Latency (us):"):
            m = _LATENCY.match(line)
            if not m:
                raise TranscriptError(f"malformed latency line: {line!r}.", text)
            latency = (float(m["lat"]), float(m["gf"]) if m["gf"] is not None else None)
        elif m := _ERROR_OUTPUT.match(line):
            current_error = int(m["index"])
            errors.append(current_error)
            is_check_line = True
        elif m := _ERROR_CORR.match(line):
            corr_errors.append(int(m["index"]))
            is_check_line = True
        elif m := _CORRELATION.match(line):
            correlations[int(m["index"])] = float(m["c"])
            is_check_line = True
        elif line.startswith("Mismatches:"):
            m = _MISMATCHES.match(line)
            if not m:
                raise TranscriptError(f"malformed mismatch line: {line!r}.", text)
            if current_error is None:
                raise TranscriptError(
                    "a 'Mismatches:' line appears without the 'ERROR: Output N' line it belongs to.", text
                )
            bad, total = int(m["bad"]), int(m["total"])
            if bad > total:
                raise TranscriptError(
                    f"output {current_error} reports {bad} mismatches out of only {total} elements.", text
                )
            mismatch[current_error] = (bad, total)
            is_check_line = True
        elif (m := _SHAPE.match(line)) and current_error is not None and current_error not in shapes:
            shapes[current_error] = m["shape"]
        elif line in (_VERDICT_PASS, _VERDICT_FAIL):
            verdicts.append((lineno, line))
        if is_check_line and verdicts and check_after_verdict is None:
            check_after_verdict = line

    if not verdicts:
        if precisions or errors:
            raise TranscriptError(
                "the transcript ends without a verdict line ('PASS!' or 'failed.'): the run was cut off or the "
                f"harness crashed (last line: {_last_words(lines)!r}).",
                text,
            )
        raise TranscriptError(
            "the text matches none of the mlir-air harness formats: no [precision] line and no 'PASS!' / "
            f"'failed.' verdict (last line: {_last_words(lines)!r}).",
            text,
        )
    kinds = {v for _, v in verdicts}
    if len(kinds) > 1:
        raise TranscriptError("the transcript prints both 'PASS!' and 'failed.': it contradicts itself.", text)
    if len(verdicts) > 1:
        raise TranscriptError(
            f"the transcript prints the verdict {len(verdicts)} times; one harness run prints it once.", text
        )
    if check_after_verdict is not None:
        raise TranscriptError(
            f"check output continues after the verdict ({check_after_verdict!r}): several runs concatenated?", text
        )
    verdict: Verdict = "PASS" if verdicts[0][1] == _VERDICT_PASS else "FAIL"
    if require_precision and not precisions:
        raise TranscriptError(
            "the transcript has a verdict but no [precision] line: the harness must run with "
            "report_precision=True so its tolerances and error figures can be recorded.",
            text,
        )

    if verdict == "PASS":
        if errors or corr_errors or mismatch:
            bad = sum(b for b, _ in mismatch.values())
            raise TranscriptError(
                f"the transcript says 'PASS!' but also reports a failing output ({bad} mismatches): "
                "it contradicts itself.",
                text,
            )
        for idx, p in precisions.items():
            if not all(math.isfinite(p[k]) for k in ("l1", "rel", "abs")):
                raise TranscriptError(
                    f"the transcript says 'PASS!' but output {idx} has non-finite error figures "
                    f"(mean_rel_L1={p['l1']}, abs_err max={p['abs']}): a NaN/Inf output cannot pass.",
                    text,
                )

    for idx, (_, total) in mismatch.items():
        n = precisions.get(idx, {}).get("n")
        if n is not None and n != total:
            raise TranscriptError(
                f"output {idx} has {n} elements in its [precision] line but {total} in its mismatch line.", text
            )

    failing = (errors + corr_errors)[0] if (errors or corr_errors) else None
    outputs: list[OutputCheck] = []
    for idx in order:
        p = precisions[idx]
        if verdict == "PASS":
            passed, bad = True, 0
        elif failing is None:
            passed, bad = None, None
        elif idx < failing:
            passed, bad = True, 0
        elif idx == failing:
            passed = False
            bad = mismatch[idx][0] if idx in mismatch else (0 if idx in corr_errors and idx not in errors else None)
        else:
            passed, bad = None, None
        outputs.append(
            OutputCheck(
                index=idx,
                n_elements=p["n"],
                mean_rel_L1=p["l1"],
                max_rel=p["rel"],
                max_abs=p["abs"],
                rtol=p["rtol"],
                atol=p["atol"],
                passed=passed,
                mismatches=bad,
                shape=shapes.get(idx),
                correlation=correlations.get(idx),
            )
        )
    reasons: list[str] = []
    for idx in errors:
        if idx in mismatch:
            bad, total = mismatch[idx]
            reasons.append(f"output {idx}: {bad} of {total} elements outside atol + rtol*|ref|")
        else:
            reasons.append(f"output {idx} does not meet expected output")
    for idx in corr_errors:
        reasons.append(f"output {idx}: correlation {correlations.get(idx, math.nan)} below threshold")
    return HarnessResult(
        verdict=verdict,
        outputs=tuple(outputs),
        latency_us=latency[0] if latency else None,
        gflops=latency[1] if latency else None,
        failing_output=failing,
        failure_reasons=tuple(reasons),
    )


# --- make verify ---------------------------------------------------------------------------------------

_SUMMARY = re.compile(r"^\[verify\] Summary:\s*(?P<d>\{.*\})$")
_VERIFY_PASS = re.compile(r"^\[verify\] PASS$")
_VERIFY_FAIL = re.compile(r"^\[verify\] FAIL\b")
_REPORT_JSON = re.compile(r"^\[verify\] JSON:\s+(?P<p>\S.*)$")
_TOKEN_GATE_KEYS = (
    "prompt_index",
    "prompt",
    "executor",
    "n_tokens",
    "top_k",
    "passed",
    "divergence_step",
    "agreed_prefix",
    "chosen_ours",
    "chosen_ref",
    "topk_ours",
    "topk_ref",
    "rank_ours_in_ref",
    "rank_ref_in_ours",
    "kl_divergence",
    "kl_per_step",
)


@dataclass(frozen=True)
class VerifyPrompt:
    """One prompt of the top-k token gate (ours = the NPU side, ref = HF bf16)."""

    prompt_index: int
    prompt: str
    n_tokens: int
    top_k: int
    passed: bool
    divergence_step: int | None
    agreed_prefix: int
    chosen_ours: int | None
    chosen_ref: int | None
    topk_ours: list[int]
    topk_ref: list[int]
    rank_ours_in_ref: int | None
    rank_ref_in_ours: int | None
    kl_divergence: float | None = None
    kl_per_step: list[float] = field(default_factory=list)
    executor: str = "mlir-air"
    fail_reason: str | None = None
    agreed_prefix_text: str | None = None
    chosen_text_ours: str | None = None
    chosen_text_ref: str | None = None

    def token_gate_fields(self) -> dict[str, Any]:
        """The `TokenGateChecked` fields (the caller adds pipeline / context)."""
        return {k: getattr(self, k) for k in _TOKEN_GATE_KEYS}


@dataclass(frozen=True)
class VerifyResult:
    verdict: Verdict
    summary: dict[str, Any]
    prompts: tuple[VerifyPrompt, ...] = ()
    report_json_path: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def token_gate_fields(self) -> list[dict[str, Any]]:
        return [p.token_gate_fields() for p in self.prompts]


@dataclass(frozen=True)
class DiagnosisResult:
    summary: dict[str, Any]
    layers: tuple[dict[str, Any], ...]
    report_json_path: str | None = None


def _verify_lines(text: str) -> tuple[list[str], dict[str, Any] | None, list[str], str | None]:
    if not text or not text.strip():
        raise TranscriptError("the verify transcript is empty.", text)
    lines = _clean_lines(text)
    summaries: list[dict[str, Any]] = []
    verdicts: list[str] = []
    report_path = None
    for line in lines:
        if m := _SUMMARY.match(line):
            try:
                value = ast.literal_eval(m["d"])
            except (ValueError, SyntaxError) as e:
                raise TranscriptError(f"the [verify] Summary line is not a dict literal: {line!r}.", text) from e
            if not isinstance(value, dict):
                raise TranscriptError(f"the [verify] Summary line is not a dict: {line!r}.", text)
            summaries.append(value)
        elif _VERIFY_PASS.match(line):
            verdicts.append("PASS")
        elif _VERIFY_FAIL.match(line):
            verdicts.append("FAIL")
        elif m := _REPORT_JSON.match(line):
            report_path = m["p"].strip()
    if len(summaries) > 1:
        raise TranscriptError(
            f"the transcript prints {len(summaries)} [verify] Summary lines; one run prints one.", text
        )
    return lines, (summaries[0] if summaries else None), verdicts, report_path


def _summary_int(summary: dict[str, Any], key: str, text: str) -> int:
    value = summary.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TranscriptError(f"the [verify] Summary has no non-negative integer {key!r}: {summary!r}.", text)
    return value


def _one_verdict(verdicts: list[str], summary: dict[str, Any] | None, lines: list[str], text: str) -> Verdict:
    if not verdicts:
        if summary is not None:
            raise TranscriptError(
                "the transcript has a [verify] Summary but no '[verify] PASS' / '[verify] FAIL' line: truncated.", text
            )
        raise TranscriptError(
            "the text matches none of the mlir-air verify formats: no [verify] Summary and no "
            f"'[verify] PASS' / '[verify] FAIL' line (last line: {_last_words(lines)!r}).",
            text,
        )
    if len(set(verdicts)) > 1:
        raise TranscriptError("the transcript prints both '[verify] PASS' and '[verify] FAIL'.", text)
    if len(verdicts) > 1:
        raise TranscriptError(f"the transcript prints the verify verdict {len(verdicts)} times.", text)
    if summary is None:
        raise TranscriptError("the transcript has a verify verdict but no [verify] Summary line.", text)
    return verdicts[0]  # type: ignore[return-value]


def parse_verify_output(text: str, report_json: dict[str, Any] | None) -> VerifyResult:
    """Parse `make verify` (or `make verify-full`) output plus its report JSON.

    The verdict must agree with the Summary (`[verify] FAIL` exactly when `topk_failed > 0`; a PASS line
    with failed prompts is what `--no-strict` prints, and is rejected). With a report, its summary must
    equal the transcript's, it must hold one `npu_vs_hf` row per counted prompt, and every row's ranks and
    OK/FAIL status are re-derived from its top-k lists. `report_json=None` gives the verdict and summary
    with no per-prompt rows."""
    lines, summary, verdicts, report_path = _verify_lines(text)
    verdict = _one_verdict(verdicts, summary, lines, text)
    assert summary is not None
    passed = _summary_int(summary, "topk_passed", text)
    failed = _summary_int(summary, "topk_failed", text)
    if passed + failed == 0:
        raise TranscriptError(
            "the transcript checked no prompts (topk_passed = topk_failed = 0): it is a diagnosis run, not verify.",
            text,
        )
    if verdict == "PASS" and failed:
        raise TranscriptError(
            f"the transcript says '[verify] PASS' but its Summary counts {failed} failed prompt(s) "
            "(a --no-strict run?): it contradicts itself.",
            text,
        )
    if verdict == "FAIL" and not failed:
        raise TranscriptError("the transcript says '[verify] FAIL' but its Summary counts no failed prompt.", text)
    if report_json is None:
        return VerifyResult(verdict=verdict, summary=dict(summary), report_json_path=report_path)

    if not isinstance(report_json, dict):
        raise TranscriptError("the verify report is not a JSON object.")
    rows = report_json.get("topk_checks")
    if not isinstance(rows, list) or not rows:
        raise TranscriptError("the report has no topk_checks rows: it is not a verify_topk_token report.")
    rsum = report_json.get("summary")
    if not isinstance(rsum, dict) or (rsum.get("topk_passed"), rsum.get("topk_failed")) != (passed, failed):
        raise TranscriptError(
            f"the report's summary {rsum!r} does not match the transcript's Summary {summary!r}: "
            "the report is from another run."
        )
    full_prompts = report_json.get("prompts") if isinstance(report_json.get("prompts"), list) else []
    gate_rows = [row for row in rows if isinstance(row, dict) and row.get("pair", "npu_vs_hf") == "npu_vs_hf"]
    prompts = [_topk_row(row, full_prompts) for row in gate_rows]
    if len(prompts) != passed + failed:
        raise TranscriptError(
            f"the report holds {len(prompts)} npu_vs_hf rows but the Summary counts {passed + failed} prompts."
        )
    if sum(1 for p in prompts if not p.passed) != failed:
        raise TranscriptError("the report's per-prompt statuses do not add up to its summary's failed count.")
    indices = [p.prompt_index for p in prompts]
    if len(set(indices)) != len(indices):
        raise TranscriptError(f"the report lists a prompt twice (prompt indices {indices}).")
    config = report_json.get("config") if isinstance(report_json.get("config"), dict) else {}
    if config.get("mode") not in (None, "verify"):
        raise TranscriptError(f"the report's mode is {config.get('mode')!r}, not 'verify'.")
    return VerifyResult(
        verdict=verdict,
        summary=dict(summary),
        prompts=tuple(sorted(prompts, key=lambda p: p.prompt_index)),
        report_json_path=report_path,
        config=dict(config),
    )


def _int_or_none(row: dict[str, Any], key: str) -> int | None:
    value = row.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise TranscriptError(f"report row field {key!r} is not an integer: {value!r}.")
    return value


def _int_list(row: dict[str, Any], key: str) -> list[int]:
    value = row.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TranscriptError(f"report row field {key!r} is not a list of token ids: {value!r}.")
    return list(value)


def _rank(token: int, topk: list[int]) -> int | None:
    return topk.index(token) + 1 if token in topk else None


def _topk_row(row: dict[str, Any], full_prompts: list[Any]) -> VerifyPrompt:
    """Map one `TopKCheckRecord` dict onto TokenGateChecked fields, re-deriving ranks and status."""
    for key in ("prompt_idx", "n_steps", "k", "status"):
        if key not in row:
            raise TranscriptError(f"a report topk_checks row lacks {key!r}: {sorted(row)}.")
    idx = _int_or_none(row, "prompt_idx")
    n_steps = _int_or_none(row, "n_steps")
    k = _int_or_none(row, "k")
    if idx is None or n_steps is None or k is None or k < 1 or n_steps < 0:
        raise TranscriptError(f"a report row has an invalid prompt_idx/n_steps/k: {row!r}.")
    status = row["status"]
    if status not in ("OK", "FAIL"):
        raise TranscriptError(f"prompt {idx}: status {status!r} is neither 'OK' nor 'FAIL'.")
    div = _int_or_none(row, "divergence_step")
    ours, ref = _int_or_none(row, "test_chosen_at_div"), _int_or_none(row, "ref_chosen_at_div")
    topk_ours, topk_ref = _int_list(row, "test_topk_at_div"), _int_list(row, "ref_topk_at_div")
    rank_ours, rank_ref = _int_or_none(row, "test_chosen_rank_in_ref"), _int_or_none(row, "ref_chosen_rank_in_test")
    if div is None:
        if status != "OK" or ours is not None or ref is not None:
            raise TranscriptError(f"prompt {idx}: no divergence step, yet a chosen token or a FAIL status is recorded.")
        ok = True
    else:
        if not 0 <= div < max(n_steps, 1):
            raise TranscriptError(f"prompt {idx}: divergence step {div} lies outside the {n_steps} decoded steps.")
        if ours is None or ref is None or ours == ref:
            raise TranscriptError(f"prompt {idx}: a divergence at step {div} needs two different chosen tokens.")
        if not topk_ours or not topk_ref or len(topk_ours) > k or len(topk_ref) > k:
            raise TranscriptError(f"prompt {idx}: the top-{k} lists at the divergence step are missing or too long.")
        derived_ours, derived_ref = _rank(ours, topk_ref), _rank(ref, topk_ours)
        if (derived_ours, derived_ref) != (rank_ours, rank_ref):
            raise TranscriptError(
                f"prompt {idx}: recorded ranks {(rank_ours, rank_ref)} differ from the ranks in its top-{k} lists "
                f"{(derived_ours, derived_ref)}."
            )
        ok = derived_ours is not None and derived_ref is not None
        if ok != (status == "OK"):
            raise TranscriptError(f"prompt {idx}: status {status} contradicts the top-{k} lists at step {div}.")
    kl = row.get("kl_divergence")
    kl_steps = row.get("kl_per_step") or []
    if kl is not None and not isinstance(kl, (int, float)):
        raise TranscriptError(f"prompt {idx}: kl_divergence is not a number: {kl!r}.")
    if not isinstance(kl_steps, list) or not all(isinstance(v, (int, float)) for v in kl_steps):
        raise TranscriptError(f"prompt {idx}: kl_per_step is not a list of numbers.")
    prompt = full_prompts[idx] if 0 <= idx < len(full_prompts) and isinstance(full_prompts[idx], str) else None
    return VerifyPrompt(
        prompt_index=idx,
        prompt=prompt if prompt is not None else str(row.get("prompt_text") or ""),
        n_tokens=n_steps,
        top_k=k,
        passed=ok,
        divergence_step=div,
        agreed_prefix=div if div is not None else n_steps,
        chosen_ours=ours,
        chosen_ref=ref,
        topk_ours=topk_ours,
        topk_ref=topk_ref,
        rank_ours_in_ref=rank_ours,
        rank_ref_in_ours=rank_ref,
        kl_divergence=float(kl) if kl is not None else None,
        kl_per_step=[float(v) for v in kl_steps],
        fail_reason=row.get("fail_reason"),
        agreed_prefix_text=row.get("agreed_prefix_text"),
        chosen_text_ours=row.get("test_chosen_text_at_div"),
        chosen_text_ref=row.get("ref_chosen_text_at_div"),
    )


# --- make diagnosis ------------------------------------------------------------------------------------


def _finite_or_nan(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TranscriptError(f"{what} is not a number: {value!r}.")
    return float(value)


def parse_diagnosis_report(
    report_json: dict[str, Any], *, executor: str = "mlir-air", prompt_index: int = 0, probe: str = "ffn_out"
) -> list[dict[str, Any]]:
    """Map the `per_layer` rows of a `diagnosis_<stamp>.json` report onto `LayerDiagnosed` fields, by layer.

    Only rows of the block-output probe (`ffn_out`) count. A row without a layer, cosine aggregates outside
    [-1, 1] (NaN is kept: it is evidence), a layer listed twice, or a report with no such row raises."""
    if not isinstance(report_json, dict):
        raise TranscriptError("the diagnosis report is not a JSON object.")
    config = report_json.get("config") if isinstance(report_json.get("config"), dict) else {}
    if config.get("mode") not in (None, "diagnosis"):
        raise TranscriptError(f"the report's mode is {config.get('mode')!r}, not 'diagnosis'.")
    rows = report_json.get("per_layer")
    if not isinstance(rows, list):
        raise TranscriptError("the report has no per_layer list: it is not a diagnosis report.")
    out: dict[int, dict[str, Any]] = {}
    for row in rows:
        if not isinstance(row, dict) or row.get("name") != probe:
            continue
        layer = row.get("layer")
        if not isinstance(layer, int) or isinstance(layer, bool) or layer < 0:
            raise TranscriptError(f"a per_layer row has no valid layer index: {row!r}.")
        cos, err = row.get("cosine"), row.get("errors")
        if not isinstance(cos, dict) or not isinstance(err, dict):
            raise TranscriptError(f"layer {layer}: the row lacks its cosine/errors tables.")
        try:
            fields = {
                "layer": layer,
                "executor": executor,
                "cos_min": _finite_or_nan(cos["min"], f"layer {layer} cosine min"),
                "cos_p5": _finite_or_nan(cos["p5"], f"layer {layer} cosine p5"),
                "cos_median": _finite_or_nan(cos["median"], f"layer {layer} cosine median"),
                "cos_mean": _finite_or_nan(cos["mean"], f"layer {layer} cosine mean"),
                "max_abs": _finite_or_nan(err["max_abs"], f"layer {layer} max_abs"),
                "mean_abs": _finite_or_nan(err["mean_abs"], f"layer {layer} mean_abs"),
                "prompt_index": prompt_index,
            }
        except KeyError as e:
            raise TranscriptError(f"layer {layer}: the row lacks {e.args[0]!r}.") from e
        for key in ("cos_min", "cos_p5", "cos_median", "cos_mean"):
            v = fields[key]
            if not math.isnan(v) and not -1.0001 <= v <= 1.0001:
                raise TranscriptError(f"layer {layer}: {key} = {v} is not a cosine.")
        if layer in out:
            raise TranscriptError(f"layer {layer} appears twice in the diagnosis report.")
        out[layer] = fields
    if not out:
        raise TranscriptError(f"the diagnosis report holds no {probe!r} rows.")
    return [out[layer] for layer in sorted(out)]


def parse_diagnosis_output(
    text: str, report_json: dict[str, Any] | None, *, executor: str = "mlir-air", prompt_index: int = 0
) -> DiagnosisResult:
    """Parse `make diagnosis` output plus its report: the run must end in `[verify] PASS` (diagnosis never
    fails on numbers, so a FAIL or a missing verdict means the run broke) and the Summary's
    `n_layer_records` must equal the report's per_layer row count. `report_json=None` checks the
    transcript alone and returns no layers."""
    lines, summary, verdicts, report_path = _verify_lines(text)
    verdict = _one_verdict(verdicts, summary, lines, text)
    assert summary is not None
    n_records = _summary_int(summary, "n_layer_records", text)
    if verdict != "PASS":
        raise TranscriptError("the diagnosis run printed '[verify] FAIL'; diagnosis has no failing verdict.", text)
    if report_json is None:
        return DiagnosisResult(summary=dict(summary), layers=(), report_json_path=report_path)
    layers = parse_diagnosis_report(report_json, executor=executor, prompt_index=prompt_index)
    rows = report_json.get("per_layer") or []
    if n_records != len(rows):
        raise TranscriptError(
            f"the Summary counts {n_records} layer records but the report holds {len(rows)}: "
            "the report is from another run."
        )
    return DiagnosisResult(summary=dict(summary), layers=tuple(layers), report_json_path=report_path)
