"""The leaf-kernel catalog of docs/numerics.md: one `KernelSpec` per kernel (`CATALOG`, `get_spec`), with its
contracts (tolerances from its module), the NPU2 figures measured in mlir-air's kernel registry, a registry shape, a
small shape and the target tile counts.

Every kernel of the registry (`npu_kernels.numerics.kernels`: gemm, gemv, eltwise_add, conv1d, ...) declares its spec
in its own module (its inputs, FP32 reference and executor call among them); `CATALOG` lists them in their place.
The spec types and errors are `npu_kernels.numerics.spec`. Anyone may import the catalog.
"""

from __future__ import annotations

from npu_kernels.numerics.kernels import in_listing_order
from npu_kernels.numerics.spec import KernelSpec, UnknownKernel

# The kernels of the registry (npu_kernels.numerics.kernels: one module per kernel), in their listing place.
CATALOG: dict[str, KernelSpec] = in_listing_order({}, lambda d: d.spec)
KERNELS = tuple(CATALOG)


def get_spec(kernel: str) -> KernelSpec:
    """The catalog entry of `kernel`; raises UnknownKernel naming the known kernels."""
    try:
        return CATALOG[kernel]
    except KeyError:
        raise UnknownKernel(f"unknown kernel {kernel!r}; known kernels: {', '.join(KERNELS)}") from None
