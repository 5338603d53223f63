"""Failure triage: match compiler/runtime output and gate evidence against mlir-air's debugging playbooks.

The rules are data (`rules.toml`); the predicates they are written in are `predicates`, the evidence dict's
keys `evidence`, and the loader, matcher and confidence `engine`.
"""

from handlers.triage.engine import Match, Rule, load_rules, triage_evidence, triage_text
from handlers.triage.predicates import PREDICATES, RuleError

__all__ = ["PREDICATES", "Match", "Rule", "RuleError", "load_rules", "triage_evidence", "triage_text"]
