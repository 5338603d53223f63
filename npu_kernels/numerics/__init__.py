"""Leaf-kernel numerics: the kernel catalog (catalog: the table; spec: its types; references: inputs and FP32
references), bf16 roundings, comparators (compare), the tile planner (tiles: plan_tile; tile_rules, tile_defaults,
tile_notes), mlir-air's harness inputs (harness_inputs), `run_kernel` (run), the in-process executors
(executors: emulated NPU2, torch, fp32) and the kernel registry (kernels: one module per kernel, every piece of it).

The bottom of npu_kernels/ but for npu_kernels.thresholds: imports nothing else of the product; everything above may
import it (tests/unit/test_layout.py, LEVELS).
"""
