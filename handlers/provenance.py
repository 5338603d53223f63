"""Toolchain provenance stamped onto evidence as it is recorded (npu_kernels.toolchain says what is recorded).

Phase 1 rows carry `provenance["toolchain"]` from `handlers.gates.kernel_rows` (the executor that ran them);
`PerformanceMeasured` events get `toolchain` here, in the batch `advance` records, unless the gate set one.
"""

from __future__ import annotations

from npu_kernels.toolchain import current_toolchain
from ledger.events import Event, PerformanceMeasured


def stamp_toolchain(events: list[Event], executor: str) -> list[Event]:
    """The events with the current toolchain of `executor` on every PerformanceMeasured that lacks one."""
    if not any(isinstance(e, PerformanceMeasured) and not e.toolchain for e in events):
        return list(events)
    tc = current_toolchain(executor)
    return [e.model_copy(update={"toolchain": tc}) if isinstance(e, PerformanceMeasured) and not e.toolchain else e
            for e in events]
