"""gemm: the bf16 matmul of mlir-air's matrix_multiplication/bf16_in_bf16_out and bf16_in_fp32_out (three contracts:
f32-out, bf16-out-high, bf16-out-low), moving into this module piece by piece (issue #47 item 1). Until every piece
is here it is not in the registry's MODULES: `npu_kernels.numerics.kernels.piece` reads the pieces below, the rest are
still declared in the rooms.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from npu_kernels.numerics.harness_case import HarnessCase, harness_bf16, sequential_matmul_f32
from npu_kernels.numerics.kernels.base import TwinStandIn
from npu_kernels.thresholds import RTOL

# (contract) -> (rtol, atol), from npu_kernels.thresholds' table, where they were declared until this move
TOLERANCES = {
    "f32-out": (RTOL, 1.5e-3),  # atol sized to the K=8192 Down projection's datapath error
    "bf16-out-high": (RTOL, 1.5e-3),
    "bf16-out-low": (RTOL, 4e-3),  # bf16 partial sums: the low-precision tier's wider error
}
TOLERANCE_SOURCE = ("docs/numerics.md's leaf-kernel table (GEMM: rtol 1.6e-2; atol 1.5e-3 on f32-out and bf16-out-high, "
                    "sized to the K=8192 Down projection's datapath error; 4e-3 on bf16-out-low, bf16 partial sums), "
                    "the NUMERICS tolerances npu_kernels.thresholds carried; NPU2 measures 9.3e-3 to 1.9e-2 "
                    "(GEMM_bf16_in_{bf16,fp32}_out.md)")

# The executor runs at the planned tile: emulated.py's gemm takes its tile (its L2 K tiling, the bf16-out-low tier's
# bf16 partial sums per tile_k_l2 and the method's cast), so the in-process run and the twin hand the plan's tile over.
CALLS_WITH_TILE = True

# mlir-air's GEMM registry pages quote GFLOP/s (details/GEMM_bf16_in_{bf16,fp32}_out.md at e972f29): the cost
# model's leave-one-out error of a gemm row is taken on that figure (measured over predicted).
FIT_METRIC = "GFLOP/s"

# mlir-air's GEMM pages keep a best measured configuration per shape and tier (details/GEMM_bf16_in_{bf16,fp32}_out.json
# `best.high` / `best.low` at e972f29, read by registry_lookup.gemm_config): the registry's lookup answers from it.
BEST_CONFIG = True


def method_tier(shape: dict, contract: str, tile: dict) -> tuple[str, str]:
    """(method, tier) a run used, in mlir-air's registry names (details/GEMM_bf16_in_{bf16,fp32}_out.json's
    `methods.<name>.tier` at e972f29): bf16-out high -> fused-cast / drain (auto resolved as run.py:1147-1151 does),
    bf16-out low -> direct (tier low), f32-out -> external / direct (the CODEGEN, tier high)."""
    t = {k.lower(): v for k, v in tile.items()}
    if contract == "bf16-out-low":
        return "direct", "low"
    if contract == "f32-out":
        return str(t.get("codegen") or "external"), "high"
    method = str(t.get("method") or "auto")
    if method == "auto":
        method = "fused-cast" if shape["M"] * shape["K"] * shape["N"] >= 4e9 else "drain"
    return method, "high"



def fp32(self, a, b, *, contract: str = "bf16-out-high", tile=None, static_key=None):
    """The FP32 reference executor's gemm (npu_kernels.numerics.executors.base.Fp32Executor)."""
    # C-contiguous B: a pipeline's weight comes as a transposed view, and BLAS would sum it in another order
    return np.asarray(a, np.float32) @ np.ascontiguousarray(b, np.float32)


# --- the twin's stand-ins: mlir-air has two GEMM harness directories, one script each ---------------------------


def _twin_flags(p: argparse.ArgumentParser) -> None:
    """The flags both scripts share (bf16_in_bf16_out/run.py:1093-1139, bf16_in_fp32_out/run.py:1039-1063)."""
    for name in ("m", "k", "n"):
        p.add_argument(f"--{name}", type=int, default=512)
    p.add_argument("--tile-m", type=int, default=64)
    p.add_argument("--tile-k-l2", type=int, default=256)
    p.add_argument("--tile-k-l1", type=int, default=32)
    p.add_argument("--tile-n", type=int, default=128)
    p.add_argument("--herd-m", type=int, default=8)
    p.add_argument("--herd-n", type=int, default=4)
    p.add_argument("--arch", choices=["aie2", "aie2p"], default="aie2p")
    p.add_argument("--compile-mode", choices=["compile-only", "compile-and-xclbin", "compile-and-run"],
                   default="compile-and-run")
    p.add_argument("--perf-iters", type=int, default=0)


def twin_flags_bf16(p: argparse.ArgumentParser) -> None:
    _twin_flags(p)
    p.add_argument("--high-precision", choices=["true", "false"], default="true")
    p.add_argument("--method", choices=["auto", "fused-cast", "drain"], default="auto")
    p.add_argument("--drain-chunks", type=int, default=1)
    p.add_argument("--cast-tile-n", type=int, default=2048)


def twin_flags_f32(p: argparse.ArgumentParser) -> None:
    _twin_flags(p)
    p.add_argument("--codegen", choices=["external", "direct"], default="external")


def _twin_check(a, contract: str, method: str) -> tuple:  # run.py:62-65 (both scripts)
    assert a.m % (a.tile_m * a.herd_m) == 0
    assert a.k % a.tile_k_l2 == 0
    assert a.tile_k_l2 % a.tile_k_l1 == 0
    assert a.n % (a.tile_n * a.herd_n) == 0
    tile = {"tile_m": a.tile_m, "tile_k_l2": a.tile_k_l2, "tile_k_l1": a.tile_k_l1, "tile_n": a.tile_n,
            "herd_m": a.herd_m, "herd_n": a.herd_n, **({"method": method} if method else {})}
    return ("gemm", {"M": a.m, "K": a.k, "N": a.n}, contract, tile, 2.0 * a.m * a.k * a.n,
            a.compile_mode != "compile-and-run")


def twin_check_bf16(a) -> tuple:
    contract = "bf16-out-high" if str(a.high_precision).lower() in ("1", "true", "yes", "on") else "bf16-out-low"
    method = a.method if a.method != "auto" else ("fused-cast" if a.m * a.k * a.n >= 4e9 else "drain")
    return _twin_check(a, contract, method)


def twin_check_f32(a) -> tuple:
    return _twin_check(a, "f32-out", "")


TWIN = (
    TwinStandIn(
        kind="gemm",
        directory="matrix_multiplication/bf16_in_bf16_out",
        # Makefile:15-29 (vars), :60-65 (run)
        variables="TILE_M ?= 64\nTILE_K_L2 ?= 256\nTILE_K_L1 ?= 32\nTILE_N ?= 128\nHERD_M ?= 8\nHERD_N ?= 4\n"
                  "M ?= 2048\nK ?= 8192\nN ?= 2048\nHIGH_PRECISION ?= true\nMETHOD ?= auto\nAIE_TARGET ?= aie2p\n"
                  "COMPILE_MODE ?= compile-and-run\nPERF_ITERS ?= 20\n",
        flags="--m $(M) --k $(K) --n $(N) --tile-m $(TILE_M) --tile-k-l2 $(TILE_K_L2) --tile-k-l1 $(TILE_K_L1) "
              "--tile-n $(TILE_N) --herd-m $(HERD_M) --herd-n $(HERD_N) --high-precision $(HIGH_PRECISION) "
              "--method $(METHOD) --arch $(AIE_TARGET) --compile-mode $(COMPILE_MODE) --perf-iters $(PERF_ITERS)",
        extra_targets="",
        peano_only=False,
        add_flags=twin_flags_bf16,
        check=twin_check_bf16,
        compiled_line="Compile-only done.",
    ),
    TwinStandIn(
        kind="gemm_f32",
        directory="matrix_multiplication/bf16_in_fp32_out",
        # Makefile:13-27 (vars), :57-61 (run)
        variables="TILE_M ?= 64\nTILE_K_L2 ?= 256\nTILE_K_L1 ?= 32\nTILE_N ?= 128\nHERD_M ?= 8\nHERD_N ?= 4\n"
                  "M ?= 2048\nK ?= 8192\nN ?= 2048\nCODEGEN ?= external\nAIE_TARGET ?= aie2p\n"
                  "COMPILE_MODE ?= compile-and-run\nPERF_ITERS ?= 20\n",
        flags="--codegen $(CODEGEN) --m $(M) --k $(K) --n $(N) --tile-m $(TILE_M) --tile-k-l2 $(TILE_K_L2) "
              "--tile-k-l1 $(TILE_K_L1) --tile-n $(TILE_N) --herd-m $(HERD_M) --herd-n $(HERD_N) --arch $(AIE_TARGET) "
              "--compile-mode $(COMPILE_MODE) --perf-iters $(PERF_ITERS)",
        extra_targets="",
        peano_only=False,
        add_flags=twin_flags_f32,
        check=twin_check_f32,
        compiled_line="Compile-only done.",
    ),
)


# --- mlir-air's harness-table entries: a command per contract -------------------------------------------------
# matrix_multiplication/bf16_in_{bf16,fp32}_out/Makefile at e972f29 (variables M K N TILE_* HERD_*; bf16_in_bf16_out's
# HIGH_PRECISION and METHOD, bf16_in_fp32_out's CODEGEN; defaults as the twin's stand-ins above cite them)
_TILE_KEYS = ["tile_m", "tile_k_l2", "tile_k_l1", "tile_n", "herd_m", "herd_n"]
_MAKE = ("make -C {mlir_air}/programming_examples/matrix_multiplication/%s run M={M} K={K} N={N} TILE_M={tile_m} "
         "TILE_K_L2={tile_k_l2} TILE_K_L1={tile_k_l1} TILE_N={tile_n} HERD_M={herd_m} HERD_N={herd_n} %sPERF_ITERS={perf_iters}")
_TILE_DEFAULTS = {"tile_m": 64, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": 128, "herd_m": 8, "herd_n": 4}
HARNESS = {
    "gemm": {"contracts": ["bf16-out-high"], "tile_keys": [*_TILE_KEYS, "method"],
             "command": _MAKE % ("bf16_in_bf16_out", "HIGH_PRECISION=true METHOD={method} "),
             "defaults": {**_TILE_DEFAULTS, "method": "auto", "perf_iters": 20}},
    "gemm@bf16-out-low": {"tile_keys": list(_TILE_KEYS),
                          "command": _MAKE % ("bf16_in_bf16_out", "HIGH_PRECISION=false "),
                          "defaults": {**_TILE_DEFAULTS, "perf_iters": 20}},
    "gemm@f32-out": {"tile_keys": [*_TILE_KEYS, "codegen"],
                     "command": _MAKE % ("bf16_in_fp32_out", "CODEGEN={codegen} "),
                     "defaults": {**_TILE_DEFAULTS, "codegen": "external", "perf_iters": 20}},
}


# --- mlir-air's harness inputs and reference ---------------------------------------------------------------
HARNESS_SEED = 42  # bf16/run.py:59 (and bf16_in_*_out/run.py:25)


def harness_case(shape: dict, contract: str, tile: dict | None = None) -> HarnessCase:
    m, k, n = shape["M"], shape["K"], shape["N"]
    rs = np.random.RandomState(HARNESS_SEED)  # the legacy global generator that np.random.seed(42) seeds
    scale = 1.0 / math.sqrt(k)
    a = harness_bf16(rs.randn(m, k) * scale)  # float64 draws -> float32 -> bf16
    b = harness_bf16(rs.randn(k, n) * scale)
    ref = sequential_matmul_f32(a, b)
    out_dtype = "f32" if contract == "f32-out" else "bf16"
    if out_dtype == "bf16":
        ref = harness_bf16(ref)
    return HarnessCase({"a": a, "b": b}, ref, out_dtype, "matrix_multiplication/bf16/run.py:59,493-507")
