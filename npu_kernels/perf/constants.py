"""NPU2 physical figures and the fitted constants of the performance model, each with its evidence.

Physical (not fitted):
  NPU2_COMPUTE_TILES = 32        8 columns x 4 compute rows of AIE2P tiles (NUMERICS "target tiles", the
                                 planner's ARRAYS["npu2"]).
  NPU2_MACS_PER_CYCLE = 512      one 8x8x8 BFP16 VMAC per cycle per tile (the 8x8x8 mmul that mm.cc and the
                                 planner's tile rules are built on; the same 512-MAC shape as the int8 VMAC).
  NPU2_CLOCK_HZ = 1.5e9          AIE clock. Assumption: AMD rates Strix's XDNA2 NPU at 50 TOPS int8/BFP16,
                                 and 32 x 512 x 2 x 1.5e9 = 49.2e12, so the clock is ~1.5 GHz.
  NPU2_PEAK_BF16_FLOPS = 32 x 512 x 2 x 1.5e9 = 4.92e13 FLOP/s. The registry's best GEMM is 9.8 TFLOP/s (20%);
                                 any reported NPU2 figure above this peak is not a measurement.

FLOORS: a fitted per-MAC time may not beat one tile's MMA peak (1 / (512 x 1.5e9) s per MAC).

FITTED: the kernel cost model's constants (seconds per unit of the feature of the same name in
`npu_kernels.perf.kernel_model`), fitted once by `npu_kernels.perf.fit.fit(kernel_rows())` on all 235 rows of
anchors.toml (NNLS on relative error); `tests/unit/test_perf_model.py` refits and checks they still agree.
EVIDENCE says what each means and which rows fix it. The kernels of the registry (npu_kernels.numerics.kernels) declare
their constants and evidence in their own modules; both tables take them in.

HOST: the XRT-call and host-side constants, from the Llama-3.2-1B profile (profile_llama32_1b.toml); the
derivations are in `npu_kernels.perf.host`.
"""

from __future__ import annotations

from npu_kernels.numerics.kernels import definitions as kernel_definitions

NPU2_COMPUTE_TILES = 32
NPU2_MACS_PER_CYCLE = 512
NPU2_CLOCK_HZ = 1.5e9
NPU2_PEAK_BF16_FLOPS = NPU2_COMPUTE_TILES * NPU2_MACS_PER_CYCLE * 2 * NPU2_CLOCK_HZ
# NPU1 = XDNA (AIE2, Phoenix): 16 tiles (4x4), native bf16 at 128 MACs/cycle/tile, ~1 GHz: 4.1 TFLOP/s bf16.
NPU1_PEAK_BF16_FLOPS = 16 * 128 * 2 * 1.0e9
PEAK_FLOPS = {"npu2": NPU2_PEAK_BF16_FLOPS, "npu1": NPU1_PEAK_BF16_FLOPS}  # what any recorded figure must stay under
TILE_S_PER_MAC_AT_PEAK = 1.0 / (NPU2_MACS_PER_CYCLE * NPU2_CLOCK_HZ)

FLOORS = {
    "gemm_s_per_mac_mmcc": TILE_S_PER_MAC_AT_PEAK,
    "gemm_s_per_mac_direct": TILE_S_PER_MAC_AT_PEAK,
    "fa_s_per_mac": TILE_S_PER_MAC_AT_PEAK,
    "fa_s_per_mac_chunked": TILE_S_PER_MAC_AT_PEAK,
}

# The 4-bit kernels (dequant_q4nx, gemv_q4nx) have no registry rows to fit: their one constant is the fused
# 4-bit decode's effective DDR stream rate, calibrated on llama32_1b_q4nx/README.md@137ff7c (~50 tok/s) by
# npu_kernels.perf.q4nx.calibration() (tests/unit/test_perf_q4nx.py recomputes it and checks it agrees).
Q4_STREAM_BPS = 42.21e9
DERIVED: dict[str, float] = {"q4_s_per_byte": 1.0 / Q4_STREAM_BPS}

# fitted: python -c "from npu_kernels.perf.fit import fit; from npu_kernels.perf.anchors import kernel_rows; print(fit(kernel_rows()))"
FITTED: dict[str, float] = {
    "launch_s": 8.009e-05,
}
# the kernels of the registry (npu_kernels.numerics.kernels): each module's constants, fitted in the same fit
FITTED.update((name, value) for d in kernel_definitions() if d.constants for name, value in d.constants.items())

R = "programming_examples/kernel_registry/details/"
EVIDENCE: dict[str, str] = {
    "launch_s": "per-launch floor (array reconfiguration, shim BD setup, XRT run of one air.launch): ~80 us. "
                "Fixed by the floor-dominated rows: RoPE 8 and 32 rows 83/82 us (" + R + "RoPE_bf16.md:175-176), "
                "GEMV 128x896 84 us (GEMV_bf16.md:102), GEMM 64x32x720 ~118 us (GEMM_bf16_in_bf16_out.json:25).",
}
EVIDENCE.update((name, text) for d in kernel_definitions() if d.evidence for name, text in d.evidence.items())
