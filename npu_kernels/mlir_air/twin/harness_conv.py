"""The stand-in harnesses of LFM2's two short-convolution kernels (kinds conv1d and eltwise_mul of
`npu_kernels.mlir_air.twin.harness`): the command-line flags of mlir-air's scripts, their assertions as one-line
failures in our own words, and what the script prints before XRTRunner's lines.

  conv1d       programming_examples/conv1d_depthwise/conv1d_depthwise.py (read at 09ca164): --seq, --channels,
               --tile-s, --herd-x, --herd-y, --zero-pad (default: a nonzero random pad, the decode case),
               --perf-iters, --compile-mode, --output-format, --target, -v, -p; `build_module`'s checks (C % herd_x,
               herd_x != 2, herd_y == 1, tile_c a multiple of 16, seq % (tile_s * herd_y), the 64 KiB L1 budget)
               are the tile rules of npu_kernels.numerics.tile_rules, raised here as an AssertionError naming the rule;
               it prints nothing of its own before XRTRunner's `[precision]` line.
  eltwise_mul  programming_examples/eltwise_mul/eltwise_mul.py (read at 0b499c9): --shape (1-D N or 2-D M N),
               --tile, --vector-size, --dtype, --herd-shape, --target, --output-format, --perf-iters, --print-ir,
               --compile-only, -v; "shape extent ... is not a multiple of tile" as a ValueError; prints
               `Eltwise mul shape=(...) dtype=bf16 on <target>` before running.
The numbers are the emulated executor's on the harness's own inputs (npu_kernels.numerics.harness_inputs).
"""

from __future__ import annotations

import argparse

import numpy as np

from npu_kernels.numerics.tile_rules import check_tile

KINDS = ("conv1d", "eltwise_mul")
CONV1D_DEFAULTS = {"seq": 2048, "channels": 2048, "tile_s": 32, "herd_x": 8, "herd_y": 1}  # the script's defaults
ELTWISE_MUL_CAP = 1024  # eltwise_mul.py `default_tile(..., cap=1024)`


def add_flags(kind: str, p: argparse.ArgumentParser) -> None:
    if kind == "conv1d":
        for name, default in CONV1D_DEFAULTS.items():
            p.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
        p.add_argument("--zero-pad", action="store_true")
        p.add_argument("--perf-iters", type=int, default=0)
        p.add_argument("--compile-mode", choices=["compile-only", "compile-and-run"], default="compile-and-run")
        p.add_argument("--output-format", choices=["xclbin", "elf"], default="xclbin")
        p.add_argument("--target", default="auto")
        return
    p.add_argument("--shape", type=int, nargs="+", default=[1024, 1024])
    p.add_argument("--tile", type=int, default=None)
    p.add_argument("--vector-size", dest="vector", type=int, default=None)
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    p.add_argument("--herd-shape", type=int, nargs="+", default=None)
    p.add_argument("--target", choices=["auto", "npu1", "npu2"], default="auto")
    p.add_argument("--output-format", choices=["xclbin", "elf"], default="xclbin")
    p.add_argument("--perf-iters", type=int, default=0)
    p.add_argument("--print-ir", action="store_true")
    p.add_argument("--compile-only", action="store_true")


def check(kind: str, a) -> tuple[str, dict, None, dict, float | None, bool]:
    """(catalog kernel, shape, contract, tile, perf_flops, compile_only), after the script's own checks."""
    if kind == "conv1d":
        shape = {"seq": a.seq, "C": a.channels}
        tile = {"tile_s": a.tile_s, "herd_x": a.herd_x, "herd_y": a.herd_y, "pad": "zero" if a.zero_pad else "nonzero"}
        broken = check_tile("conv1d", shape, tile, "npu2")
        assert not broken, f"{broken[0][0]}: {broken[0][1]}"
        return "conv1d", shape, None, tile, None, a.compile_mode != "compile-and-run"
    n = int(np.prod(a.shape))
    if len(a.shape) not in (1, 2):
        raise ValueError(f"shape must be 1-D or 2-D, got {len(a.shape)}-D: {a.shape}")
    tile = a.tile or _default_tile(len(a.shape))
    for extent in a.shape:
        if extent % tile:
            raise ValueError(f"shape extent {extent} is not a multiple of tile {tile}")
    print(f"Eltwise mul shape={tuple(a.shape)} dtype={a.dtype} on {'npu2' if a.target == 'auto' else a.target}")
    return "eltwise_mul", {"N": n}, None, {}, None, a.compile_only


def _default_tile(rank: int) -> int:
    """The largest power of two (at most 1024) whose three ping-ponged bf16 buffers fit the 64 KiB L1."""
    budget, tile = 65536 // (3 * 2 * 2), 1
    while (2 * tile) ** rank <= budget and 2 * tile <= ELTWISE_MUL_CAP:
        tile *= 2
    return tile
