"""A run that gave no verdict either way (issue 46 item 4): the third outcome of a gate, beside pass and fail.

mlir-air's Gemma4 layer gate has it: a dispatch that hit the NPU2 firmware's TDR watchdog "completes but lies", so
`validate_layer_npu.py` refuses to score it and exits 2 ("INCONCLUSIVE: layer N needed a retry ... Re-run.",
programming_examples/llms/gemma4_e2b_q4nx/validate_layer_npu.py, `main`, the `retried` branch), and the Makefile
re-runs it in a fresh process up to SCORE_ATTEMPTS = 3 times, because "the taint is not cleared inside the process"
(gemma4_e2b_q4nx/Makefile@15135e8, `define score_layer`: 0 pass, 2 inconclusive -> re-score, 1 FAIL -> stop at once).

`Inconclusive` is what a backend raises when no try of a device run gave a verdict (each timed out, or said
INCONCLUSIVE itself); the deploy handler records it as
`PhaseInconclusive` (never a pass, never one of the two failures a gate is allowed). Imports nothing.
"""

from __future__ import annotations


class Inconclusive(RuntimeError):
    """Raised when a device run gave no verdict on any of its `tries` fresh processes: no signal, so no verdict.

    `reason` says what ran and how each try ended; `tries` how many fresh processes were started; `evidence`, when
    the run was one Phase 1 row's harness, the triage evidence of that row (its kernel, shape, `runtime_hang`, the last
    try's transcript), so a rule that knows the hang can still name it."""

    def __init__(self, reason: str, tries: int = 1, evidence: dict | None = None) -> None:
        super().__init__(reason)
        self.reason, self.tries, self.evidence = reason, tries, evidence
