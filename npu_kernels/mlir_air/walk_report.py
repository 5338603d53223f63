"""Reader of `make verify-walk` (npu_kernels.mlir_air.walk): its transcript and its teacher_forced_walk_*.json.

`parse_walk_output(text, report_json)` checks the transcript's `[walk] Summary: {...}` and `[walk] PASS` /
`[walk] FAIL` against the report, and re-derives every row from its own numbers before it is evidence: the
step numbering, each forced token being the reference's argmax, both ranks from the top-5 lists, the
perplexity ratio from the log-probs, and the teacher-forced verdict from npu_kernels.thresholds (the stricter of
the recorded thresholds and today's). Each prompt gives the `TokenGateChecked` fields of the walk (tf_*,
thresholds, the greedy prefix tokens_ours / tokens_ref and their text). Garbage, truncation and
contradictions raise `TranscriptError`; nothing here touches the ledger.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npu_kernels.mlir_air.output import TranscriptError
from npu_kernels.thresholds import perplexity_ratio, strictest_teacher_forced, teacher_forced_problems

_JSON = re.compile(r"^\[walk\] JSON:\s+(?P<p>\S.*)$")
_SUMMARY = re.compile(r"^\[walk\] Summary:\s*(?P<d>\{.*\})$")
_VERDICT = re.compile(r"^\[walk\] (?P<v>PASS|FAIL)$")


@dataclass(frozen=True)
class WalkPrompt:
    prompt_index: int
    prompt: str
    divergence_step: int | None  # the walk's own first divergence (the greedy prefix it walked)
    first_divergence_passed: bool
    fields: dict[str, Any]  # TokenGateChecked fields of the teacher-forced walk


@dataclass(frozen=True)
class WalkResult:
    verdict: str
    summary: dict[str, Any]
    prompts: tuple[WalkPrompt, ...] = ()
    command: str = ""
    config: dict[str, Any] = field(default_factory=dict)

    def by_index(self) -> dict[int, WalkPrompt]:
        return {p.prompt_index: p for p in self.prompts}


def report_path(text: str, model_dir: str | Path) -> str | None:
    """The report the transcript names (`[walk] JSON: <path>`, relative paths from the model directory or a
    build directory under it), if it exists."""
    named = [m["p"].strip() for line in text.splitlines() if (m := _JSON.match(line.strip()))]
    base = Path(model_dir)
    for name in reversed(named):
        for root in (base, *sorted(base.glob("build*"))):
            path = Path(name) if Path(name).is_absolute() else root / name
            if path.is_file():
                return str(path)
    return None


def _transcript(text: str) -> tuple[dict[str, Any], str]:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    summaries = [m["d"] for line in lines if (m := _SUMMARY.match(line))]
    verdicts = [m["v"] for line in lines if (m := _VERDICT.match(line))]
    if len(summaries) != 1 or len(verdicts) != 1:
        last = lines[-1] if lines else ""
        raise TranscriptError(f"the walk transcript has {len(summaries)} [walk] Summary and {len(verdicts)} "
                              f"[walk] PASS/FAIL lines, not one each (last line: {last[-160:]!r}).", text)
    try:
        summary = ast.literal_eval(summaries[0])
    except (ValueError, SyntaxError) as e:
        raise TranscriptError(f"the [walk] Summary is not a dict literal: {summaries[0]!r}.", text) from e
    if not isinstance(summary, dict):
        raise TranscriptError(f"the [walk] Summary is not a dict: {summaries[0]!r}.", text)
    return summary, verdicts[0]


def _ints(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TranscriptError(f"{what} is not a list of token ids: {value!r}.")
    return list(value)


def _num(value: Any, what: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TranscriptError(f"{what} is not a number: {value!r}.")
    return float(value)


def _rank(token: int, top: list[int]) -> int | None:
    return top.index(token) + 1 if token in top else None


def _row(row: Any) -> WalkPrompt:
    if not isinstance(row, dict):
        raise TranscriptError(f"a walk row is not an object: {row!r}.")
    for key in ("prompt_idx", "prompt", "n_steps", "k", "steps", "ppl_ratio", "nan_count", "tf_passed",
                "first_divergence", "thresholds"):
        if key not in row:
            raise TranscriptError(f"a walk row lacks {key!r}: {sorted(row)}.")
    idx, n, k = row["prompt_idx"], row["n_steps"], row["k"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (idx, n, k)) or n < 1 or k < 1:
        raise TranscriptError(f"a walk row has an invalid prompt_idx / n_steps / k: {(idx, n, k)!r}.")
    where = f"walk prompt {idx}"
    steps = row["steps"]
    if not isinstance(steps, list) or len(steps) > n:
        raise TranscriptError(f"{where}: steps is not a list of at most {n}.")
    tokens, top_o, top_r, kls, lp_o, lp_r = [], [], [], [], [], []
    for i, s in enumerate(steps):
        if not isinstance(s, dict) or s.get("step") != i:
            raise TranscriptError(f"{where}: step {i} is missing or out of order.")
        o, r = _ints(s.get("topk_ours"), f"{where} step {i} topk_ours"), _ints(s.get("topk_ref"), f"{where} step {i} topk_ref")
        token = s.get("token")
        if not o or not r or len(o) > k or len(r) > k or token != r[0]:
            raise TranscriptError(f"{where} step {i}: the forced token {token!r} is not the reference's argmax "
                                  f"{r[:1]}, or a top-{k} list is empty or too long.")
        if (s.get("rank_ref_in_ours"), s.get("rank_ours_in_ref")) != (_rank(token, o), _rank(o[0], r)):
            raise TranscriptError(f"{where} step {i}: recorded ranks differ from the ranks in its top-{k} lists.")
        tokens.append(token)
        top_o.append(o)
        top_r.append(r)
        kls.append(_num(s.get("kl"), f"{where} step {i} kl"))
        lp_o.append(_num(s.get("logprob_ours"), f"{where} step {i} logprob_ours"))
        lp_r.append(_num(s.get("logprob_ref"), f"{where} step {i} logprob_ref"))
    ratio = perplexity_ratio(lp_o, lp_r)
    recorded = row["ppl_ratio"]
    if (ratio is None) != (recorded is None) or (ratio is not None and not math.isclose(
            ratio, _num(recorded, f"{where} ppl_ratio"), rel_tol=1e-9)):
        raise TranscriptError(f"{where}: perplexity ratio {recorded!r} does not re-derive from the log-probs ({ratio}).")
    nan = row["nan_count"]
    if not isinstance(nan, int) or isinstance(nan, bool) or nan < 0:
        raise TranscriptError(f"{where}: nan_count {nan!r} is not a count.")
    thresholds = row["thresholds"] if isinstance(row["thresholds"], dict) else {}
    problems = teacher_forced_problems(top_o, top_r, kls, ratio, n, strictest_teacher_forced(thresholds))
    passed = not problems and not nan
    if row["tf_passed"] is not passed:
        raise TranscriptError(f"{where}: recorded tf_passed {row['tf_passed']!r} contradicts its own numbers "
                              f"({'; '.join(problems) or 'NaN' if not passed else 'they pass'}).")
    fd = row["first_divergence"]
    if not isinstance(fd, dict):
        raise TranscriptError(f"{where}: first_divergence is not an object.")
    div = fd.get("divergence_step")
    if div is not None and (not isinstance(div, int) or isinstance(div, bool) or not 0 <= div < n):
        raise TranscriptError(f"{where}: divergence step {div!r} lies outside the {n} steps.")
    ours, ref = _ints(fd.get("tokens_ours"), f"{where} tokens_ours"), _ints(fd.get("tokens_ref"), f"{where} tokens_ref")
    if ref != tokens[: len(ref)]:
        raise TranscriptError(f"{where}: the greedy reference tokens are not a prefix of the forced tokens.")
    fields = {"tf_steps": len(tokens), "tf_tokens": tokens, "tf_topk_ours": top_o, "tf_topk_ref": top_r,
              "tf_kl_per_step": kls, "tf_logprob_ours": lp_o, "tf_logprob_ref": lp_r, "tf_ppl_ratio": ratio,
              "tf_passed": passed, "thresholds": dict(thresholds), "tokens_ours": ours, "tokens_ref": ref,
              "nan_count": nan, "text_ours": str(row.get("text_ours") or ""), "text_ref": str(row.get("text_ref") or "")}
    return WalkPrompt(idx, str(row["prompt"]), div, bool(fd.get("passed")), fields)


def parse_walk_output(text: str, report_json: Any) -> WalkResult:
    """The walk's verdict, summary and per-prompt fields; see the module docstring."""
    summary, verdict = _transcript(text)
    if not isinstance(report_json, dict) or not isinstance(report_json.get("walks"), list) or not report_json["walks"]:
        raise TranscriptError("the walk report has no walks.")
    if report_json.get("summary") != summary:
        raise TranscriptError(f"the report's summary {report_json.get('summary')!r} is not the transcript's "
                              f"{summary!r}: the report is from another run.")
    prompts = tuple(_row(r) for r in report_json["walks"])
    indices = [p.prompt_index for p in prompts]
    if len(set(indices)) != len(indices):
        raise TranscriptError(f"the walk report lists a prompt twice ({indices}).")
    failed = sum(1 for p in prompts if not p.fields["tf_passed"])
    if summary != {"walk_passed": len(prompts) - failed, "walk_failed": failed}:
        raise TranscriptError(f"the walk's summary {summary!r} does not count its {len(prompts)} rows "
                              f"({failed} failed).")
    if (verdict == "FAIL") != bool(failed):
        raise TranscriptError(f"the transcript says [walk] {verdict} with {failed} failed prompt(s).")
    config = report_json.get("config") if isinstance(report_json.get("config"), dict) else {}
    return WalkResult(verdict, summary, tuple(sorted(prompts, key=lambda p: p.prompt_index)),
                      str(report_json.get("command") or ""), dict(config))
