"""Whole-model backends: the `ModelBackend` seam Phases 2-7 and the evaluator talk to (base), the in-process
pipeline (in_process) and an mlir-air model directory (mlir_air), and the `KernelRunner` seam Phase 1 runs its
rows through (kernel_runners).

The top of kernels/ but for the stand-in checkout: may import kernels.numerics, kernels.model, kernels.perf and
kernels.mlir_air; imported by handlers and by the stand-in (kernels.mlir_air.twin), nothing lower.
"""
