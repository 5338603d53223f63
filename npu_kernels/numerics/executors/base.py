"""The leaf-kernel executor interface and the FP32 CPU reference executor.

Every executor exposes the same leaf kernels as methods; the decoder pipeline and the Phase 1 gate call
only these. Arrays cross the interface as numpy float32 arrays. On the way in the caller passes values
that are already bf16-representable (the host holds bf16 tensors as float32); on the way out each executor
returns float32 arrays holding exactly what its datapath produces (bf16-rounded values for bf16-out
kernels, raw FP32 for `gemm(contract="f32-out")`).

Layouts (dimensions named once):
  gemm(a (M, K), b (K, N))                       -> (M, N)     y = a @ b, weights pre-transposed at load
  rmsnorm(x (M, N), w (N,), eps)                 -> (M, N)
  layernorm(x (M, N), w (N,), b (N,), eps)       -> (M, N)
  rope(x (rows, D), cos (rows, D/2), sin (rows, D/2)) -> (rows, D)   half-split (HF rotate_half):
        out[:, :D/2] = x1*cos - x2*sin ; out[:, D/2:] = x2*cos + x1*sin
  flash_attention(q (Hq, Lq, Dk), k (Hkv, Lk, Dk), v (Hkv, Lk, Dv), causal, q_offset=0) -> (Hq, Lq, Dv)
        GQA: q head h uses kv head h // (Hq // Hkv); causal masks key j > q_offset + i; scale 1/sqrt(Dk)
  gelu(x)     elementwise, any shape

The kernels of the registry (npu_kernels.numerics.kernels: rope, eltwise_add, silu_mul, gelu, eltwise_mul, conv1d, ...) state their layouts in their own
modules, which also hold each executor's method (`bind_kernels` attaches them).

`static_key`, where accepted, names a weight that does not change between calls (weight residency): an
executor may cache its converted/quantised form under that key. It must never change the numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from npu_kernels.numerics.kernels import definitions as kernel_definitions
from npu_kernels.numerics.kernels import in_listing_order

# the kernels of the registry (npu_kernels.numerics.kernels), in the catalog's listing order
KERNEL_NAMES = tuple(in_listing_order({}, lambda d: d.name))


@dataclass
class KernelTimer:
    """Accumulates wall time and call counts per kernel name (for profiles)."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def time(self, name: str) -> "_Timing":
        """`with timer.time(name):` adds the block's wall time and one call to `name`, an exception included."""
        return _Timing(self, name)

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()


class _Timing:
    """KernelTimer.time's context manager: a class, not a generator (every kernel call and pipeline stage enters one;
    contextlib's generator machinery cost ~8 % of a tiny model's emulated decode, 2026-12-07)."""

    __slots__ = ("timer", "name", "t0")

    def __init__(self, timer: KernelTimer, name: str) -> None:
        self.timer, self.name = timer, name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc) -> bool:
        timer, name = self.timer, self.name
        timer.seconds[name] = timer.seconds.get(name, 0.0) + time.perf_counter() - self.t0
        timer.calls[name] = timer.calls.get(name, 0) + 1
        return False


class Executor:
    """Base class: subclasses implement the leaf kernels listed in KERNEL_NAMES."""

    name: str = "base"
    target: str = "npu2"
    # activations between kernels live in bf16 buffers (NPU2, a bf16 GPU); a host step of the pipeline
    # rounds what it hands on to bf16 when this is true
    bf16_buffers: bool = True

    def __init__(self, target: str = "npu2") -> None:
        self.target = target
        self.timer = KernelTimer()

    def describe(self) -> dict:
        """What the ledger records about this executor (name, target, precision settings)."""
        return {"executor": self.name, "target": self.target}

    def clear_cache(self) -> None:
        """Drop cached static inputs (weight residency)."""


class Fp32Executor(Executor):
    """FP32 CPU versions of every leaf kernel: the references, and the bisect's 'known good' swap-in."""

    name = "fp32"
    bf16_buffers = False


def bind_kernels(cls: type, role: str) -> type:
    """Give executor class `cls` the method `role` ("fp32", "emulated", "torch") of every kernel of the registry
    (npu_kernels.numerics.kernels), under the kernel's name; a method the class defines itself is kept."""
    for d in kernel_definitions():
        if d.name not in cls.__dict__:
            setattr(cls, d.name, getattr(d, role))
    return cls


bind_kernels(Fp32Executor, "fp32")


class MixedExecutor(Executor):
    """Routes the kernels named in `swapped` to `fallback` and the rest to `primary` (Phase 2 bisect)."""

    def __init__(self, primary: Executor, fallback: Executor, swapped: set[str]) -> None:
        super().__init__(primary.target)
        self.name = f"{primary.name}+fp32[{','.join(sorted(swapped))}]"
        self.primary, self.fallback, self.swapped = primary, fallback, set(swapped)
        self.bf16_buffers = primary.bf16_buffers

    def __getattr__(self, item: str):
        if item in KERNEL_NAMES:
            return getattr(self.fallback if item in self.swapped else self.primary, item)
        raise AttributeError(item)
