"""Which function runs which phase's gate: one static table a reader (and a tool) can follow."""

from __future__ import annotations

from handlers.gates import Gate, block_and_tokens, evaluation, kernel_rows, performance, reference
from statemachine.phases import Phase

GATES: dict[Phase, Gate] = {
    Phase.REFERENCE: reference.run,
    Phase.KERNELS: kernel_rows.run,
    Phase.BLOCK: block_and_tokens.run_block,
    Phase.FULL_MODEL: block_and_tokens.run_full,
    Phase.PREFILL_OPT: performance.run_prefill,
    Phase.DECODE_OPT: performance.run_decode,
    Phase.FINALIZE: performance.run_finalize,
    Phase.EVALUATION: evaluation.run,
}
