"""The types of the leaf-kernel catalog: `KernelSpec` (shape keys, contracts, inputs, reference, executor call,
costs, NPU2 figures), `Contract` (a tolerance row of docs/numerics.md), `NpuFigure`, and the errors a spec raises.

The specs themselves are `npu_kernels.numerics.catalog.CATALOG`; their per-kernel math is
`npu_kernels.numerics.references`. Anyone may import these types (npu_kernels.numerics is the lowest room but one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from npu_kernels.numerics.bf16 import to_bf16


class ShapeError(ValueError):
    """Raised when a shape dict does not fit a kernel (unknown/missing keys, non-positive sizes)."""


class UnknownKernel(KeyError):
    """Raised when a kernel name is not in the catalog; the message lists the known kernels."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the sentence readable
        return str(self.args[0])


@dataclass(frozen=True)
class Contract:
    name: str
    rtol: float
    atol: float
    out_dtype: str  # "bf16" | "f32"
    description: str
    tier: str = ""  # GEMM: high / low


@dataclass(frozen=True)
class NpuFigure:
    """A measured NPU2 mean_rel_L1 (NUMERICS / mlir-air's kernel registry) and where it was measured."""

    mean_rel_L1: float
    low: float
    high: float
    at: str  # the shape / configuration of the measurement

    def to_json(self) -> dict:
        return {"mean_rel_L1": self.mean_rel_L1, "range": [self.low, self.high], "at": self.at}


@dataclass(frozen=True)
class KernelSpec:
    """One leaf kernel of docs/numerics.md. It knows
      * its shape keys (a named dict: gemm {M,K,N}, gemv {M,K}, rmsnorm/layernorm {M,N}, rope {rows,head_dim},
        flash_attention {lq,lk,dk,dv,heads_q,heads_kv,causal}, eltwise_add/silu_mul/gelu {N});
      * its contracts: output dtype and the rtol/atol of the NUMERICS table (GEMM has three);
      * `make_inputs(shape, seed)`: mlir-air's harness inputs - bf16-rounded `randn / sqrt(K)` for matmuls,
        `randn` elsewhere, a fixed seed; RoPE's cos/sin LUT for positions 0..rows-1 at theta 500000, in bf16;
      * `reference(inputs, shape, contract)`: the same math in FP32 on those inputs, cast to the output dtype;
      * `call(executor, inputs, shape, contract, tile)`: how the executor method is invoked;
      * `output_elements(shape)`: how many elements its one output has (the count a harness's `[precision]`
        line must have checked; npu_kernels.perf.evidence reads it, so a new kernel cannot be missed there);
      * `flops(shape)` / `bytes(shape)`, the NPU2 measured mean_rel_L1 of NUMERICS (for reports and the
        bench), a registry shape (the registry row the bench compares at), a small shape (fast tests) and the
        target tile count."""

    name: str
    shape_keys: tuple[str, ...]
    contracts: dict[str, Contract]
    default_contract: str
    make_inputs_fn: Callable[[dict, np.random.Generator], dict[str, np.ndarray]]
    reference_fn: Callable[[dict, dict], np.ndarray]
    call_fn: Callable[..., np.ndarray]
    flops_fn: Callable[[dict], float]
    bytes_fn: Callable[[dict], float]
    output_elements_fn: Callable[[dict], int]  # required: every kernel states the size of its output
    npu2: dict[str, NpuFigure]  # per contract
    registry_shape: dict[str, Any]
    small_shape: dict[str, Any]
    target_tiles: dict[str, int]  # per target
    bool_keys: tuple[str, ...] = ()
    optional_keys: tuple[str, ...] = ()  # keys a shape may add (rope's rotary_dim of a partial rotary)
    fidelity_band: float = 0.25  # the "within +-x of the NPU2 figure" band
    extra: dict[str, Any] = field(default_factory=dict)

    # --- shapes --------------------------------------------------------------------------------------

    def normalize_shape(self, shape: dict) -> dict:
        """The shape with exactly this kernel's keys, sizes as positive ints (bools for flags)."""
        if not isinstance(shape, dict):
            raise ShapeError(f"{self.name}: shape must be a dict of {', '.join(self.shape_keys)}")
        unknown = set(shape) - set(self.shape_keys) - set(self.optional_keys)
        missing = [k for k in self.shape_keys if k not in shape]
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            if unknown:
                parts.append(f"unknown {', '.join(sorted(unknown))}")
            raise ShapeError(f"{self.name}: shape needs {', '.join(self.shape_keys)} ({'; '.join(parts)})")
        out: dict[str, Any] = {}
        for k in (*self.shape_keys, *(k for k in self.optional_keys if k in shape)):
            v = shape[k]
            if k in self.bool_keys:
                out[k] = _as_bool(self.name, k, v)
                continue
            try:
                iv = int(v)
            except (TypeError, ValueError):
                raise ShapeError(f"{self.name}: {k}={v!r} is not an integer") from None
            if iv != v and not (isinstance(v, str) and str(iv) == v.strip()):
                raise ShapeError(f"{self.name}: {k}={v!r} is not an integer")
            if iv <= 0:
                raise ShapeError(f"{self.name}: {k}={iv} must be positive")
            out[k] = iv
        check = self.extra.get("check_shape")
        if check is not None:
            check(out)
        return out

    def contract(self, name: str | None) -> Contract:
        name = name or self.default_contract
        try:
            return self.contracts[name]
        except KeyError:
            raise ValueError(
                f"{self.name}: unknown contract {name!r}; expected one of {', '.join(self.contracts)}"
            ) from None

    # --- data ----------------------------------------------------------------------------------------

    def make_inputs(self, shape: dict, seed: int = 0) -> dict[str, np.ndarray]:
        return self.make_inputs_fn(self.normalize_shape(shape), np.random.default_rng(seed))

    def reference(self, inputs: dict, shape: dict, contract: str | None = None) -> np.ndarray:
        c = self.contract(contract)
        ref = np.asarray(self.reference_fn(inputs, self.normalize_shape(shape)), np.float32)
        return ref if c.out_dtype == "f32" else to_bf16(ref)

    def call(self, executor, inputs: dict, shape: dict, contract: str | None = None, tile: dict | None = None):
        c = self.contract(contract)
        return np.asarray(self.call_fn(executor, inputs, self.normalize_shape(shape), c.name, tile), np.float32)

    def flops(self, shape: dict) -> float:
        return float(self.flops_fn(self.normalize_shape(shape)))

    def bytes(self, shape: dict) -> float:
        return float(self.bytes_fn(self.normalize_shape(shape)))

    def output_elements(self, shape: dict) -> int:
        """The number of elements of the kernel's (single) output at `shape`."""
        return int(self.output_elements_fn(self.normalize_shape(shape)))

    def npu2_figure(self, contract: str | None = None) -> NpuFigure | None:
        """The NPU2 measured figure of a contract; None where mlir-air published none (the 4-bit kernels)."""
        return self.npu2.get(self.contract(contract).name)


def _as_bool(kernel: str, key: str, v) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, np.integer)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("1", "true", "yes", "y", "on", "0", "false", "no", "n", "off"):
        return v.strip().lower() in ("1", "true", "yes", "y", "on")
    raise ShapeError(f"{kernel}: {key}={v!r} is not a boolean (true/false)")
