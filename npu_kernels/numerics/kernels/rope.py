"""RoPE (half-split): the rotary position embedding of Q and K rows with a cos/sin lookup table (HF rotate_half).

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`); mlir-air
files at e972f29:

  shape      rows x head_dim (one row per head and position), optional rotary_dim (a partial rotary: the tail
             columns pass through).
  reference  FP32 x1*cos - x2*sin, x1*sin + x2*cos on bf16 x ~ N(0, 1) and the bf16 LUT (npu_kernels.numerics.references
             .rope_lut, theta 500000, position = row index).
  tolerance  programming_examples/rope_halfsplit/rope_halfsplit.py:294-312: `rtol=1.6e-2, atol=5e-2`.
  emulated   FP32 products (exact), one FP32 add/sub, one bf16 rounding (aie::sub/add of two accumulators:
             npu_kernels.numerics.executors.emulated_elementwise.rope_rows); broadcast tables need no row split.
  torch      HF apply_rotary_pos_emb: x*cos + rotate_half(x)*sin with bf16 full-width tables, each op in bf16.
  tile rules rows % (herd_x*herd_y) == 0, herd_x*herd_y <= 8 (3 shim DMAs per tile: input, LUT, output), head_dim
             % 32 == 0 (each half fills 16-lane vectors); the default herd is the largest divisor of rows up to the
             array's columns, one row.
  harness    rope_halfsplit.py:282-285 `default_rng(0)`, `standard_normal((rows, head_dim), float32)` -> bf16;
             :191-211 the LUT (theta 500000, :216, passed at :286; float64 cos/sin -> float32 -> bf16); :167-188 the
             f32 rotate-half reference -> bf16.
  table      programming_examples/rope_halfsplit/Makefile:16-24 (ROWS, HEAD_DIM, HERD_X, HERD_Y, ITERATIONS), :50-56
             (`make profile` runs the same harness with --perf-iters $(ITERATIONS) and still checks correctness: one
             run gives the [precision] line, the verdict and the latency).
  twin       rope_halfsplit.py:224-264 (flags), :60-66 (asserts); Makefile:16-24, :42-47 (run), :50-56 (profile); its
             BUILD_DIR is build_peano whatever the toolchain.
  cost       bytes per tile (in + LUT + out) and one DMA per row: RoPE_bf16.md:175-187, 233-235.
  registry   kernel_registry/supported_kernels.md (its "RoPE" table) and details/RoPE_bf16.md: the columns
             registry.mlir_air_tables renders and registry.importer_tables reads (no details JSON).
"""

from __future__ import annotations

import math

import numpy as np

from npu_kernels.numerics.bf16 import f32
from npu_kernels.numerics.harness_case import ELEMENTWISE_SEED, HarnessCase, harness_bf16
from npu_kernels.numerics.kernels.base import CatalogPage, TwinStandIn
from npu_kernels.numerics.references import bf16_randn, rope_lut
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure, ShapeError
from npu_kernels.numerics.tile_common import array_columns, largest_divisor, rows_note
from npu_kernels.thresholds import RTOL

NAME = "rope"
LISTED_AFTER = "layernorm"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
TOLERANCES = {"bf16-out": (RTOL, 5e-2)}
TOLERANCE_SOURCE = ("mlir-air programming_examples/rope_halfsplit/rope_halfsplit.py:294-312@e972f29 `rtol=1.6e-2, "
                    "atol=5e-2`")
HARNESS_THETA = 500000.0  # rope_halfsplit.py:216


def check_shape(s):
    if s["head_dim"] % 2:
        raise ShapeError(f"rope: head_dim={s['head_dim']} must be even (half-split)")
    rd = s.get("rotary_dim", s["head_dim"])
    if rd % 2 or rd > s["head_dim"]:
        raise ShapeError(f"rope: rotary_dim={rd} must be even and at most head_dim={s['head_dim']}")


def _rotary(s) -> int:
    """The leading columns a row rotates: rotary_dim of a partial rotary (the tail passes through), else all."""
    return s.get("rotary_dim", s["head_dim"])


def make_inputs(s, rng):
    cos, sin = rope_lut(s["rows"], _rotary(s))
    return {"x": bf16_randn(rng, (s["rows"], s["head_dim"])), "cos": cos, "sin": sin}


def reference(i, s):
    rd = _rotary(s)
    x, tail = i["x"][:, :rd], i["x"][:, rd:]
    half = rd // 2
    x1, x2 = x[:, :half], x[:, half:]
    c, sn = i["cos"], i["sin"]
    return np.concatenate([x1 * c - x2 * sn, x1 * sn + x2 * c, tail], axis=-1)


def call(ex, i, s, contract, tile):
    rd = _rotary(s)
    if rd == s["head_dim"]:
        return ex.rope(i["x"], i["cos"], i["sin"])
    return np.concatenate([ex.rope(np.ascontiguousarray(i["x"][:, :rd]), i["cos"], i["sin"]), i["x"][:, rd:]], axis=-1)


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("rows", "head_dim"),
    optional_keys=("rotary_dim",),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16", "bf16 half-split rotation, cos/sin LUT")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 3.0 * s["rows"] * s["head_dim"],
    bytes_fn=lambda s: 2.0 * 3 * s["rows"] * s["head_dim"],
    output_elements_fn=lambda s: s["rows"] * s["head_dim"],
    npu2={"bf16-out": NpuFigure(2.8e-3, 2.4e-3, 2.8e-3, "65536x64 (decode 8x64: 2.4e-3)")},  # RoPE_bf16.md
    registry_shape={"rows": 65536, "head_dim": 64},
    small_shape={"rows": 256, "head_dim": 64},
    target_tiles={"npu2": 8, "npu1": 4},
    extra={"check_shape": check_shape},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, x, cos, sin):
    x = np.asarray(x, np.float32)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def emulated(ex, x, cos, sin):
    """FP32 products, one add/sub, one bf16 rounding, row by row (broadcast tables: no row split)."""
    # the executors' datapath library (imported here, at call time: it sits above the registry)
    from npu_kernels.numerics.executors.emulated_elementwise import rope_rows

    with ex.timer.time(NAME):
        cos, sin = f32(cos), f32(sin)
        if np.shape(cos)[0] != np.shape(x)[0] or np.ndim(x) != np.ndim(cos):
            return rope_rows(f32(x), cos, sin)  # broadcast tables: no row split
        return ex._rows(rope_rows, [x, cos, sin])


def torch(ex, x, cos, sin):
    import torch as _torch

    with ex.timer.time(NAME), _torch.inference_mode():
        xt = ex._t(x)
        c, s = ex._t(cos), ex._t(sin)
        c, s = _torch.cat([c, c], dim=-1), _torch.cat([s, s], dim=-1)  # HF's full-width tables
        half = xt.shape[-1] // 2
        rotated = _torch.cat([-xt[..., half:], xt[..., :half]], dim=-1)  # rotate_half
        return ex._np(xt * c + rotated * s)


# --- tile rules, default and notes -------------------------------------------------------------------------


def tile_rules(target: str) -> list:
    cols = array_columns(target)
    return [
        ("rope.rows_divisible_by_herd", lambda s, t: s["rows"] % (t["herd_x"] * t["herd_y"]) == 0,
         lambda s, t: f"rows={s['rows']} do not split over herd {t['herd_x']}x{t['herd_y']}"),
        ("rope.three_dma_tiles_le_columns", lambda s, t: t["herd_x"] * t["herd_y"] <= cols,
         lambda s, t: f"herd {t['herd_x']}x{t['herd_y']}: 3 shim DMAs per tile (input, LUT, output) allow at "
         f"most {cols} tiles"),
        ("rope.head_dim_multiple_of_32", lambda s, t: s["head_dim"] % 32 == 0,
         lambda s, t: f"head_dim={s['head_dim']}: each half must fill 16-lane vectors"),
    ]


def tile_default(s: dict, target: str) -> dict:
    return {"herd_x": largest_divisor(s["rows"], array_columns(target)), "herd_y": 1}


def tile_note(s: dict, t: dict, herd: list[int], target: str, tiles_target: int) -> str | None:
    """Why the default herd is short of the target tiles (None: no reason of RoPE's own)."""
    cols = array_columns(target)
    if herd[0] * herd[1] == cols:
        return f"3 DMAs per tile (input, LUT, output): at most {cols} tiles place"
    return rows_note("rows", s["rows"], herd[0] * herd[1], tiles_target)


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    rows, hd = shape["rows"], shape["head_dim"]
    half = hd // 2
    x = harness_bf16(np.random.default_rng(ELEMENTWISE_SEED).standard_normal((rows, hd), dtype=np.float32))
    freqs = 1.0 / (HARNESS_THETA ** (2.0 * np.arange(half, dtype=np.float64) / hd))
    angles = np.outer(np.arange(rows, dtype=np.float64), freqs)
    cos = harness_bf16(np.cos(angles).astype(np.float32))  # float64 -> float32 -> bf16, as the LUT is built
    sin = harness_bf16(np.sin(angles).astype(np.float32))
    x1, x2 = x[:, :half], x[:, half:]
    ref = np.empty_like(x)
    ref[:, :half] = x1 * cos - x2 * sin
    ref[:, half:] = x1 * sin + x2 * cos
    return HarnessCase({"x": x, "cos": cos, "sin": sin}, harness_bf16(ref), "bf16",
                       "rope_halfsplit/rope_halfsplit.py:167-211,216,282-286")


HARNESS = {  # Makefile:16-24, :50-56: `make profile` = the checked run with --perf-iters $(ITERATIONS)
    "tile_keys": ["herd_x", "herd_y"],
    "command": "make -C {mlir_air}/programming_examples/rope_halfsplit profile ROWS={rows} HEAD_DIM={head_dim} "
               "HERD_X={herd_x} HERD_Y={herd_y} ITERATIONS={perf_iters}",
    "defaults": {"herd_x": 8, "herd_y": 1, "perf_iters": 20},
    "aliases": {"head_dim": ["D", "dk"]},
}


def twin_flags(p) -> None:  # rope_halfsplit.py:224-264
    p.add_argument("--rows", type=int, default=65536)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--herd-x", type=int, default=8)
    p.add_argument("--herd-y", type=int, default=1)
    p.add_argument("--perf-iters", type=int, default=0)
    p.add_argument("--compile-mode", choices=["compile-only", "compile-and-run"], default="compile-and-run")
    p.add_argument("--output-format", choices=["xclbin", "elf"], default="xclbin")


def twin_check(a) -> tuple:  # rope_halfsplit.py:60-66
    assert a.head_dim % 16 == 0
    assert a.rows % (a.herd_x * a.herd_y) == 0
    return (NAME, {"rows": a.rows, "head_dim": a.head_dim}, None, {"herd_x": a.herd_x, "herd_y": a.herd_y},
            None, a.compile_mode != "compile-and-run")


TWIN = TwinStandIn(
    directory="rope_halfsplit",
    # Makefile:16-24 (vars), :42-47 (run), :50-56 (profile = run + --perf-iters)
    variables="OUTPUT_FORMAT ?= xclbin\nROWS ?= 65536\nHEAD_DIM ?= 64\nHERD_X ?= 8\nHERD_Y ?= 1\nITERATIONS ?= 30\n",
    flags="--output-format $(OUTPUT_FORMAT) --rows $(ROWS) --head-dim $(HEAD_DIM) --herd-x $(HERD_X) --herd-y $(HERD_Y)",
    extra_targets="profile:\n\tmkdir -p $(BUILD_DIR) && cd $(BUILD_DIR) && $(TWIN) rope --output-format $(OUTPUT_FORMAT) "
                  "--rows $(ROWS) --head-dim $(HEAD_DIM) --herd-x $(HERD_X) --herd-y $(HERD_Y) --perf-iters $(ITERATIONS)\n",
    peano_only=True,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="",
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    """In + LUT + out bytes over the herd's tiles; one DMA per head_dim row."""
    tiles = t.get("herd_x", 1) * t.get("herd_y", 1)
    rows, D = s["rows"], s["head_dim"]
    return {"launch_s": 1.0, "rope_s_per_byte_per_tile": rows * D * 6.0 / tiles,
            "rope_s_per_unit": float(int(math.ceil(rows / tiles)))}


CONSTANTS = {"rope_s_per_byte_per_tile": 9.305e-11, "rope_s_per_unit": 2.731e-08}
EVIDENCE = {
    "rope_s_per_byte_per_tile": "RoPE per tile: 1/10.7 GB/s (in + LUT + out); RoPE_bf16.md:175-187, 233-235.",
    "rope_s_per_unit": "per row DMA (one head_dim row per DMA): 27 ns; head_dim 64 vs 128 rows at equal bytes.",
}


# --- mlir-air's registry page (e972f29): the projection's catalog entry, its columns, the importer -----------


def _figures(row, fmt) -> list[str]:
    b = fmt.best_of(row)
    return [fmt.tile3(b.tile if b else {}, ("herd_x", "herd_y")), fmt.mark(b, fmt.latency_text(b.latency_us if b else None)),
            fmt.mark(b, f"{fmt.bw(b):.2f} GB/s") if fmt.bw(b) is not None else "—", fmt.sci2(b.mean_rel_L1 if b else None)]


def index_cells(row, fmt) -> list[str]:
    s = dict(row.shape)
    return [f"{s['rows']}×{s['head_dim']}"] + _figures(row, fmt) + [fmt.used(row), fmt.status_cell(row)]


def details_cells(method, row, fmt) -> list[str]:
    s, b = dict(row.shape), fmt.best_of(row)
    return ([str(s["rows"]), str(s["head_dim"])] + _figures(row, fmt)
            + [fmt.sci2(b.max_abs if b else None), fmt.used(row), fmt.status_cell(row)])


REGISTRY_PAGE = CatalogPage(
    title="RoPE (BF16, half-split)", page="RoPE_bf16", columns=("rows", "head_dim"),
    aliases={"d": "head_dim", "dim": "head_dim", "m": "rows", "r": "rows"}, spellings=("rope", "ropehalfsplit"),
    math="half-split rotation (HF rotate_half) with a cos/sin LUT", datapath="bf16 multiplies, one add/sub, no accumulation",
    npu2_mean_rel_L1="2.8e-3", target_tiles=8,
    index=("(rows×head_dim)", "herd (hx/hy)", "latency", "bandwidth", "mean_rel_L1", "Used by", "Status"),
    details=(("", ("rows", "head_dim", "best config (hx/hy)", "latency", "bandwidth", "mean_rel_L1", "abs_err max",
                   "Used by", "Status")),),  # details/RoPE_bf16.md
    index_cells=index_cells, details_cells=details_cells,
    elements=lambda s: 3 * s["rows"] * s["head_dim"],  # x in, out, cos/sin LUT (rows x D/2 each)
    tolerance_label="bf16",
    listed_after="silu_mul",  # supported_kernels.md lists RoPE between SiLU-and-Mul and GELU
)


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The shape (`rows` and `head_dim` columns, or one `rows×head_dim` cell) and herd of one upstream row."""
    c = dict(zip(header, cells))
    if header[0] == "rows":
        rows, hd = cell.ints(c["rows"])[0], cell.ints(c["head_dim"])[0]
    else:
        rows, hd = cell.ints(c[header[0]])[:2]
    f = {"shape": {"rows": rows, "head_dim": hd}, "tile": {}}
    hx = cell.ints(next((c[h] for h in header if "config" in h or h.startswith("herd")), ""))
    if len(hx) >= 2:
        f["tile"] = {"herd_x": hx[0], "herd_y": hx[1]}
    return [f]
