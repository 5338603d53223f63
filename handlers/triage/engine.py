"""Failure triage: mlir-air's NPU debugging playbooks as data (rules.toml) and a small matcher.

A rule names a known failure and carries `patterns` (regexes over compiler/runtime output) and/or
predicates over an evidence dict (`handlers.triage.evidence`; the predicates are
`handlers.triage.predicates.PREDICATES`), plus the playbook's root cause, what to check, the remedy, and
whether the failure is a known hardware/compiler limit. This module loads and validates the rules and
matches them.

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

import re
import tomllib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from handlers.triage.predicates import RuleError, call_predicate, check_predicate

DEFAULT_RULES = Path(__file__).resolve().parent / "rules.toml"
MAX_MATCHED_LINES = 10


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
    fixes: tuple[dict[str, str], ...] = ()  # the remedy's alternatives in order: {text, method?} (see registry_check)


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
    fixes: tuple[dict[str, str], ...] = ()
    fix_checks: list[str] = field(default_factory=list)  # what the registry records against the fixes

    def to_json(self) -> dict[str, Any]:
        checks = {"fix_checks": list(self.fix_checks)} if self.fix_checks else {}
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
            **checks,
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
        out.append(check_predicate(spec, f"{where}[{i}]"))
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
        fixes = raw.get("fixes", [])
        if not isinstance(fixes, list) or any(not isinstance(f, dict) or not isinstance(f.get("text"), str)
                                              or set(f) - {"text", "method"} for f in fixes):
            raise RuleError(f"{where}: `fixes` must be a list of {{text, method?}} tables.")
        unknown = set(raw) - {*_TEXT_FIELDS, "known_limit", "patterns", "text_context", "applies_to", "predicates",
                              "fixes"}
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
                fixes=tuple({k: str(v).strip() for k, v in f.items()} for f in fixes),
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
        ok, note = call_predicate(spec, evidence)
        if ok is False:
            return None
        if ok:
            scope_true += 1
            facts.append(note)
    n_true = n_unknown = 0
    key_specs = [s for s in rule.predicates if s.get("key_symptom")]
    keys_all_true = bool(key_specs)
    for spec in rule.predicates:
        ok, note = call_predicate(spec, evidence)
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
        fixes=rule.fixes,
    )
    return match, scope_true


def _rank(scored: list[tuple[Match, int, int]]) -> list[Match]:
    scored.sort(key=lambda s: (-s[0].confidence, -s[1], s[2]))
    return [m for m, _, _ in scored]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n") if line.strip()]


# The playbooks are mlir-air's and name its model directory's make targets; a deployment that runs on this
# machine (the emulated / torch / fp32 executors) has no such directory, and the same checks are its own verbs.
MLIR_AIR_EXECUTOR = "mlir-air"
_OWN_VERBS = (("make verify", "verify-model"), ("make diagnosis", "diagnose"))


def for_executor(match: Match, executor: str | None, deployment: str | None) -> Match:
    """The match as the deployment's executor can act on it: on an executor other than mlir-air, mlir-air's
    `make verify` / `make diagnosis` become `ledger verify-model NAME` / `ledger diagnose NAME`. Unknown
    executor (a log given to `ledger triage`): the playbook's own words."""
    if not executor or executor == MLIR_AIR_EXECUTOR:
        return match
    from registry.text import ledger_command

    def own(text: str) -> str:
        for target, verb in _OWN_VERBS:
            command = f"`{ledger_command(verb, deployment)}`" if deployment else f"`ledger {verb} NAME`"
            text = re.sub(rf"\b{target}\b", lambda _m: command, text)
        return text

    return replace(match, check=own(match.check), remedy=own(match.remedy))


def triage_evidence(
    evidence: dict[str, Any], text: str | None = None, *, rules: list[Rule] | None = None
) -> list[Match]:
    """Known failures that fit `evidence` (and `text`, when given), best first; [] when none fits. An evidence
    dict holding `executor` (and `deployment`, its name) gets checks and remedies that executor can run
    (`for_executor`)."""
    if not isinstance(evidence, dict):
        raise TypeError("evidence must be a dict")
    rules = rules if rules is not None else load_rules()
    lines = _lines(text) if text is not None else None
    scored = []
    for rule in rules:
        result = _evaluate(rule, lines, evidence)
        if result is not None:
            scored.append((result[0], result[1], rule.position))
    executor, deployment = evidence.get("executor"), evidence.get("deployment")
    return [for_executor(m, executor if isinstance(executor, str) else None,
                         deployment if isinstance(deployment, str) else None) for m in _rank(scored)]


def triage_text(text: str, *, rules: list[Rule] | None = None) -> list[Match]:
    """Known failures whose patterns appear in compiler/runtime output `text`, best first."""
    return triage_evidence({}, text, rules=rules)
