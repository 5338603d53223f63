"""Whole-model backends and leaf-kernel runners: the two seams whose implementations are chosen by executor name,
each in one factory.

  ModelBackend  base (the protocol, typed results), in_process (the decoder pipeline), mlir_air (an mlir-air model
                directory); model_backends chooses. Phases 2-7 and the evaluator talk to it.
  KernelRunner  runner_base (the protocol, KernelRow, KernelVerification), in_process_runner (emulated / torch /
                fp32, and the stand-in fault wrapper), harness_runner (mlir-air's harness); kernel_runners chooses.
                Phase 1, its workers, `ledger reverify`, the evaluator and `ledger kernel run` talk to it.

The top of npu_kernels/ but for the stand-in checkout: may import npu_kernels.numerics, npu_kernels.model, npu_kernels.perf,
npu_kernels.mlir_air and npu_kernels.toolchain; imported by handlers and by the stand-in (npu_kernels.mlir_air.twin), nothing lower.
"""
