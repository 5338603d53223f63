"""Failure triage: mlir-air's NPU debugging playbooks as data (rules.toml) and a small matcher.

A rule names a known failure and carries `patterns` (regexes over compiler/runtime output) and/or
predicates over an **evidence dict**, plus the playbook's root cause, what to check, the remedy, and
whether the failure is a known hardware/compiler limit. Predicates are named functions from the table
`PREDICATES` with parameters written in the TOML (`{ fn = "ge", key = "head_dim", value = 128 }`); no
expression from the TOML is ever evaluated as code.

Evidence keys (all optional; a predicate whose keys are missing is *unknown*, not false). The phase
gates build this dict:

  kind                  "kernel" | "block" | "token_gate" | "diagnosis" | "transcript"
  kernel                gemm, gemv, rmsnorm, layernorm, rope, flash_attention, eltwise_add, silu_mul, gelu
  shape, tile           dicts; keys are matched case-insensitively (M, K, N / tile_m, tile_n, tile_k_l2,
                        herd_m, herd_n, lkp, ...); predicates also look for a name at the top level
  herd                  [rows, cols] of the herd, e.g. [8, 4]
  nan_count, n_elements, mismatches, mean_rel_L1, max_abs        from the output check
  contract, mismatch_ref_max, mismatch_err_max   the row's contract; the largest |ref| / error at a mismatch
  all_zero, constant_output      bool: the output is all zeros / one repeated value
  correlation           output vs reference (also accepted: cosine)
  bad_column_fraction, first_bad_column   fraction of output columns holding any mismatch / the first one
  second_call_mismatch  bool: the first call is correct and a later call of the same kernel is wrong
  first_call_nan        bool: NaN on the first call only (later calls look fine)
  standalone_ok         bool: the kernel passes its standalone harness
  chained_ok            bool: the kernel is still correct when chained with other kernels / layers
  layer_cosines         list of per-layer cosines (whole-tensor or per-position min), layer 0 first
  block_cosine, per_position_min         Phase 2 block gate figures
  culprit               the kernel the Phase 2 bisect names (gemm, flash_attention, eltwise_add, ...)
  divergence_step       first token step where the two sides differ (None = no divergence)
  token_gate_passed     bool, the prompt's token-gate verdict (the KV-cache and LM-head rules need it, or
                        both ranks); rank_ours_in_ref / rank_ref_in_ours: 1-based ranks (None = outside top-k)
  prefill_ok            bool: prefill output (per-layer cosine, first token) matches the reference
  head_dim, dk_chunks, lkp, layout ("seq-first" | "head-first")   flash attention
  runtime_hang          bool: the NPU call hung / timed out at run time
  smaller_shape_passes  bool: the same kernel passes at smaller variants of the failing shape
  multi_launch          bool: the failing build is a merged multi-launch ELF
  compile_seconds       float; timed_out_stage: "compile" | "run"

Matching. A rule has `applies_to` predicates (its scope: e.g. kernel is flash_attention) and symptom
`predicates`; a symptom may be marked `key_symptom = true`. The rule matches when no scope or symptom
predicate is false and there is positive evidence: a pattern hit in the text, or every key symptom true
(or, for a rule with no key symptom, at least one symptom true). Scope predicates never count as
evidence on their own, and an unknown predicate (its evidence keys missing) never blocks a match. A rule
with `text_context` regexes (e.g. "the log is about flash attention") counts its pattern hits only when
one of them also appears in the text, or when a scope predicate is known to hold.

Confidence (0..1), documented so that it can be re-derived:
  t = 0 with no pattern hit, else min(0.85, 0.55 + 0.15 * (distinct patterns hit - 1))
  p = 0.9 * (symptoms true) / (symptoms true + symptoms unknown)      (0 when none is true)
  confidence = 1 - (1 - t) * (1 - p), rounded to 3 places
so one pattern hit gives 0.55, evidence that fits every symptom exactly gives 0.9, and both give ≥ 0.95.
Matches are ranked by confidence, then by the number of scope predicates known to hold, then by the
rule's position in the file.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

DEFAULT_RULES = Path(__file__).resolve().parent / "rules.toml"
MAX_MATCHED_LINES = 10
_MISSING = object()

Outcome = tuple[bool | None, str]  # (true / false / unknown, a sentence about the fact used)


class RuleError(ValueError):
    """Raised when a rules file is malformed: a missing field, a bad regex, an unknown predicate or
    parameter, or a duplicate rule id."""


# --- evidence access ----------------------------------------------------------------------------------


def _ci_get(mapping: Any, name: str) -> Any:
    if not isinstance(mapping, dict):
        return _MISSING
    if name in mapping:
        return mapping[name]
    low = name.lower()
    for k, v in mapping.items():
        if str(k).lower() == low:
            return v
    return _MISSING


def lookup(evidence: dict[str, Any], key: str) -> Any:
    """Value of `key` in the evidence: a dotted path (`shape.N`), or a bare name looked up at the top
    level and then in `shape` and `tile` (case-insensitive). `_MISSING` when absent."""
    if "." in key:
        cur: Any = evidence
        for part in key.split("."):
            cur = _ci_get(cur, part)
            if cur is _MISSING:
                return _MISSING
        return cur
    for where in (evidence, evidence.get("shape"), evidence.get("tile")):
        value = _ci_get(where, key)
        if value is not _MISSING:
            return value
    return _MISSING


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _herd_dim(evidence: dict[str, Any], name: str, index: int) -> Any:
    value = lookup(evidence, name)
    if value is not _MISSING:
        return value
    herd = evidence.get("herd")
    if isinstance(herd, (list, tuple)) and len(herd) > index:
        return herd[index]
    return _MISSING


# --- predicates ---------------------------------------------------------------------------------------


def _compare(op: str, symbol: str, test: Callable[[float, float], bool]):
    def predicate(ev: dict[str, Any], *, key: str, value: float) -> Outcome:
        got = lookup(ev, key)
        if got is _MISSING or got is None:
            return None, ""
        x = _num(got)
        if x is None or math.isnan(x):
            return None, ""
        ok = test(x, float(value))
        return ok, f"{key} = {got:g} ({'' if ok else 'not '}{symbol} {value:g})"

    predicate.__name__ = op
    return predicate


def eq(ev: dict[str, Any], *, key: str, value: Any) -> Outcome:
    got = lookup(ev, key)
    if got is _MISSING:
        return None, ""
    if isinstance(value, str) and isinstance(got, str):
        ok = got.lower() == value.lower()
    else:
        ok = got == value
    return ok, f"{key} = {got!r}"


def one_of(ev: dict[str, Any], *, key: str, values: list[Any]) -> Outcome:
    got = lookup(ev, key)
    if got is _MISSING or got is None:
        return None, ""
    norm = [v.lower() if isinstance(v, str) else v for v in values]
    ok = (got.lower() if isinstance(got, str) else got) in norm
    return ok, f"{key} = {got!r}"


def is_true(ev: dict[str, Any], *, key: str) -> Outcome:
    got = lookup(ev, key)
    if not isinstance(got, bool):
        return None, ""
    return got, f"{key} = {str(got).lower()}"


def is_false(ev: dict[str, Any], *, key: str) -> Outcome:
    got = lookup(ev, key)
    if not isinstance(got, bool):
        return None, ""
    return (not got), f"{key} = {str(got).lower()}"


def is_nan(ev: dict[str, Any], *, key: str) -> Outcome:
    got = lookup(ev, key)
    x = _num(got) if got is not _MISSING else None
    if x is None:
        return None, ""
    return math.isnan(x), f"{key} = {got}"


def nan_present(ev: dict[str, Any]) -> Outcome:
    """NaN in the output: nan_count > 0, or a NaN mean_rel_L1 / max_abs."""
    count = _num(lookup(ev, "nan_count"))
    if count is not None and count > 0:
        return True, f"nan_count = {int(count)}"
    for key in ("mean_rel_L1", "max_abs"):
        x = _num(lookup(ev, key))
        if x is not None and math.isnan(x):
            return True, f"{key} = nan"
    if count is not None:
        return False, "nan_count = 0"
    known = [_num(lookup(ev, k)) for k in ("mean_rel_L1", "max_abs")]
    return (False, "error figures are finite") if any(v is not None for v in known) else (None, "")


def gemm_n_misaligned(ev: dict[str, Any]) -> Outcome:
    """GEMM `N % (tile_n * herd_n) != 0`, which the builder does not assert."""
    n, tile_n, herd_n = _num(lookup(ev, "N")), _num(lookup(ev, "tile_n")), _num(_herd_dim(ev, "herd_n", 1))
    if n is None or tile_n is None or herd_n is None or tile_n * herd_n == 0:
        return None, ""
    step = int(tile_n * herd_n)
    ok = int(n) % step != 0
    product = f"tile_n*herd_n = {int(tile_n)}*{int(herd_n)} = {step}"
    return ok, f"N = {int(n)} is {'not ' if ok else ''}a multiple of {product}"


def gemm_b_stride_exceeds(ev: dict[str, Any], *, limit: int = 1048576) -> Outcome:
    """GEMM B-tile DMA stride `tile_k_l2 * N` above the buffer-descriptor stride cap."""
    n, tk = _num(lookup(ev, "N")), _num(lookup(ev, "tile_k_l2"))
    if n is None or tk is None:
        return None, ""
    stride = int(n * tk)
    ok = stride > limit
    return ok, f"tile_k_l2*N = {int(tk)}*{int(n)} = {stride} ({'above' if ok else 'within'} the {limit} stride cap)"


def gemv_l2_overflow(ev: dict[str, Any], *, budget: int = 524288) -> Outcome:
    """GEMV staged L2 buffer `herd_m*tile_m*K*2 + herd_m*tile_m*2` bytes above the memtile budget."""
    k, tm, hm = _num(lookup(ev, "K")), _num(lookup(ev, "tile_m")), _num(_herd_dim(ev, "herd_m", 0))
    if k is None or tm is None or hm is None:
        return None, ""
    need = int(hm * tm * k * 2 + hm * tm * 2)
    ok = need > budget
    return ok, f"GEMV L2 staging = {need} bytes ({'above' if ok else 'within'} the {budget}-byte budget)"


def near_zero_atol_trip(ev: dict[str, Any]) -> Outcome:
    """A GEMM's mismatches are the high-precision atol tripping, not a wrong datapath: mean_rel_L1 inside the
    high tier (ATOL_ARTIFACT's bound), every mismatch at a near-zero reference (|ref| <= the low tier's
    atol / rtol, where its tolerance is atol-dominated) and within the low tier's atol: the low tier holds it."""
    from kernels.thresholds import ATOL_ARTIFACT, kernel_tolerance

    n, ref_max = _num(lookup(ev, "mismatches")), _num(lookup(ev, "mismatch_ref_max"))
    err_max, rel = _num(lookup(ev, "mismatch_err_max")), _num(lookup(ev, "mean_rel_L1"))
    if None in (n, ref_max, err_max, rel) or any(math.isnan(x) for x in (ref_max, err_max, rel)):
        return None, ""
    if n <= 0:
        return False, "no mismatches"
    rtol, atol = kernel_tolerance("gemm", "bf16-out-low")
    ok = rel <= ATOL_ARTIFACT["max_mean_rel_L1"] and ref_max <= atol / rtol and err_max <= atol
    return ok, (f"{int(n)} mismatches at |ref| <= {ref_max:.3g}, error <= {err_max:.3g} (low tier: atol {atol:g}, "
                f"atol/rtol {atol / rtol:.3g}), mean_rel_L1 {rel:.3g} (high tier <= {ATOL_ARTIFACT['max_mean_rel_L1']:g})")


def tile_rule_broken(ev: dict[str, Any], *, rules: list[str]) -> Outcome:
    """The evidence's (kernel, shape, tile) breaks one of the tile planner's hard rules named in `rules`
    (kernels.tiles.check_tile re-derives it from the recorded shape and tile, completed with the planner's
    defaults): true naming the rule and its numbers; unknown when the tile keeps them or there is no kernel
    and shape."""
    from kernels.tiles import check_tile, default_tile

    kernel, shape, tile = ev.get("kernel"), ev.get("shape"), ev.get("tile")
    if not isinstance(kernel, str) or not isinstance(shape, dict) or not any(r.startswith(f"{kernel}.") for r in rules):
        return None, ""
    try:
        full = {**default_tile(kernel, shape, ev.get("target") or "npu2"), **(tile or {})}
        broken = [(name, msg) for name, msg in check_tile(kernel, shape, full, ev.get("target") or "npu2")
                  if name in rules]
    except Exception:  # noqa: BLE001 - a shape the catalog cannot read is not evidence either way
        return None, ""
    if broken:
        return True, "; ".join(f"{name}: {msg}" for name, msg in broken)
    # a kept rule is no evidence against the error text: the planner checks every rule before anything runs,
    # so the same message can come from elsewhere (a merged ELF, a hand-set tile) - unknown, not false
    return None, ""


def fa_dk_chunks_gt(ev: dict[str, Any], *, value: int = 1) -> Outcome:
    """Flash attention head-dim chunks above `value`: dk_chunks, or head_dim / lkp (lkp defaults to 64,
    the Makefile's LKP and the only working point in mlir-air's FlashAttention sweep)."""
    chunks = _num(lookup(ev, "dk_chunks"))
    how = "dk_chunks"
    if chunks is None:
        hd = _num(lookup(ev, "head_dim"))
        if hd is None:
            hd = _num(lookup(ev, "DK"))
        lkp = _num(lookup(ev, "lkp")) or 64.0
        if hd is None:
            return None, ""
        chunks = hd / lkp
        how = f"head_dim / lkp = {int(hd)} / {int(lkp)}"
    ok = chunks > value
    return ok, f"{how} = {chunks:g} dk chunk(s) ({'' if ok else 'not '}> {value})"


def _layer_cosines(ev: dict[str, Any]) -> list[float] | None:
    raw = ev.get("layer_cosines")
    if not isinstance(raw, (list, tuple)) or len(raw) < 2:
        return None
    vals = [_num(v) for v in raw]
    if any(v is None for v in vals):
        return None
    return vals  # type: ignore[return-value]


def _largest_drop(cos: list[float]) -> tuple[float, int]:
    drops = [(cos[i] - cos[i + 1], i) for i in range(len(cos) - 1) if not math.isnan(cos[i] - cos[i + 1])]
    return max(drops) if drops else (0.0, 0)


def cosine_cliff(ev: dict[str, Any], *, min_drop: float = 0.05) -> Outcome:
    """A sudden per-layer cosine drop `cos[i] - cos[i+1] > min_drop` between consecutive layers."""
    cos = _layer_cosines(ev)
    if cos is None:
        return None, ""
    drop, i = _largest_drop(cos)
    if drop > min_drop:
        return True, (
            f"layer cosine falls {drop:.3f} from layer {i} ({cos[i]:.4f}) to layer {i + 1} ({cos[i + 1]:.4f}), "
            f"above the {min_drop:g} cliff threshold"
        )
    return False, f"largest layer-to-layer cosine drop is {drop:.3f} (no cliff above {min_drop:g})"


def layers_healthy(ev: dict[str, Any], *, min_cos: float = 0.85, min_drop: float = 0.05) -> Outcome:
    """Every layer cosine ≥ min_cos and no cliff."""
    cos = _layer_cosines(ev)
    if cos is None:
        return None, ""
    drop, _ = _largest_drop(cos)
    low = min(cos)
    ok = not any(math.isnan(c) for c in cos) and low >= min_cos and drop <= min_drop
    return ok, f"per-layer cosine min {low:.4f}, largest drop {drop:.3f}"


def gradual_drift(ev: dict[str, Any], *, below: float = 0.85, min_drop: float = 0.05) -> Outcome:
    """The last layer's cosine is below `below` without any cliff (a slow slide, not a step)."""
    cos = _layer_cosines(ev)
    if cos is None:
        return None, ""
    drop, _ = _largest_drop(cos)
    ok = cos[-1] < below and drop <= min_drop
    return ok, f"last-layer cosine {cos[-1]:.4f} (threshold {below:g}), largest drop {drop:.3f}"


def token_gate_failed(ev: dict[str, Any]) -> Outcome:
    """The token gate failed at the first divergence: token_gate_passed is false, or a rank is None."""
    passed = ev.get("token_gate_passed")
    if isinstance(passed, bool):
        return (not passed), f"token_gate_passed = {str(passed).lower()}"
    if "divergence_step" in ev and ev["divergence_step"] is None:
        return False, "no divergence"
    if "rank_ours_in_ref" in ev and "rank_ref_in_ours" in ev:
        a, b = ev["rank_ours_in_ref"], ev["rank_ref_in_ours"]
        ok = a is None or b is None
        return ok, f"ranks at the divergence: ours in ref {a}, ref in ours {b}"
    return None, ""


def divergence_step(ev: dict[str, Any], *, op: str, value: int) -> Outcome:
    """Compare the first divergence step (None = no divergence, which is false for every comparison)."""
    if "divergence_step" not in ev:
        return None, ""
    step = ev["divergence_step"]
    if step is None:
        return False, "no divergence"
    x = _num(step)
    if x is None:
        return None, ""
    ok = {"eq": x == value, "ge": x >= value, "gt": x > value, "le": x <= value, "lt": x < value}[op]
    return ok, f"first divergence at token step {int(x)}"


def per_position_below_threshold(ev: dict[str, Any]) -> Outcome:
    """Phase 2: per-position cosine min under its head_dim threshold (`kernels.thresholds.per_position_threshold`)."""
    ppm, hd = _num(lookup(ev, "per_position_min")), _num(lookup(ev, "head_dim"))
    if ppm is None:
        return None, ""
    from kernels.thresholds import per_position_threshold

    threshold = per_position_threshold(64 if hd is None else int(hd))
    ok = ppm < threshold
    return ok, f"per-position cosine min {ppm:.4f} ({'below' if ok else 'meets'} the {threshold} threshold)"


def any_of(ev: dict[str, Any], *, of: list[dict[str, Any]]) -> Outcome:
    """True if any sub-predicate is true; false if all are false; else unknown."""
    unknown = False
    notes = []
    for sub in of:
        ok, note = _call(sub, ev)
        if ok:
            return True, note
        if ok is None:
            unknown = True
        elif note:
            notes.append(note)
    return (None, "") if unknown else (False, "; ".join(notes))


PREDICATES: dict[str, Callable[..., Outcome]] = {
    "eq": eq,
    "one_of": one_of,
    "ge": _compare("ge", "≥", lambda x, v: x >= v),
    "gt": _compare("gt", ">", lambda x, v: x > v),
    "le": _compare("le", "≤", lambda x, v: x <= v),
    "lt": _compare("lt", "<", lambda x, v: x < v),
    "is_true": is_true,
    "is_false": is_false,
    "is_nan": is_nan,
    "nan_present": nan_present,
    "gemm_n_misaligned": gemm_n_misaligned,
    "gemm_b_stride_exceeds": gemm_b_stride_exceeds,
    "gemv_l2_overflow": gemv_l2_overflow,
    "near_zero_atol_trip": near_zero_atol_trip,
    "fa_dk_chunks_gt": fa_dk_chunks_gt,
    "tile_rule_broken": tile_rule_broken,
    "cosine_cliff": cosine_cliff,
    "layers_healthy": layers_healthy,
    "gradual_drift": gradual_drift,
    "token_gate_failed": token_gate_failed,
    "divergence_step": divergence_step,
    "per_position_below_threshold": per_position_below_threshold,
    "any_of": any_of,
}


def _params(spec: dict[str, Any]) -> dict[str, Any]:
    """A predicate's parameters; a `value` spelled as a name of `kernels.thresholds` (e.g. "BLOCK_COSINE_MIN")
    is that threshold, so a rule never restates a number the gates own."""
    params = {k: v for k, v in spec.items() if k not in ("fn", "key_symptom")}
    value = params.get("value")
    if isinstance(value, str) and value.isupper():
        import kernels.thresholds as thresholds

        if not isinstance(getattr(thresholds, value, None), (int, float)):
            raise RuleError(f"predicate value {value!r} names no numeric threshold in kernels.thresholds.")
        params["value"] = getattr(thresholds, value)
    return params


def _call(spec: dict[str, Any], ev: dict[str, Any]) -> Outcome:
    return PREDICATES[spec["fn"]](ev, **_params(spec))


def _check_predicate(spec: Any, where: str) -> dict[str, Any]:
    import inspect

    if not isinstance(spec, dict) or not isinstance(spec.get("fn"), str):
        raise RuleError(f"{where}: a predicate must be a table with an `fn` name, got {spec!r}.")
    fn = PREDICATES.get(spec["fn"])
    if fn is None:
        raise RuleError(f"{where}: unknown predicate {spec['fn']!r} (known: {', '.join(sorted(PREDICATES))}).")
    params = _params(spec)
    try:
        inspect.signature(fn).bind({}, **params)
    except TypeError as e:
        raise RuleError(f"{where}: bad parameters for {spec['fn']!r}: {e}.") from e
    if spec["fn"] == "any_of":
        for i, sub in enumerate(params["of"]):
            _check_predicate(sub, f"{where}.of[{i}]")
    return spec


# --- rules ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    id: str
    source: str
    title: str
    root_cause: str
    check: str
    remedy: str
    known_limit: bool
    patterns: tuple[re.Pattern[str], ...] = ()
    text_context: tuple[re.Pattern[str], ...] = ()
    applies_to: tuple[dict[str, Any], ...] = ()
    predicates: tuple[dict[str, Any], ...] = ()
    position: int = 0


@dataclass(frozen=True)
class Match:
    rule_id: str
    source: str
    title: str
    root_cause: str
    check: str
    remedy: str
    known_limit: bool
    confidence: float
    matched_lines: list[str] = field(default_factory=list)
    matched_facts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "source": self.source,
            "title": self.title,
            "root_cause": self.root_cause,
            "check": self.check,
            "remedy": self.remedy,
            "known_limit": self.known_limit,
            "confidence": self.confidence,
            "matched_lines": list(self.matched_lines),
            "matched_facts": list(self.matched_facts),
        }


_TEXT_FIELDS = ("id", "source", "title", "root_cause", "check", "remedy")


def _normalise_predicates(raw: Any, where: str) -> tuple[dict[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RuleError(f"{where} must be a list of predicate tables.")
    out = []
    for i, spec in enumerate(raw):
        if isinstance(spec, dict) and not isinstance(spec.get("key_symptom", False), bool):
            raise RuleError(f"{where}[{i}]: `key_symptom` must be true or false.")
        out.append(_check_predicate(spec, f"{where}[{i}]"))
    return tuple(out)


def _parse_rules(data: dict[str, Any], path: str) -> list[Rule]:
    raw_rules = data.get("rule")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise RuleError(f"{path}: no [[rule]] entries.")
    rules: list[Rule] = []
    seen: set[str] = set()
    for pos, raw in enumerate(raw_rules):
        rid = raw.get("id", f"#{pos}") if isinstance(raw, dict) else f"#{pos}"
        where = f"{path}: rule {rid!r}"
        for name in _TEXT_FIELDS:
            if not isinstance(raw.get(name), str) or not raw[name].strip():
                raise RuleError(f"{where}: missing text field {name!r}.")
        if not isinstance(raw.get("known_limit"), bool):
            raise RuleError(f"{where}: `known_limit` must be true or false.")
        if rid in seen:
            raise RuleError(f"{where}: duplicate rule id.")
        seen.add(rid)
        try:
            patterns = tuple(re.compile(p, re.IGNORECASE) for p in raw.get("patterns", []))
            context = tuple(re.compile(p, re.IGNORECASE) for p in raw.get("text_context", []))
        except re.error as e:
            raise RuleError(f"{where}: bad regex: {e}.") from e
        applies = _normalise_predicates(raw.get("applies_to"), f"{where}.applies_to")
        preds = _normalise_predicates(raw.get("predicates"), f"{where}.predicates")
        if not patterns and not preds:
            raise RuleError(f"{where}: needs `patterns` or `predicates`.")
        unknown = set(raw) - {*_TEXT_FIELDS, "known_limit", "patterns", "text_context", "applies_to", "predicates"}
        if unknown:
            raise RuleError(f"{where}: unknown field(s) {sorted(unknown)}.")
        rules.append(
            Rule(
                id=rid,
                source=raw["source"],
                title=raw["title"],
                root_cause=raw["root_cause"].strip(),
                check=raw["check"].strip(),
                remedy=raw["remedy"].strip(),
                known_limit=raw["known_limit"],
                patterns=patterns,
                text_context=context,
                applies_to=applies,
                predicates=preds,
                position=pos,
            )
        )
    return rules


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> tuple[Rule, ...]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise RuleError(f"{path} is not valid TOML: {e}.") from e
    return tuple(_parse_rules(data, path))


def load_rules(path: str | Path | None = None) -> list[Rule]:
    """Load and validate a rules file (default: handlers/triage/rules.toml). Raises `RuleError`."""
    p = Path(path) if path is not None else DEFAULT_RULES
    try:
        mtime = p.stat().st_mtime_ns
    except OSError as e:
        raise RuleError(f"cannot read rules file {p}: {e.strerror or e}.") from e
    return list(_load_cached(str(p), mtime))


# --- matching -------------------------------------------------------------------------------------------


def _text_hits(rule: Rule, lines: list[str]) -> tuple[int, list[str]]:
    hit_patterns = 0
    matched: list[str] = []
    for pattern in rule.patterns:
        found = False
        for line in lines:
            if pattern.search(line):
                found = True
                if line not in matched:
                    matched.append(line)
        hit_patterns += found
    return hit_patterns, matched[:MAX_MATCHED_LINES]


def _evaluate(rule: Rule, lines: list[str] | None, evidence: dict[str, Any]) -> tuple[Match, int] | None:
    scope_true = 0
    facts: list[str] = []
    for spec in rule.applies_to:
        ok, note = _call(spec, evidence)
        if ok is False:
            return None
        if ok:
            scope_true += 1
            facts.append(note)
    n_true = n_unknown = 0
    key_specs = [s for s in rule.predicates if s.get("key_symptom")]
    keys_all_true = bool(key_specs)
    for spec in rule.predicates:
        ok, note = _call(spec, evidence)
        if ok is False:
            return None
        if ok:
            n_true += 1
            if note:
                facts.append(note)
        else:
            n_unknown += 1
            if spec.get("key_symptom"):
                keys_all_true = False
    hits, matched = (0, []) if lines is None else _text_hits(rule, lines)
    if hits and rule.text_context and not scope_true:
        context = [line for line in lines or [] if any(c.search(line) for c in rule.text_context)]
        if context:
            matched = (matched + [line for line in context if line not in matched])[:MAX_MATCHED_LINES]
        else:
            hits, matched = 0, []
    positive = hits > 0 or (keys_all_true if key_specs else n_true > 0)
    if not positive:
        return None
    t = 0.0 if hits == 0 else min(0.85, 0.55 + 0.15 * (hits - 1))
    p = 0.9 * n_true / (n_true + n_unknown) if n_true else 0.0
    confidence = round(1 - (1 - t) * (1 - p), 3)
    match = Match(
        rule_id=rule.id,
        source=rule.source,
        title=rule.title,
        root_cause=rule.root_cause,
        check=rule.check,
        remedy=rule.remedy,
        known_limit=rule.known_limit,
        confidence=confidence,
        matched_lines=matched,
        matched_facts=[f for f in facts if f],
    )
    return match, scope_true


def _rank(scored: list[tuple[Match, int, int]]) -> list[Match]:
    scored.sort(key=lambda s: (-s[0].confidence, -s[1], s[2]))
    return [m for m, _, _ in scored]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n") if line.strip()]


def triage_evidence(
    evidence: dict[str, Any], text: str | None = None, *, rules: list[Rule] | None = None
) -> list[Match]:
    """Known failures that fit `evidence` (and `text`, when given), best first; [] when none fits."""
    if not isinstance(evidence, dict):
        raise TypeError("evidence must be a dict")
    rules = rules if rules is not None else load_rules()
    lines = _lines(text) if text is not None else None
    scored = []
    for rule in rules:
        result = _evaluate(rule, lines, evidence)
        if result is not None:
            scored.append((result[0], result[1], rule.position))
    return _rank(scored)


def triage_text(text: str, *, rules: list[Rule] | None = None) -> list[Match]:
    """Known failures whose patterns appear in compiler/runtime output `text`, best first."""
    return triage_evidence({}, text, rules=rules)
