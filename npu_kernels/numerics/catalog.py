"""The leaf-kernel catalog of docs/numerics.md: one `KernelSpec` per kernel (`CATALOG`, `get_spec`), with its
contracts (tolerances from npu_kernels.thresholds), the NPU2 figures measured in mlir-air's kernel registry, a
registry shape, a small shape and the target tile counts.

The kernels of the registry (`npu_kernels.numerics.kernels`: eltwise_add, eltwise_mul, conv1d, ...) declare their specs in their
own modules; `CATALOG` lists them in their place. The spec types and errors are `npu_kernels.numerics.spec`; the per-kernel math (inputs, references, executor
calls) is `npu_kernels.numerics.references`. Anyone may import the catalog.
"""

from __future__ import annotations

from npu_kernels.numerics.kernels import in_listing_order, kernel_tolerance
from npu_kernels.numerics import references as refs
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure, UnknownKernel

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
