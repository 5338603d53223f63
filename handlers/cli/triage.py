"""`ledger triage FILE|-`: name the known NPU failure behind a compiler/runtime log.

Thin click layer over `handlers.triage`: reads the log (a file, or stdin for `-`), optionally an evidence
JSON object, and prints the best match in full and any other rule that also fired on one line each (or
all of them, best first, as a JSON array with `--json`). Exit status 0 when a rule matches; 2 when none does
(the log is a failure no playbook names: a script can tell); 1 when an input cannot be read or the rules
file is malformed. The main CLI adds `commands` to its group.
"""

from __future__ import annotations

import json
import sys
import textwrap

import click

from handlers.inputs import InputError, read_input_text
from handlers.planning import workspace_registry
from handlers.triage import Match, RuleError, load_rules, triage_evidence
from handlers.triage.registry_check import check_fixes
from registry.text import escaped

NO_MATCH = "No known failure pattern matches."
NO_MATCH_EXIT = 2


def _read(path: str, what: str) -> str:
    try:  # "-" is stdin; a regular file under its cap, read with a bound (handlers.inputs)
        return read_input_text(path, what)
    except InputError as e:
        sys.exit(_fail(f"triage: {e}"))


def _fail(message: str) -> int:
    click.echo(message, err=True)
    return 1


def _render(matches: list[Match]) -> str:
    if not matches:
        return NO_MATCH
    out: list[str] = []
    wrap = textwrap.TextWrapper(width=100, initial_indent="     ", subsequent_indent="     ")
    for m in matches[:1]:
        limit = ", known hardware/compiler limit" if m.known_limit else ""
        out.append(f"best match: {m.rule_id}: {m.title} (confidence {m.confidence:.2f}{limit})")
        out.append(f"   source: {m.source}")
        for label, body in (("root cause", m.root_cause), ("check", m.check), ("remedy", m.remedy)):
            out.append(f"   {label}:")
            out.append(wrap.fill(" ".join(body.split())))
        if m.matched_lines:
            out.append("   matched lines:")
            out.extend(f"     | {line}" for line in m.matched_lines)
        if m.matched_facts:
            out.append("   matched facts:")
            out.extend(f"     - {fact}" for fact in m.matched_facts)
        if m.fix_checks:
            out.append("   registry:")
            out.extend(f"     - {c}" for c in m.fix_checks)
        out.append("")
    if matches[1:]:
        out.append("also fired (less likely, or the same evidence and listed later in the playbooks; `--json` has them "
                   "in full):")
        out.extend(f"  - {m.rule_id}: {m.title} (confidence {m.confidence:.2f})" for m in matches[1:])
    return "\n".join(out).rstrip()



@click.command("triage")
@click.argument("file", metavar="FILE|-")
@click.option("--json", "as_json", is_flag=True, help="Print the matches as a JSON array, best first.")
@click.option(
    "--evidence", "evidence_path", metavar="JSON", help="Gate evidence, a JSON object (keys: see handlers/triage/evidence.py)."
)
@click.option("--rules", "rules_path", metavar="TOML", help="A rules file instead of the built-in one.")
@click.pass_obj
def triage(app, file: str, as_json: bool, evidence_path: str | None, rules_path: str | None) -> None:
    """Match a compiler/runtime log (FILE, or - for stdin) against the known NPU failure playbooks."""
    text = _read(file, "log")
    evidence: dict = {}
    if evidence_path is not None:
        try:
            evidence = json.loads(_read(evidence_path, "evidence"))
        except json.JSONDecodeError as e:
            sys.exit(_fail(f"triage: evidence {evidence_path!r} is not JSON: {e.msg} (line {e.lineno})"))
        if not isinstance(evidence, dict):
            sys.exit(_fail(f"triage: evidence {evidence_path!r} must be a JSON object"))
    try:
        rules = load_rules(rules_path)
    except RuleError as e:
        sys.exit(_fail(f"triage: {e}"))
    matches = check_fixes(triage_evidence(evidence, text, rules=rules), evidence, workspace_registry(app))
    if as_json:
        click.echo(json.dumps([m.to_json() for m in matches], indent=2))
    else:
        click.echo("\n".join(escaped(line) for line in _render(matches).split("\n")))  # the log's lines: no escape runs
    if not matches:
        sys.exit(NO_MATCH_EXIT)


commands = [triage]
