"""Numerics, the model, the NPU2 performance model and mlir-air's formats, in rooms that import one way
(lowest first; tests/unit/test_layout.py checks it on the import graph):

  thresholds   every number a verdict is judged against (imports nothing of the product)
  numerics     leaf kernels: catalog, bf16, comparators, tile planner, run_kernel, the in-process executors
  model        config, architecture, weights, the decoder pipeline, HF reference, prompts, plan, comparisons
  perf         the NPU2 performance model and the physical-plausibility checks of evidence
  mlir_air     mlir-air's formats and commands, the harness executor, walk, scaffold, the contract
  toolchain    what produced a figure (versions of executors, perf model, mlir-air checkout)
  backends     the ModelBackend and KernelRunner seams, each chosen by one factory
  mlir_air.twin   the stand-in checkout (`ledger twin`): the in-process backend behind mlir-air's commands

Never touches the ledger.
"""
