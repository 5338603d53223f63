"""Numerics. The root holds the leaf kernels: catalog (math, contracts, shapes), bf16 roundings,
comparators, the tile planner, `run_kernel`, the thresholds every verdict is judged against, and the
executors (emulated NPU2, torch). `kernels.model` is the model built from them; `kernels.mlir_air` is
mlir-air's formats and commands.

Never touches the ledger.
"""
