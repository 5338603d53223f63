"""Which function runs which phase's gate: one static table a reader (and a tool) can follow."""

from __future__ import annotations

from handlers.gates import Gate, phase0, phase1, phase7, phase23, phase456
from statemachine.phases import Phase

GATES: dict[Phase, Gate] = {
    Phase.REFERENCE: phase0.run,
    Phase.KERNELS: phase1.run,
    Phase.BLOCK: phase23.run_block,
    Phase.FULL_MODEL: phase23.run_full,
    Phase.PREFILL_OPT: phase456.run_prefill,
    Phase.DECODE_OPT: phase456.run_decode,
    Phase.FINALIZE: phase456.run_finalize,
    Phase.EVALUATION: phase7.run,
}
