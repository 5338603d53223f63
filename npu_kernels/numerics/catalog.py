"""The leaf-kernel catalog of docs/numerics.md: one `KernelSpec` per kernel (`CATALOG`, `get_spec`), with its
contracts (tolerances from npu_kernels.thresholds), the NPU2 figures measured in mlir-air's kernel registry, a
registry shape, a small shape and the target tile counts.

The kernels of the registry (`npu_kernels.numerics.kernels`: eltwise_add, eltwise_mul, conv1d, ...) declare their specs in their
own modules; `CATALOG` lists them in their place. The spec types and errors are `npu_kernels.numerics.spec`; the per-kernel math (inputs, references, executor
calls) is `npu_kernels.numerics.references`. Anyone may import the catalog.
"""

from __future__ import annotations

from npu_kernels.numerics.kernels import in_listing_order
from npu_kernels.numerics import references as refs
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure, UnknownKernel
from npu_kernels.thresholds import kernel_tolerance

GEMM_CONTRACTS = {
    "f32-out": Contract("f32-out", *kernel_tolerance("gemm", "f32-out"), "f32", "bf16->f32, FP32 accumulate", "high"),
    "bf16-out-high": Contract(
        "bf16-out-high", *kernel_tolerance("gemm", "bf16-out-high"), "bf16", "bf16->bf16 high precision (FP32 accumulate, one cast)", "high"
    ),
    "bf16-out-low": Contract(
        "bf16-out-low", *kernel_tolerance("gemm", "bf16-out-low"), "bf16", "bf16->bf16 low precision (bf16 partial sums, direct codegen)", "low"
    ),
}

# NPU2 low-precision GEMM by K (mlir-air kernel_registry GEMM_bf16_in_bf16_out.md, low-precision table;
# tile_k_l1 = 32 throughout). NUMERICS quotes 1.3e-2 (4-8 L2 tiles, K 2048) and 1.9e-2 (32, K 8192).
NPU2_GEMM_LOW_BY_K = {512: 1.0e-2, 1024: 1.1e-2, 2048: 1.3e-2, 4096: 1.5e-2, 8192: 1.9e-2}


def _bf16(name: str, description: str) -> dict[str, Contract]:
    return {"bf16-out": Contract("bf16-out", *kernel_tolerance(name, "bf16-out"), "bf16", description)}


def _tiles(npu2: int, npu1: int) -> dict[str, int]:
    return {"npu2": npu2, "npu1": npu1}


_PIECEWISE: dict[str, KernelSpec] = {
    "gemm": KernelSpec(
        name="gemm",
        shape_keys=("M", "K", "N"),
        contracts=GEMM_CONTRACTS,
        default_contract="bf16-out-high",
        make_inputs_fn=refs.gemm_inputs,
        reference_fn=refs.gemm_reference,
        call_fn=refs.gemm_call,
        flops_fn=lambda s: 2.0 * s["M"] * s["K"] * s["N"],
        bytes_fn=lambda s: 2.0 * (s["M"] * s["K"] + s["K"] * s["N"] + s["M"] * s["N"]),
        output_elements_fn=lambda s: s["M"] * s["N"],
        npu2={
            "f32-out": NpuFigure(9.3e-3, 9.3e-3, 9.5e-3, "2048x2048x2048, 64/512/32/128"),
            "bf16-out-high": NpuFigure(9.7e-3, 9.3e-3, 9.9e-3, "2048x2048x2048 fused-cast (drain 9.3e-3)"),
            "bf16-out-low": NpuFigure(1.3e-2, 1.3e-2, 1.9e-2, "2048x2048x2048, tile_k_l2 512 (4 L2 tiles)"),
        },
        registry_shape={"M": 2048, "K": 2048, "N": 2048},
        small_shape={"M": 64, "K": 2048, "N": 64},  # K >= 1024: the high-precision atol assumes it
        target_tiles=_tiles(32, 16),
        fidelity_band=0.15,
    ),
    "gemv": KernelSpec(
        name="gemv",
        shape_keys=("M", "K"),
        contracts=_bf16("gemv", "bf16 in, FP32 vector accumulate, bf16 out"),
        default_contract="bf16-out",
        make_inputs_fn=refs.gemv_inputs,
        reference_fn=refs.gemv_reference,
        call_fn=refs.gemv_call,
        flops_fn=lambda s: 2.0 * s["M"] * s["K"],
        bytes_fn=lambda s: 2.0 * (s["M"] * s["K"] + s["K"] + s["M"]),
        output_elements_fn=lambda s: s["M"],
        npu2={"bf16-out": NpuFigure(1.6e-9, 0.0, 2.7e-8, "2048x2048, 8/8/8 (vs a reference rounded the same way)")},
        registry_shape={"M": 2048, "K": 2048},
        small_shape={"M": 256, "K": 512},
        target_tiles=_tiles(8, 4),
        fidelity_band=0.0,  # judged as an absolute bound: <= 1e-6
    ),
    # The 4-bit (Q4NX) kernels of mlir-air's on-device 4-bit deployment (llama32_1b_q4nx). mlir-air's registry
    # has no NPU2 figure for them: `npu2` is empty and every report says "not measured".
    "dequant_q4nx": KernelSpec(
        name="dequant_q4nx",
        shape_keys=("M", "K"),
        contracts=_bf16("dequant_q4nx", "4-bit codes, bf16 scale/min per 32 columns: FP32 q*scale+min, one RNE to bf16"),
        default_contract="bf16-out",
        make_inputs_fn=refs.dequant_q4nx_inputs,
        reference_fn=refs.dequant_q4nx_reference,
        call_fn=refs.dequant_q4nx_call,
        flops_fn=lambda s: 2.0 * s["M"] * s["K"],
        bytes_fn=lambda s: s["M"] * s["K"] * (0.5 + 4.0 / 32) + 2.0 * s["M"] * s["K"],
        output_elements_fn=lambda s: s["M"] * s["K"],
        npu2={},
        registry_shape={"M": 512, "K": 2048},  # dequant_q4nx.py's own check (`N_out, K = 512, 2048`)
        small_shape={"M": 64, "K": 256},
        target_tiles=_tiles(4, 4),
        fidelity_band=0.0,  # exact: judged bit for bit against its reference
        extra={"check_shape": refs.q4nx_check_shape},
    ),
    "gemv_q4nx": KernelSpec(
        name="gemv_q4nx",
        shape_keys=("M", "K"),
        contracts=_bf16("gemv_q4nx", "4-bit GEMV: per-group FP32 q.x rounded to bf16, times scale, + min*bf16(sum x)"),
        default_contract="bf16-out",
        make_inputs_fn=refs.gemv_q4nx_inputs,
        reference_fn=refs.gemv_q4nx_reference,
        call_fn=refs.gemv_q4nx_call,
        flops_fn=lambda s: 2.0 * s["M"] * s["K"],
        bytes_fn=lambda s: s["M"] * s["K"] * (0.5 + 4.0 / 32) + 2.0 * (s["K"] + s["M"]),
        output_elements_fn=lambda s: s["M"],
        npu2={},
        registry_shape={"M": 2048, "K": 2048},
        small_shape={"M": 256, "K": 512},
        target_tiles=_tiles(8, 4),
        extra={"check_shape": refs.q4nx_gemv_check_shape},
    ),
}

# The kernels declared piecewise above, and those of the registry (npu_kernels.numerics.kernels: one module per kernel) in
# their listing place.
CATALOG: dict[str, KernelSpec] = in_listing_order(_PIECEWISE, lambda d: d.spec)
KERNELS = tuple(CATALOG)


def get_spec(kernel: str) -> KernelSpec:
    """The catalog entry of `kernel`; raises UnknownKernel naming the known kernels."""
    try:
        return CATALOG[kernel]
    except KeyError:
        raise UnknownKernel(f"unknown kernel {kernel!r}; known kernels: {', '.join(KERNELS)}") from None


def npu2_low_precision_figure(K: int) -> float | None:
    """The registry's NPU2 low-precision GEMM mean_rel_L1 at reduction length K (None: not measured)."""
    return NPU2_GEMM_LOW_BY_K.get(int(K))
