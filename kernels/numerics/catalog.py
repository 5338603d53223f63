"""The leaf kernels of NUMERICS.md: shapes, contracts (tolerances), inputs, FP32 references, costs.

Each `KernelSpec` knows
  * its shape keys (a named dict: gemm {M,K,N}, gemv {M,K}, rmsnorm/layernorm {M,N}, rope {rows,head_dim},
    flash_attention {lq,lk,dk,dv,heads_q,heads_kv,causal}, eltwise_add/silu_mul/gelu {N});
  * its contracts: output dtype and the rtol/atol of the NUMERICS table (GEMM has three);
  * `make_inputs(shape, seed)`: mlir-air's harness inputs - bf16-rounded `randn / sqrt(K)` for matmuls,
    `randn` elsewhere, a fixed seed; RoPE's cos/sin LUT for positions 0..rows-1 at theta 500000, in bf16;
  * `reference(inputs, shape, contract)`: the same math in FP32 on those inputs, cast to the output dtype;
  * `call(executor, inputs, shape, contract, tile)`: how the executor method is invoked;
  * `flops(shape)` / `bytes(shape)`, the NPU2 measured mean_rel_L1 of NUMERICS (for reports and the
    bench), a registry shape (the registry row the bench compares at), a small shape (fast tests) and the
    target tile count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from kernels.numerics.bf16 import to_bf16
from kernels.thresholds import kernel_tolerance

RMS_EPS = 1e-5  # the mlir-air harnesses' eps (weighted_rms_norm.py, layer_norm.py)
LN_EPS = 1e-5
ROPE_THETA = 500000.0  # rope_halfsplit.py's LUT (llama-3.2 rope_base)
GELU_C = math.sqrt(2.0 / math.pi)
GELU_BETA = 0.044715


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
    name: str
    shape_keys: tuple[str, ...]
    contracts: dict[str, Contract]
    default_contract: str
    make_inputs_fn: Callable[[dict, np.random.Generator], dict[str, np.ndarray]]
    reference_fn: Callable[[dict, dict], np.ndarray]
    call_fn: Callable[..., np.ndarray]
    flops_fn: Callable[[dict], float]
    bytes_fn: Callable[[dict], float]
    npu2: dict[str, NpuFigure]  # per contract
    registry_shape: dict[str, Any]
    small_shape: dict[str, Any]
    target_tiles: dict[str, int]  # per target
    bool_keys: tuple[str, ...] = ()
    fidelity_band: float = 0.25  # the "within +-x of the NPU2 figure" band
    extra: dict[str, Any] = field(default_factory=dict)

    # --- shapes --------------------------------------------------------------------------------------

    def normalize_shape(self, shape: dict) -> dict:
        """The shape with exactly this kernel's keys, sizes as positive ints (bools for flags)."""
        if not isinstance(shape, dict):
            raise ShapeError(f"{self.name}: shape must be a dict of {', '.join(self.shape_keys)}")
        unknown = set(shape) - set(self.shape_keys)
        missing = [k for k in self.shape_keys if k not in shape]
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            if unknown:
                parts.append(f"unknown {', '.join(sorted(unknown))}")
            raise ShapeError(f"{self.name}: shape needs {', '.join(self.shape_keys)} ({'; '.join(parts)})")
        out: dict[str, Any] = {}
        for k in self.shape_keys:
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

    def npu2_figure(self, contract: str | None = None) -> NpuFigure:
        return self.npu2[self.contract(contract).name]


def _as_bool(kernel: str, key: str, v) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, np.integer)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("1", "true", "yes", "y", "on", "0", "false", "no", "n", "off"):
        return v.strip().lower() in ("1", "true", "yes", "y", "on")
    raise ShapeError(f"{kernel}: {key}={v!r} is not a boolean (true/false)")


def _randn(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    """bf16-rounded N(0, scale^2) values as float32 (the harnesses draw float and cast to bf16)."""
    return to_bf16(rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))


# --- GEMM / GEMV -----------------------------------------------------------------------------------------

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


def _gemm_inputs(s, rng):
    scale = 1.0 / math.sqrt(s["K"])
    return {"a": _randn(rng, (s["M"], s["K"]), scale), "b": _randn(rng, (s["K"], s["N"]), scale)}


def _gemm_ref(i, s):
    return np.matmul(i["a"], i["b"], dtype=np.float32)


def _gemm_call(ex, i, s, contract, tile):
    return ex.gemm(i["a"], i["b"], contract=contract, tile=tile)


def _gemv_inputs(s, rng):
    scale = 1.0 / math.sqrt(s["K"])
    return {"a": _randn(rng, (s["M"], s["K"]), scale), "x": _randn(rng, (s["K"],), scale)}


def _gemv_ref(i, s):
    return i["a"] @ i["x"]


def _gemv_call(ex, i, s, contract, tile):
    return ex.gemv(i["a"], i["x"])


# --- norms -----------------------------------------------------------------------------------------------


def _rms_inputs(s, rng):
    return {"x": _randn(rng, (s["M"], s["N"])), "w": _randn(rng, (s["N"],))}


def _rms_ref(i, s):
    x = i["x"]
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32) + np.float32(RMS_EPS))
    return x / rms * i["w"]


def _rms_call(ex, i, s, contract, tile):
    return ex.rmsnorm(i["x"], i["w"], RMS_EPS)


def _ln_inputs(s, rng):
    return {"x": _randn(rng, (s["M"], s["N"])), "w": _randn(rng, (s["N"],)), "b": _randn(rng, (s["N"],))}


def _ln_ref(i, s):
    x = i["x"]
    mu = x.mean(axis=-1, keepdims=True, dtype=np.float32)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True, dtype=np.float32)
    return (x - mu) / np.sqrt(var + np.float32(LN_EPS)) * i["w"] + i["b"]


def _ln_call(ex, i, s, contract, tile):
    return ex.layernorm(i["x"], i["w"], i["b"], LN_EPS)


# --- RoPE ------------------------------------------------------------------------------------------------


def rope_lut(rows: int, head_dim: int, theta: float = ROPE_THETA, positions=None) -> tuple[np.ndarray, np.ndarray]:
    """bf16 cos/sin tables (rows, head_dim/2) for positions 0..rows-1 (rope_halfsplit.py's LUT)."""
    half = head_dim // 2
    pos = np.arange(rows, dtype=np.float64) if positions is None else np.asarray(positions, np.float64)
    freqs = 1.0 / (theta ** (2.0 * np.arange(half, dtype=np.float64) / head_dim))
    angles = np.outer(pos, freqs)  # (rows, half)
    return to_bf16(np.cos(angles).astype(np.float32)), to_bf16(np.sin(angles).astype(np.float32))


def _rope_check(s):
    if s["head_dim"] % 2:
        raise ShapeError(f"rope: head_dim={s['head_dim']} must be even (half-split)")


def _rope_inputs(s, rng):
    cos, sin = rope_lut(s["rows"], s["head_dim"])
    return {"x": _randn(rng, (s["rows"], s["head_dim"])), "cos": cos, "sin": sin}


def _rope_ref(i, s):
    x = i["x"]
    half = x.shape[-1] // 2
    x1, x2 = x[:, :half], x[:, half:]
    c, sn = i["cos"], i["sin"]
    return np.concatenate([x1 * c - x2 * sn, x1 * sn + x2 * c], axis=-1)


def _rope_call(ex, i, s, contract, tile):
    return ex.rope(i["x"], i["cos"], i["sin"])


# --- FlashAttention --------------------------------------------------------------------------------------


def _fa_check(s):
    if s["heads_q"] % s["heads_kv"]:
        raise ShapeError(f"flash_attention: heads_q={s['heads_q']} is not a multiple of heads_kv={s['heads_kv']}")


def _fa_inputs(s, rng):
    return {
        "q": _randn(rng, (s["heads_q"], s["lq"], s["dk"])),
        "k": _randn(rng, (s["heads_kv"], s["lk"], s["dk"])),
        "v": _randn(rng, (s["heads_kv"], s["lk"], s["dv"])),
    }


def attention_reference(q, k, v, causal: bool, q_offset: int = 0) -> np.ndarray:
    """FP32 SDPA per head (mlir-air attn_npu2.py's reference): masked scores -1e9, softmax in FP32."""
    hq, lq, dk = q.shape
    hkv = k.shape[0]
    group = hq // hkv
    out = np.empty((hq, lq, v.shape[2]), np.float32)
    scale = np.float32(1.0 / math.sqrt(dk))
    for h in range(hq):
        scores = (q[h] @ k[h // group].T) * scale  # (Lq, Lk)
        if causal:
            future = np.arange(k.shape[1])[None, :] > (q_offset + np.arange(lq))[:, None]
            scores = np.where(future, np.float32(-1e9), scores)
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        out[h] = p @ v[h // group]
    return out


def _fa_ref(i, s):
    return attention_reference(i["q"], i["k"], i["v"], s["causal"])


def _fa_call(ex, i, s, contract, tile):
    return ex.flash_attention(i["q"], i["k"], i["v"], causal=s["causal"])


def _fa_flops(s):
    f = 2.0 * s["heads_q"] * s["lq"] * s["lk"] * (s["dk"] + s["dv"])
    return f * 0.5 if s["causal"] else f


def _fa_bytes(s):
    return 2.0 * (s["heads_q"] * s["lq"] * (s["dk"] + s["dv"]) + s["heads_kv"] * s["lk"] * (s["dk"] + s["dv"]))


# --- elementwise -----------------------------------------------------------------------------------------


def _add_inputs(s, rng):
    return {"a": _randn(rng, (s["N"],)), "b": _randn(rng, (s["N"],))}


def _add_ref(i, s):
    return i["a"] + i["b"]


def _add_call(ex, i, s, contract, tile):
    return ex.eltwise_add(i["a"], i["b"])


def _silu_inputs(s, rng):
    return {"g": _randn(rng, (s["N"],)), "u": _randn(rng, (s["N"],))}


def _silu_ref(i, s):
    g = i["g"]
    return g * (np.float32(1.0) / (np.float32(1.0) + np.exp(-g))) * i["u"]


def _silu_call(ex, i, s, contract, tile):
    return ex.silu_mul(i["g"], i["u"])


def _gelu_inputs(s, rng):
    return {"x": _randn(rng, (s["N"],))}


def _gelu_ref(i, s):
    x = i["x"]
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(np.float32(GELU_C) * (x + np.float32(GELU_BETA) * x * x * x)))


def _gelu_call(ex, i, s, contract, tile):
    return ex.gelu(i["x"])


# --- the catalog -----------------------------------------------------------------------------------------


def _bf16(name: str, description: str) -> dict[str, Contract]:
    return {"bf16-out": Contract("bf16-out", *kernel_tolerance(name, "bf16-out"), "bf16", description)}


def _tiles(npu2: int, npu1: int) -> dict[str, int]:
    return {"npu2": npu2, "npu1": npu1}


CATALOG: dict[str, KernelSpec] = {
    "gemm": KernelSpec(
        name="gemm",
        shape_keys=("M", "K", "N"),
        contracts=GEMM_CONTRACTS,
        default_contract="bf16-out-high",
        make_inputs_fn=_gemm_inputs,
        reference_fn=_gemm_ref,
        call_fn=_gemm_call,
        flops_fn=lambda s: 2.0 * s["M"] * s["K"] * s["N"],
        bytes_fn=lambda s: 2.0 * (s["M"] * s["K"] + s["K"] * s["N"] + s["M"] * s["N"]),
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
        make_inputs_fn=_gemv_inputs,
        reference_fn=_gemv_ref,
        call_fn=_gemv_call,
        flops_fn=lambda s: 2.0 * s["M"] * s["K"],
        bytes_fn=lambda s: 2.0 * (s["M"] * s["K"] + s["K"] + s["M"]),
        npu2={"bf16-out": NpuFigure(1.6e-9, 0.0, 2.7e-8, "2048x2048, 8/8/8 (vs a reference rounded the same way)")},
        registry_shape={"M": 2048, "K": 2048},
        small_shape={"M": 256, "K": 512},
        target_tiles=_tiles(8, 4),
        fidelity_band=0.0,  # judged as an absolute bound: <= 1e-6
    ),
    "rmsnorm": KernelSpec(
        name="rmsnorm",
        shape_keys=("M", "N"),
        contracts=_bf16("rmsnorm", "bf16 in/out, FP32 sum of squares"),
        default_contract="bf16-out",
        make_inputs_fn=_rms_inputs,
        reference_fn=_rms_ref,
        call_fn=_rms_call,
        flops_fn=lambda s: 4.0 * s["M"] * s["N"],
        bytes_fn=lambda s: 2.0 * (2 * s["M"] * s["N"] + s["N"]),
        npu2={"bf16-out": NpuFigure(4.2e-3, 4.2e-3, 4.6e-3, "2048x2048, herd 8")},
        registry_shape={"M": 2048, "N": 2048},
        small_shape={"M": 64, "N": 256},
        target_tiles=_tiles(8, 4),
    ),
    "layernorm": KernelSpec(
        name="layernorm",
        shape_keys=("M", "N"),
        contracts=_bf16("layernorm", "bf16 in/out, FP32 mean and variance"),
        default_contract="bf16-out",
        make_inputs_fn=_ln_inputs,
        reference_fn=_ln_ref,
        call_fn=_ln_call,
        flops_fn=lambda s: 7.0 * s["M"] * s["N"],
        bytes_fn=lambda s: 2.0 * (2 * s["M"] * s["N"] + 2 * s["N"]),
        npu2={"bf16-out": NpuFigure(4.4e-3, 4.4e-3, 4.4e-3, "1024x768, herd 8")},
        registry_shape={"M": 1024, "N": 768},
        small_shape={"M": 64, "N": 256},
        target_tiles=_tiles(8, 4),
    ),
    "rope": KernelSpec(
        name="rope",
        shape_keys=("rows", "head_dim"),
        contracts=_bf16("rope", "bf16 half-split rotation, cos/sin LUT"),
        default_contract="bf16-out",
        make_inputs_fn=_rope_inputs,
        reference_fn=_rope_ref,
        call_fn=_rope_call,
        flops_fn=lambda s: 3.0 * s["rows"] * s["head_dim"],
        bytes_fn=lambda s: 2.0 * 3 * s["rows"] * s["head_dim"],
        npu2={"bf16-out": NpuFigure(2.8e-3, 2.4e-3, 2.8e-3, "65536x64 (decode 8x64: 2.4e-3)")},
        registry_shape={"rows": 65536, "head_dim": 64},
        small_shape={"rows": 256, "head_dim": 64},
        target_tiles=_tiles(8, 4),
        extra={"check_shape": _rope_check},
    ),
    "flash_attention": KernelSpec(
        name="flash_attention",
        shape_keys=("lq", "lk", "dk", "dv", "heads_q", "heads_kv", "causal"),
        contracts=_bf16("flash_attention", "bf16 Q/K/V, BFP16 MMAs, bf16 online softmax"),
        default_contract="bf16-out",
        make_inputs_fn=_fa_inputs,
        reference_fn=_fa_ref,
        call_fn=_fa_call,
        flops_fn=_fa_flops,
        bytes_fn=_fa_bytes,
        npu2={"bf16-out": NpuFigure(4.6e-2, 3.8e-2, 5.5e-2, "512x512, dk 64, 12/6 heads, non-causal")},
        registry_shape={"lq": 512, "lk": 512, "dk": 64, "dv": 64, "heads_q": 12, "heads_kv": 6, "causal": False},
        small_shape={"lq": 128, "lk": 128, "dk": 64, "dv": 64, "heads_q": 4, "heads_kv": 2, "causal": True},
        target_tiles=_tiles(32, 16),
        bool_keys=("causal",),
        extra={"check_shape": _fa_check},
    ),
    "eltwise_add": KernelSpec(
        name="eltwise_add",
        shape_keys=("N",),
        contracts=_bf16("eltwise_add", "bf16 add, one rounding"),
        default_contract="bf16-out",
        make_inputs_fn=_add_inputs,
        reference_fn=_add_ref,
        call_fn=_add_call,
        flops_fn=lambda s: float(s["N"]),
        bytes_fn=lambda s: 6.0 * s["N"],
        npu2={"bf16-out": NpuFigure(1.9e-3, 1.9e-3, 1.9e-3, "N=4194304, herd 8x1")},
        registry_shape={"N": 4194304},
        small_shape={"N": 65536},
        target_tiles=_tiles(8, 4),
    ),
    "silu_mul": KernelSpec(
        name="silu_mul",
        shape_keys=("N",),
        contracts=_bf16("silu_mul", "bf16 SiLU(gate)*up, sigmoid via hardware tanh"),
        default_contract="bf16-out",
        make_inputs_fn=_silu_inputs,
        reference_fn=_silu_ref,
        call_fn=_silu_call,
        flops_fn=lambda s: 6.0 * s["N"],
        bytes_fn=lambda s: 6.0 * s["N"],
        npu2={"bf16-out": NpuFigure(1.0e-2, 1.0e-2, 1.0e-2, "N=4194304 (2048x2048), herd 8x1")},
        registry_shape={"N": 4194304},
        small_shape={"N": 65536},
        target_tiles=_tiles(8, 4),
    ),
    "gelu": KernelSpec(
        name="gelu",
        shape_keys=("N",),
        contracts=_bf16("gelu", "bf16 GELU (tanh approximation), hardware tanh"),
        default_contract="bf16-out",
        make_inputs_fn=_gelu_inputs,
        reference_fn=_gelu_ref,
        call_fn=_gelu_call,
        flops_fn=lambda s: 9.0 * s["N"],
        bytes_fn=lambda s: 4.0 * s["N"],
        npu2={"bf16-out": NpuFigure(8.4e-3, 8.4e-3, 8.4e-3, "N=3145728, herd 8x2")},
        registry_shape={"N": 3145728},
        small_shape={"N": 65536},
        target_tiles=_tiles(16, 8),
    ),
}

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
