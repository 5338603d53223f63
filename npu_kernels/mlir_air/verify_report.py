"""Parser for `make verify` of an mlir-air LLM directory (programming_examples/llms/verify/verify_runner.py).

`parse_verify_output` reads the transcript's `[verify] Summary: {...}` (a Python dict repr), `[verify] PASS` or
`[verify] FAIL ...`, and the `reports/verify_topk_token_<stamp>.json` report, whose `topk_checks` rows are
mapped onto the fields of the `TokenGateChecked` event. Each row's ranks and status are re-derived from its
top-k lists. Garbage, truncation and contradictions raise `TranscriptError`; nothing here touches the ledger.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from npu_kernels.mlir_air.output import TranscriptError, Verdict, clean_lines, last_words

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
class VerifyReport:
    verdict: Verdict
    summary: dict[str, Any]
    prompts: tuple[VerifyPrompt, ...] = ()
    report_json_path: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def token_gate_fields(self) -> list[dict[str, Any]]:
        return [p.token_gate_fields() for p in self.prompts]


def verify_lines(text: str) -> tuple[list[str], dict[str, Any] | None, list[str], str | None]:
    """The `[verify]` lines of a verify (or diagnosis) transcript: (clean lines, the one Summary dict or None,
    the PASS / FAIL verdicts in order, the JSON report path or None); raises TranscriptError on an empty
    transcript or a malformed / repeated Summary."""
    if not text or not text.strip():
        raise TranscriptError("the verify transcript is empty.", text)
    lines = clean_lines(text)
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


def summary_int(summary: dict[str, Any], key: str, text: str) -> int:
    """`summary[key]` as a non-negative int, or TranscriptError naming the key."""
    value = summary.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TranscriptError(f"the [verify] Summary has no non-negative integer {key!r}: {summary!r}.", text)
    return value


def one_verdict(verdicts: list[str], summary: dict[str, Any] | None, lines: list[str], text: str) -> Verdict:
    """The single `[verify] PASS` / `FAIL` a complete run prints, or TranscriptError saying what is wrong
    (none, both, repeated, or no Summary beside it)."""
    if not verdicts:
        if summary is not None:
            raise TranscriptError(
                "the transcript has a [verify] Summary but no '[verify] PASS' / '[verify] FAIL' line: truncated.", text
            )
        raise TranscriptError(
            "the text matches none of the mlir-air verify formats: no [verify] Summary and no "
            f"'[verify] PASS' / '[verify] FAIL' line (last line: {last_words(lines)!r}).",
            text,
        )
    if len(set(verdicts)) > 1:
        raise TranscriptError("the transcript prints both '[verify] PASS' and '[verify] FAIL'.", text)
    if len(verdicts) > 1:
        raise TranscriptError(f"the transcript prints the verify verdict {len(verdicts)} times.", text)
    if summary is None:
        raise TranscriptError("the transcript has a verify verdict but no [verify] Summary line.", text)
    return verdicts[0]  # type: ignore[return-value]


def parse_verify_output(text: str, report_json: dict[str, Any] | None) -> VerifyReport:
    """Parse `make verify` (or `make verify-full`) output plus its report JSON.

    The verdict must agree with the Summary (`[verify] FAIL` exactly when `topk_failed > 0`; a PASS line
    with failed prompts is what `--no-strict` prints, and is rejected). With a report, its summary must
    equal the transcript's, it must hold one `npu_vs_hf` row per counted prompt, and every row's ranks and
    OK/FAIL status are re-derived from its top-k lists. `report_json=None` gives the verdict and summary
    with no per-prompt rows."""
    lines, summary, verdicts, report_path = verify_lines(text)
    verdict = one_verdict(verdicts, summary, lines, text)
    assert summary is not None
    passed = summary_int(summary, "topk_passed", text)
    failed = summary_int(summary, "topk_failed", text)
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
        return VerifyReport(verdict=verdict, summary=dict(summary), report_json_path=report_path)

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
    return VerifyReport(
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
