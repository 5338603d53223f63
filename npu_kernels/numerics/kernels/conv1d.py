"""Conv1D: the causal depthwise convolution of LFM2's short-convolution block (3 taps, pre-padded carried state).

Everything about the kernel, in one place (the pieces of `npu_kernels.numerics.kernels.base.KernelDef`):

  layout     x (S + 2, C) pre-padded with the 2 carried-state rows (zeros at a sequence start), w (3, C) tap-major,
             oldest tap first; y[t] = sum_j w[j] * x[t + j] (mlir-air conv1d_depthwise.cc@7d20ee7: "causality is
             expressed by pre-padding"; kernel_registry/details/Conv1D_bf16.md@ff1efdb0 "Interface and the
             pre-padding convention").
  reference  FP32, one accumulator per output, oldest tap first. Inputs x N(0, 1) with a nonzero N(0, 1) pad, taps
             N(0, 0.5^2); the tile's `pad=zero` zeroes the state rows (Conv1D_bf16.md "Gate on a NONZERO pad").
  tolerance  Conv1D_bf16.md (ff1efdb0) "Tolerances": "rtol 1.6e-2, atol 5e-2: an f32-accumulate op with one output
             rounding".
  emulated   conv1d_depthwise.cc: `aie::mul` then two `aie::mac` into an accfloat accumulator (bf16 x bf16 products
             exact in FP32, FP32 sums, oldest tap first), `to_vector<bfloat16>()` once: floor, the core's default
             rounding (the kernel sets no conv_even); docs/emulated_numerics.md "Conv1D and Element-wise Multiply".
  torch      HF Lfm2ShortConv's depthwise nn.Conv1d on bf16 (F.conv1d, groups=C, over the pre-padded rows).
  tile rules Conv1D_bf16.md (ff1efdb0) "Tunable parameters" and "Two traps", conv1d_depthwise.py@09ca164
             `build_module`'s asserts: (2*tile_s + 5)*(C/herd_x)*2 <= 65536 (L1; over it compiles and is silently
             wrong), herd_x != 2, herd_y == 1, C % herd_x == 0 with tile_c a multiple of 16, seq % (tile_s*herd_y).
  default    conv1d_depthwise.py's defaults (herd 8x1, tile_s 32: the LFM2-1.2B prefill scale), herd_x 8 / 4 / 1
             (never 2) where C needs it, tile_s halved until it divides seq and fits L1; a nonzero pad.
  harness    programming_examples/conv1d_depthwise/conv1d_depthwise.py (@09ca164) `__main__`: `default_rng(0)`, x body
             `standard_normal((seq, C), float32)` into rows 2.. of a zero (seq + 2, C) array, then (unless
             `--zero-pad`) the 2 pad rows `standard_normal((2, C), float32)`, cast to bf16; taps
             `(standard_normal((3, C), float32) * 0.5)` -> bf16; `conv1d_reference`: f32 sum of the 3 tap products,
             oldest first, -> bf16. Its transcript is XRTRunner's `[precision]` line over seq*C elements.
  table      programming_examples/conv1d_depthwise/Makefile at 73a1160 (SEQ, CHANNELS, TILE_S, HERD_X, HERD_Y; `run`
             appends $(EXTRA), `profile` adds --perf-iters but no EXTRA), so the checked run is `run` with EXTRA
             carrying --zero-pad for a `pad=zero` row (the page's prefill case; the script's default is the nonzero
             decode pad) and --perf-iters for the Latency line. Later than e972f29: n/a on a checkout before it.
  twin       conv1d_depthwise.py (read at 09ca164): --seq, --channels, --tile-s, --herd-x, --herd-y, --zero-pad,
             --perf-iters, --compile-mode, --output-format, --target; `build_module`'s checks are the tile rules
             above, raised as an AssertionError naming the rule; it prints nothing of its own before XRTRunner's
             `[precision]` line. Makefile at 73a1160 (vars; run appends $(EXTRA); profile = run's flags +
             --perf-iters $(ITERATIONS)).
  cost       the bytes each tile moves - the padded input ((seq + 2) rows), the 3 tap rows and the output, as
             supported_kernels.md@0b499c9 counts them for its bandwidth ("read (2050+3)·2048 + write 2048·2048
             elements x 2 B") - over the herd's tiles (herd_x splits the channels, herd_y the rows), and the
             tile_s-row iterations each tile runs (each a DMA round of its halo window). Fitted with every other
             constant on anchors.toml (npu_kernels.perf.fit).
  registry   details/Conv1D_bf16.md at ff1efdb0bb98 (the pad-gate table under "Gate on a NONZERO pad", two rows per
             shape; the "Placement sweep (NPU2, seq=2048, C=2048)" config sweep, one row per herd/tile_s at the
             heading's shape) and supported_kernels.md at 0b499c9ad5c7 "## Conv1D — tested shapes" (idle-NPU2 rows).
"""

from __future__ import annotations

import re

import numpy as np

from npu_kernels.numerics.bf16 import f32, rounded
from npu_kernels.numerics.harness_case import HarnessCase, harness_bf16
from npu_kernels.numerics.kernels.base import TwinStandIn
from npu_kernels.numerics.references import bf16_randn
from npu_kernels.numerics.spec import Contract, KernelSpec, NpuFigure, ShapeError
from npu_kernels.numerics.tile_common import array_columns
from npu_kernels.thresholds import RTOL

LISTED_AFTER = "eltwise_mul"  # its place in the catalog's listing (`ledger kernel list`, `make bench`)
DMAS_PER_TILE = 3  # 2 in, 1 out: only a one-row herd places (tile_notes)
NAME = "conv1d"
TAPS = 3  # Conv1D_bf16.md "k=3"; conv1d_depthwise.py K_TAPS
PADS = ("nonzero", "zero")
L1_BYTES = 65_536  # conv1d_depthwise.py L1_BYTES: per-compute-tile L1 on AIE2P
HARNESS_SEED = 0  # conv1d_depthwise.py `__main__`: default_rng(0)
TOLERANCES = {"bf16-out": (RTOL, 5e-2)}
TOLERANCE_SOURCE = ("mlir-air kernel_registry/details/Conv1D_bf16.md (ff1efdb0) \"Tolerances\": \"rtol 1.6e-2, "
                   "atol 5e-2: an f32-accumulate op with one output rounding\"")


# --- FP32 reference, inputs, executor call ----------------------------------------------------------------


def conv1d_f32(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The causal depthwise convolution in FP32: tap j times rows j..j+S-1 of the pre-padded x, summed oldest
    tap first (one FP32 accumulator per output, as conv1d_depthwise.cc's mul + 2 mac)."""
    k = w.shape[0]
    s = x.shape[0] - (k - 1)
    if s < 0 or x.shape[1:] != w.shape[1:]:
        raise ValueError(f"conv1d: x {x.shape} must be (S + {k - 1}, C) for w {w.shape}")
    acc = x[0:s] * w[0]
    for j in range(1, k):
        acc += x[j : j + s] * w[j]
    return acc


def make_inputs(s, rng):
    """x N(0, 1) with a nonzero N(0, 1) pad, taps N(0, 0.5^2) (the harness's scale for trained LFM2 taps)."""
    return {"x": bf16_randn(rng, (s["seq"] + TAPS - 1, s["C"])), "w": bf16_randn(rng, (TAPS, s["C"]), 0.5)}


def padded(i: dict, tile: dict | None) -> dict:
    """The inputs with the pad the tile names: `pad=zero` zeroes the state rows (the prefill case)."""
    pad = (tile or {}).get("pad", "nonzero")
    if pad not in PADS:
        raise ShapeError(f"conv1d: pad={pad!r}; expected one of {', '.join(PADS)}")
    if pad == "nonzero":
        return i
    x = i["x"].copy()
    x[: TAPS - 1] = 0.0
    return {**i, "x": x}


def reference(i, s):
    w = i["w"]
    return sum(i["x"][j : j + s["seq"]] * w[j] for j in range(TAPS))


def call(ex, i, s, contract, tile):
    return ex.conv1d(i["x"], i["w"])


SPEC = KernelSpec(
    name=NAME,
    shape_keys=("seq", "C"),
    contracts={"bf16-out": Contract("bf16-out", *TOLERANCES["bf16-out"], "bf16",
                                    "causal depthwise, 3 bf16 taps, FP32 accumulate, one rounding")},
    default_contract="bf16-out",
    make_inputs_fn=make_inputs,
    reference_fn=reference,
    call_fn=call,
    flops_fn=lambda s: 2.0 * TAPS * s["seq"] * s["C"],
    bytes_fn=lambda s: 2.0 * s["C"] * (2 * s["seq"] + 2 * TAPS - 1),
    output_elements_fn=lambda s: s["seq"] * s["C"],
    # Conv1D_bf16.md (ff1efdb0) "Per-shape data" and pad-gate tables
    npu2={"bf16-out": NpuFigure(2.816e-3, 2.775e-3, 2.836e-3,
                                "2048x2048 zero pad, herd 8x1 (nonzero 2.813e-3; 8x2048: 2.775e-3 / 2.836e-3)")},
    registry_shape={"seq": 2048, "C": 2048},
    small_shape={"seq": 64, "C": 256},
    target_tiles={"npu2": 8, "npu1": 4},
    extra={"tile_inputs": padded},
)


# --- executors ----------------------------------------------------------------------------------------------


def fp32(ex, x, w):
    return conv1d_f32(np.asarray(x, np.float32), np.asarray(w, np.float32))


def emulated(ex, x, w):
    """FP32 products and sums (accfloat), one bf16 rounding on `to_vector<bfloat16>()`: floor."""
    with ex.timer.time(NAME):
        return rounded(conv1d_f32(f32(x), f32(w)), "floor")


def torch(ex, x, w):
    import torch as _torch
    import torch.nn.functional as F

    with ex.timer.time(NAME), _torch.inference_mode():
        xt = ex._t(x).transpose(0, 1)[None]  # (1, C, S + k - 1)
        wt = ex._t(w).transpose(0, 1)[:, None, :]  # (C, 1, k): HF's channel-major layout
        return ex._np(F.conv1d(xt, wt, groups=wt.shape[0])[0].transpose(0, 1))


# --- tile rules and default -------------------------------------------------------------------------------


def l1_bytes(s: dict, t: dict) -> int:
    """Conv1D_bf16.md (ff1efdb0) "L1 budget (hard)": (tile_s + 2) halo rows + 3 tap rows + tile_s output rows
    of tile_c bf16 channels, i.e. (2*tile_s + 5)*tile_c*2 bytes."""
    return (2 * t["tile_s"] + 5) * (s["C"] // t["herd_x"]) * 2


def tile_rules(target: str) -> list:
    """The L1 budget comes first: 4x1 at tile_s 32 (70.6 KB) compiles and returns silently wrong results; herd_x 2
    is measured broken (silently wrong at tile_s 8); herd_y > 1 deadlocks on the second invocation."""
    cols = array_columns(target)
    return [
        ("conv1d.l1_budget", lambda s, t: l1_bytes(s, t) <= L1_BYTES,
         lambda s, t: f"tile_s={t['tile_s']}, tile_c={s['C'] // t['herd_x']}: {l1_bytes(s, t)} bytes > "
         f"{L1_BYTES} of L1 (over-allocation compiles and returns silently wrong results)"),
        ("conv1d.herd_x_not_2", lambda s, t: t["herd_x"] != 2,
         lambda s, t: "herd_x=2 is measured broken on NPU2 (aircc failure at tile_s 4, silently wrong at tile_s 8)"),
        ("conv1d.herd_y_eq_1", lambda s, t: t["herd_y"] == 1,
         lambda s, t: f"herd_y={t['herd_y']}: the second invocation deadlocks (ERT_CMD_STATE_TIMEOUT); only 1 is usable"),
        ("conv1d.C_divisible_by_herd_x", lambda s, t: s["C"] % t["herd_x"] == 0 and (s["C"] // t["herd_x"]) % 16 == 0,
         lambda s, t: f"C={s['C']} must split over herd_x={t['herd_x']} into tile_c multiples of the 16-lane vector"),
        ("conv1d.seq_divisible_by_tile_s", lambda s, t: s["seq"] % (t["tile_s"] * t["herd_y"]) == 0,
         lambda s, t: f"seq={s['seq']} is not a multiple of tile_s*herd_y={t['tile_s']}*{t['herd_y']}"),
        ("conv1d.herd_fits_array", lambda s, t: 1 <= t["herd_x"] <= cols and t["herd_y"] >= 1,
         lambda s, t: f"herd {t['herd_x']}x{t['herd_y']} does not fit the {cols}-column array"),
        ("conv1d.pad_zero_or_nonzero", lambda s, t: t["pad"] in PADS,
         lambda s, t: f"pad={t['pad']!r} must be zero (prefill) or nonzero (the carried state)"),
    ]


def tile_default(s: dict, target: str) -> dict:
    cols = array_columns(target)
    hx = next((h for h in (cols, 4, 1) if h <= cols and s["C"] % h == 0 and (s["C"] // h) % 16 == 0), 1)
    tile_c = s["C"] // hx
    ts = next((t for t in (32, 16, 8, 4, 2, 1) if s["seq"] % t == 0 and (2 * t + 5) * tile_c * 2 <= L1_BYTES), 1)
    return {"tile_s": ts, "herd_x": hx, "herd_y": 1, "pad": "nonzero"}


# --- mlir-air's harness: inputs, table entry, the twin's stand-in ------------------------------------------


def harness_case(shape: dict, contract: str, tile: dict | None = None):
    pad = (tile or {}).get("pad", "nonzero")
    seq, ch = shape["seq"], shape["C"]
    rng = np.random.default_rng(HARNESS_SEED)
    x = np.zeros((seq + 2, ch), np.float32)
    x[2:] = rng.standard_normal((seq, ch), dtype=np.float32)
    if pad != "zero":
        x[:2] = rng.standard_normal((2, ch), dtype=np.float32)
    x = harness_bf16(x)
    w = harness_bf16(rng.standard_normal((3, ch), dtype=np.float32) * np.float32(0.5))
    ref = x[0:seq] * w[0]
    for j in (1, 2):
        ref += x[j : j + seq] * w[j]
    return HarnessCase({"x": x, "w": w}, harness_bf16(ref), "bf16", f"conv1d_depthwise/conv1d_depthwise.py@09ca164 __main__ ({pad} pad)")


HARNESS = {
    "since": "73a1160be7d374edd8057a42c4b031e8ad88b720",
    "tile_keys": ["tile_s", "herd_x", "herd_y", "pad"],
    "command": "make -C {mlir_air}/programming_examples/conv1d_depthwise run SEQ={seq} CHANNELS={C} TILE_S={tile_s} "
               "HERD_X={herd_x} HERD_Y={herd_y} EXTRA={switches}",
    "defaults": {"tile_s": 32, "herd_x": 8, "herd_y": 1, "pad": "nonzero", "perf_iters": 20},
    "switches": {"pad=zero": "--zero-pad"},
    "flags": {"perf_iters": "--perf-iters {}"},
}

SCRIPT_DEFAULTS = {"seq": 2048, "channels": 2048, "tile_s": 32, "herd_x": 8, "herd_y": 1}  # conv1d_depthwise.py


def twin_flags(p) -> None:
    for name, default in SCRIPT_DEFAULTS.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    p.add_argument("--zero-pad", action="store_true")
    p.add_argument("--perf-iters", type=int, default=0)
    p.add_argument("--compile-mode", choices=["compile-only", "compile-and-run"], default="compile-and-run")
    p.add_argument("--output-format", choices=["xclbin", "elf"], default="xclbin")
    p.add_argument("--target", default="auto")


def twin_check(a) -> tuple:
    """The script's flags as (kernel, shape, contract, tile, perf_flops, compile_only); its `build_module` asserts
    are the tile rules, which the twin asserts for it (`TwinStandIn.asserts_tile_rules`)."""
    shape = {"seq": a.seq, "C": a.channels}
    tile = {"tile_s": a.tile_s, "herd_x": a.herd_x, "herd_y": a.herd_y, "pad": "zero" if a.zero_pad else "nonzero"}
    return NAME, shape, None, tile, None, a.compile_mode != "compile-and-run"


TWIN = TwinStandIn(
    directory="conv1d_depthwise",
    variables="OUTPUT_FORMAT ?= xclbin\nSEQ ?= 2048\nCHANNELS ?= 2048\nTILE_S ?= 32\nHERD_X ?= 8\nHERD_Y ?= 1\n"
              "ITERATIONS ?= 30\nEXTRA ?=\n",
    flags="--output-format $(OUTPUT_FORMAT) --seq $(SEQ) --channels $(CHANNELS) --tile-s $(TILE_S) --herd-x $(HERD_X) "
          "--herd-y $(HERD_Y) $(EXTRA)",
    extra_targets="profile:\n\tmkdir -p $(BUILD_DIR) && cd $(BUILD_DIR) && $(TWIN) conv1d --output-format $(OUTPUT_FORMAT) "
                  "--seq $(SEQ) --channels $(CHANNELS) --tile-s $(TILE_S) --herd-x $(HERD_X) --herd-y $(HERD_Y) "
                  "--perf-iters $(ITERATIONS)\n",
    peano_only=True,
    add_flags=twin_flags,
    check=twin_check,
    compiled_line="",
    asserts_tile_rules=True,
)


# --- NPU2 cost model --------------------------------------------------------------------------------------


def cost_features(s, t) -> dict[str, float]:
    tiles = t["herd_x"] * t["herd_y"]
    nbytes = ((s["seq"] + 2) * s["C"] + 3 * s["C"] + s["seq"] * s["C"]) * 2.0 / tiles
    return {"launch_s": 1.0, "conv1d_s_per_byte_per_tile": nbytes,
            "conv1d_s_per_iteration": float(-(-s["seq"] // (t["tile_s"] * t["herd_y"])))}


CONSTANTS = {"conv1d_s_per_byte_per_tile": 2.576e-10, "conv1d_s_per_iteration": 0.0}
EVIDENCE = {
    "conv1d_s_per_byte_per_tile": "Conv1D per tile: 1/3.88 GB/s for the padded input, the 3 tap rows and the output "
                                  "each tile moves; the herd_x 8/4/1 rows at 2048x2048 (594.6 / 1355 / 4367 us, "
                                  "supported_kernels.md@0b499c9, Conv1D — tested shapes).",
    "conv1d_s_per_iteration": "per tile_s-row iteration (halo window DMA round): fitted 0 - tile_s 4/8/16/32 at herd "
                              "8x1 read 599.5 / 594.6 / 599.4 / 621.4 us, flat to 4 % and not falling with fewer "
                              "iterations (the same table).",
}


# --- mlir-air's registry pages (the importer) -------------------------------------------------------------

REGISTRY_PAGE = {
    "page": "Conv1D_bf16", "commit": "ff1efdb0bb98fe1ad8e641bef95ac6abdabd99d4", "rtol": 1.6e-2, "atol": 5e-2,
    "index_commit": "0b499c9ad5c76ff076280a182df302e6928d2698",
    "tables": (("pad", ("pad", "seq×C", "mean_rel_L1", "verdict")),
               ("placement", ("hx×hy", "tile_s", "L1", "verdict", "latency")),
               ("index", ("(seq×channels)", "k", "config (hx/hy/tile_s)", "latency", "bandwidth", "mean_rel_L1",
                          "Used by", "Status"))),
}


HERD = re.compile(r"(\d+)\s*[×x]\s*(\d+)")


def registry_rows(name: str, header: tuple, cells: list[str], heading: str, cell) -> list[dict] | None:
    """The configurations one Conv1D row holds (a placement row may list two herds, `8×4, 2×4`); placement-sweep
    rows take their shape from the section heading (`... seq=2048, C=2048)`). `cell` is the importer's cell
    readers (registry.importer_tables.CELL: ints, status_of, first_number, latency_us)."""
    ints, status_of, _first_number, _latency_us = cell.ints, cell.status_of, cell.first_number, cell.latency_us
    c = dict(zip(header, cells))
    if name == "pad":
        seq, ch = ints(c["seq×C"])[:2]
        pad = "nonzero" if "nonzero" in c["pad"] else "zero" if "zero" in c["pad"] else None
        if pad is None:
            return None
        verdict = status_of(c["verdict"])[0]
        return [{"shape": {"seq": seq, "C": ch}, "tile": {"pad": pad}, "verdict": verdict,
                 "status": c["verdict"], "mean_rel_L1": _first_number(c["mean_rel_L1"]), "latency_us": None}]
    if name == "placement":
        m = re.search(r"seq\s*=\s*(\d+)\s*,\s*C\s*=\s*(\d+)", heading)
        herds = HERD.findall(c["hx×hy"])
        if m is None or not herds:
            return None
        text = c["verdict"].replace("*", "").strip()
        return [{"shape": {"seq": int(m[1]), "C": int(m[2])},
                 "tile": {"herd_x": int(hx), "herd_y": int(hy), "tile_s": ints(c["tile_s"])[0]},
                 "verdict": "PASS" if text == "PASS" else "FAIL", "status": c["verdict"], "mean_rel_L1": None,
                 "latency_us": _latency_us(c["latency"]) if "⏳" not in c["latency"] else None}
                for hx, hy in herds]
    if name == "index":  # supported_kernels.md@0b499c9: `seq×channels`, k, hx/hy/tile_s
        seq, ch = ints(c["(seq×channels)"])[:2]
        cfg = ints(c["config (hx/hy/tile_s)"])
        if ints(c["k"]) != [3] or len(cfg) != 3:
            return None
        verdict, _ = status_of(c["Status"])
        return [{"shape": {"seq": seq, "C": ch}, "tile": {"herd_x": cfg[0], "herd_y": cfg[1], "tile_s": cfg[2]},
                 "verdict": verdict, "status": c["Status"], "mean_rel_L1": _first_number(c["mean_rel_L1"]),
                 "latency_us": _latency_us(c["latency"]) if "⏳" not in c["latency"] else None}]
    return None
