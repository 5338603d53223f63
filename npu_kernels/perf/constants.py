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
    "gemm_s_per_mac_mmcc": 1.665e-12,
    "gemm_s_per_mac_direct": 5.936e-12,
    "gemm_s_per_call": 4.926e-08,
    "gemm_s_per_block": 4.959e-06,
    "gemm_s_per_l2_chunk": 8.136e-07,
    "gemm_s_per_ddr_byte": 1.658e-11,
    "gemm_s_cast_launch": 0.00033,
}
# the kernels of the registry (npu_kernels.numerics.kernels): each module's constants, fitted in the same fit
FITTED.update((name, value) for d in kernel_definitions() if d.constants for name, value in d.constants.items())

R = "programming_examples/kernel_registry/details/"
EVIDENCE: dict[str, str] = {
    "launch_s": "per-launch floor (array reconfiguration, shim BD setup, XRT run of one air.launch): ~80 us. "
                "Fixed by the floor-dominated rows: RoPE 8 and 32 rows 83/82 us (" + R + "RoPE_bf16.md:175-176), "
                "GEMV 128x896 84 us (GEMV_bf16.md:102), GEMM 64x32x720 ~118 us (GEMM_bf16_in_bf16_out.json:25).",
    "gemm_s_per_mac_mmcc": "time per MAC on one tile with the hand-written mm.cc kernel (drain / fused-cast / "
                           "external): 1/5.97e11 MAC/s = 78% of the 7.68e11 per-tile BFP16 peak. Fixed by the "
                           "large-K 2048-row rows (GEMM_bf16_in_*_out.json, e.g. 2048x8192x2048 8898 GF/s).",
    "gemm_s_per_mac_direct": "time per MAC with the direct-codegen inner loop: 1/1.68e11 MAC/s (3.5x slower than "
                             "mm.cc; the 'direct' rows of both GEMM JSONs, e.g. 2048x8192x2048 direct 6010 vs "
                             "external 9797 GF/s, GEMM_bf16_in_fp32_out.json).",
    "gemm_s_per_call": "per inner-kernel call (one tile_m x tile_k_l1 x tile_n MMA block: loop and pointer setup): "
                       "49 ns; the tile_n / tile_k_l1 sensitivity of the small-tile rows (N=896 tile_n 32).",
    "gemm_s_per_block": "per output block per tile (accumulator zero, drain/store of the C tile): 5.1 us; "
                        "separates short-K rows (K=512-1024) from long-K rows at equal MNK.",
    "gemm_s_per_l2_chunk": "per L2 (MemTile) K-chunk per block (a DMA round of the A/B panels): 0.81 us; the "
                           "tile_k_l2 64/128 rows (2048x2560x9728 5528 GF/s, 2048x2560x10240 4849 GF/s).",
    "gemm_s_per_ddr_byte": "shim/DDR stream: 1/60.4 GB/s for A re-streamed per herd column block, B per herd "
                           "row block, C (f32 where the cast is separate); close to EltwiseAdd's 63 GB/s "
                           "(EltwiseAdd_bf16.md:103), the array's measured DDR ceiling.",
    "gemm_s_cast_launch": "the fused-cast method's extra f32->bf16 cast launch: 330 us on top of its bytes; "
                          "fused-cast vs drain at 512^3 (482 vs 1703 GF/s), 1024^3 (2502 vs 4637), 2048x2048x512 "
                          "(4083 vs 5626) in GEMM_bf16_in_bf16_out.json.",
}
EVIDENCE.update((name, text) for d in kernel_definitions() if d.evidence for name, text in d.evidence.items())
