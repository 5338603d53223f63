"""Phase 7: each Phase 1 attempt's recorded plan sources re-derived from the registry they cite.

`plan_source_findings(events, all_events, config, target)`: for every PhaseStarted(phase 1) with
`plan_sources` (which rows took a registry row's tile, which the heuristic; handlers.planning), the plan is
made again (npu_kernels.model.plan) from the registry as it stood then - the ledger's KernelVerified rows (the deployment's own left
out, as handlers.planning does) up to the recorded `ledger_seq`, and the recorded mlir-air registry files when their bytes still hash to what was
recorded (else a warning: it cannot be re-derived) - and every row's source, contract, method, tier and tile
must be the recorded one (else an error naming the PhaseStarted seq). Reads only those mlir-air files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from handlers.evaluator.audit import Finding
from npu_kernels.model.plan import plan
from npu_kernels.model.plan_record import plan_sources
from ledger.record import RecordedEvent
from registry.lookup import MLIR_AIR_REGISTRY_DIR, PlanningRegistry
from statemachine.gate import kernel_key


_CHOICE = ("source", "contract", "method", "tier", "tile")


def _file_sha(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def plan_source_findings(events: list[RecordedEvent], all_events: list[RecordedEvent], config, target: str,
                         weights: str = "bf16") -> list[Finding]:
    """Each recorded Phase 1 plan's sources, re-derived (see the module docstring). `config` is the
    npu_kernels.model.config.ModelConfig re-resolved from config.json; `all_events` the whole ledger."""
    findings = []
    kernel_rows = [e for e in all_events if e.type == "KernelVerified"]
    for rec in events:
        p = rec.payload
        sources = p.get("plan_sources") if rec.type == "PhaseStarted" and p.get("phase") == 1 else None
        if not sources:
            continue
        files = sources.get("files") or {}
        changed = {path for path, sha in files.items() if _file_sha(path) != sha}
        if changed:
            findings.append(Finding("warning", rec.seq, "plan-sources",
                                    f"PhaseStarted(1) seq {rec.seq}: cannot re-derive its plan sources: the mlir-air "
                                    f"registry file(s) it read are absent or changed since ({', '.join(sorted(changed))})"))
            continue
        root = None
        for path in files:  # <MLIR_AIR_DIR>/programming_examples/kernel_registry/details/<file>
            root = Path(path).parents[len(MLIR_AIR_REGISTRY_DIR.parts)]
        others = [e for e in kernel_rows if e.stream_id != rec.stream_id]  # as planned: without its own rows
        registry = PlanningRegistry(others, root, upto_seq=sources.get("ledger_seq"))
        again = {kernel_key(r["kernel"], r["shape"]): r for r in plan_sources(plan(config, target=target, registry=registry, weights=weights))}
        for row in sources.get("rows") or []:
            want = again.get(kernel_key(row["kernel"], row["shape"]))
            differ = [k for k in _CHOICE if want is None or want.get(k) != row.get(k)]
            if differ:
                findings.append(Finding("error", rec.seq, "plan-sources",
                                        f"PhaseStarted(1) seq {rec.seq}: {row['kernel']} {row['shape']} records "
                                        f"{', '.join(f'{k}={row.get(k)!r}' for k in differ)}; the registry as it stood "
                                        f"(ledger seq {sources.get('ledger_seq')}) gives "
                                        f"{', '.join(f'{k}={(want or {}).get(k)!r}' for k in differ)}"))
    return findings
