"""Failure triage: match compiler/runtime output and gate evidence against mlir-air's debugging playbooks.

The rules are data (`rules.toml`); the matcher and the evidence-dict keys are documented in `engine`.
"""

from handlers.triage.engine import (
    PREDICATES,
    Match,
    Rule,
    RuleError,
    load_rules,
    triage_evidence,
    triage_text,
)

__all__ = ["PREDICATES", "Match", "Rule", "RuleError", "load_rules", "triage_evidence", "triage_text"]
