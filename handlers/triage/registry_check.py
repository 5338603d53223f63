"""A triage rule's fixes checked against what the registry records failing, before one is offered.

`check_fixes(matches, evidence, registry)`: for a match whose rule lists `fixes` (the remedy's alternatives, in
order, each optionally naming the GEMM method it switches to) and evidence naming the kernel and shape,
`registry.recorded_failures(kernel, shape)` (registry.lookup.PlanningRegistry: methods whose hardware rows
only FAIL for that shape, and the registry notes saying a method fails there) decides: a fix whose method
the registry records failing is not offered, the match says so and cites the record (`fix_checks`), and the
next fix becomes the remedy. Without a kernel and shape nothing can be checked, and the match says that.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from handlers.triage.engine import Match


def check_fixes(matches: list[Match], evidence: dict[str, Any], registry) -> list[Match]:
    """The matches with each rule's fixes checked (see the module docstring)."""
    kernel, shape = evidence.get("kernel"), evidence.get("shape")
    out = []
    for m in matches:
        if not m.fixes or not any(f.get("method") for f in m.fixes):
            out.append(m)
            continue
        if not kernel or not isinstance(shape, dict):
            out.append(replace(m, fix_checks=["fixes not checked against the registry: the evidence names no "
                                               "kernel and shape"]))
            continue
        failures = registry.recorded_failures(kernel, shape)
        checks, offered = [], None
        for fix in m.fixes:
            cites = failures.get(fix.get("method", ""), [])
            if cites:
                checks.append(f"not offered: {fix['text']} - the registry records {fix['method']} failing for "
                              f"{kernel} {shape}: {'; '.join(cites)}")
                continue
            offered = fix["text"]
            break
        if offered is None:
            remedy = "Every fix this rule knows is recorded failing for this shape in the registry (see the checks)."
        else:
            remedy = offered if checks else m.remedy
        out.append(replace(m, remedy=remedy, fix_checks=checks or [f"checked against the registry for {kernel} "
                                                                   f"{shape}: no recorded failure of the fix"]))
    return out
