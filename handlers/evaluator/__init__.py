"""The independent evaluator (Phase 7, `ledger audit`): it believes nothing the ledger says.

  audit       the chain check and the per-event audit of a deployment's stream (Finding)
  replay      the stream replayed through the state machine: verdicts re-judged, digests, figures, gate evidence
  remeasure   what can be measured again: a kernel sample through the executor, the token gate
Imported by handlers.gates.evaluation (the gate) and the CLI; imports the ledger, statemachine, kernels and registry,
never the CLI.
"""
