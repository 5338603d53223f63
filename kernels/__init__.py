"""Numerics: leaf kernels, executors, tile planner, decoder pipeline and the HF reference.

Never touches the ledger.
"""
