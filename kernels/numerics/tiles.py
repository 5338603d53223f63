"""The tile planner: a legal tile and herd for a (kernel, shape, target), checked before anything runs.

`plan_tile(kernel, shape, target, tile=None, force=False) -> TilePlan` picks the recommended tile of
NUMERICS.md (or completes a user-supplied partial tile with it), then checks every hard rule. A broken
rule raises `TileRuleViolation` whose message starts with the rule's name, e.g.
`gemm.N_divisible_by_tile_n_herd_n: ...`; `force=True` (fault injection only) returns the plan with the
violations as warnings instead - the emulated executor then models what the hardware does with it. A
shape that admits no legal tile at all (a tiny test model, a ragged size) is not an error: the plan comes
back with `legal=False` and warnings naming the rules and saying the hardware needs the shape padded.

The plan records tiles in flight against the target (NPU2 8x4 = 32; NPU1 4x4 = 16) and, when below, a
sentence saying why (a 3-DMA elementwise kernel cannot place a second herd row, decode RMSNorm at M=1 has
no row parallelism, an odd head count halves flash attention's columns, ...).

Rules (NUMERICS "Hard constraints", plus the compile-time limits mlir-air's registry documents):
  gemm   N % (tile_n*herd_n) == 0 (silent corruption, checked first), M % (tile_m*herd_m) == 0,
         K % tile_k_l2 == 0, tile_k_l2 % tile_k_l1 == 0, tile_k_l2*N <= 1,048,576 (B-tile DMA stride),
         drain tile_m <= 32 (L1), tile_m and tile_n multiples of 16 and tile_k_l1 of 8 (mm.cc mmul),
         herd within the array.
  gemv   M % (tile_m*herd_m) == 0, tile_m even, K % 64 == 0, herd_m*tile_m*K*2 + herd_m*tile_m*2 <=
         524288 (L2), M/(tile_m*herd_m) - 1 <= 255 (BD repeat count; the verified 16384x2048 LM-head
         partition runs 256 iterations), tile_m % m_input == 0, (m_input + 1)*K*2 <= 65536 (L1).
  rmsnorm/layernorm  M % herd_x == 0, N % 16 == 0, herd_x <= columns.
  rope   rows % (herd_x*herd_y) == 0, herd_x*herd_y <= 8 (3 shim DMAs per tile), head_dim % 32 == 0.
  eltwise_add/silu_mul  herd_y == 1 (3 DMAs per tile), N % (tile*herd_x) == 0, tile <= 4096 (L1).
  gelu   herd_x*herd_y <= 16 (2 DMAs per tile: 8x2 places, 8x4 does not), N % (tile_n*herd_x*herd_y) == 0.
  flash_attention  lkp == head_dim (NUMERICS; head_dim a multiple of 64 may also run at lkp 64 in dk/dv
         chunks, as mlir-air's registry does at head_dim 128 - NUMERICS' two rules together would otherwise
         forbid causal attention at head_dim 128), causal -> tile_q == lkp == 64, heads per unroll <= 2,
         heads_q % heads_per_unroll == 0, columns heads_per_unroll*num_q_tiles <= 8, stages <= rows,
         lqp % num_q_tiles == 0, lq % lqp == 0, lk % (lkp*stages) == 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from kernels.numerics.catalog import get_spec
from kernels.thresholds import GEMM_HIGH_PRECISION_MIN_K

ARRAYS = {"npu2": (8, 4), "npu1": (4, 4)}  # (columns, compute rows)
GEMM_B_STRIDE_LIMIT = 1_048_576
GEMV_L2_BYTES = 524_288
GEMV_L1_BYTES = 65_536
BD_REPEAT_LIMIT = 255
FUSED_CAST_MIN_MKN = 4e9


class TileRuleViolation(ValueError):
    """Raised when a tile breaks a hard rule of its kernel; the message starts with the rule's name."""

    def __init__(self, rule: str, message: str, violations: list[tuple[str, str]] | None = None) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.violations = violations or [(rule, message)]


@dataclass
class TilePlan:
    kernel: str
    tile: dict[str, Any]
    herd: list[int]
    tiles_in_flight: int
    tiles_target: int
    justification: str = ""
    warnings: list[str] = field(default_factory=list)
    legal: bool = True  # False: the tile breaks a hard rule (forced, or no legal tile exists for the shape)

    def to_json(self) -> dict:
        return asdict(self)


Rule = tuple[str, Callable[[dict, dict], bool], Callable[[dict, dict], str]]


def _columns(target: str) -> int:
    return ARRAYS[target][0]


def _rows(target: str) -> int:
    return ARRAYS[target][1]


# --- GEMM ------------------------------------------------------------------------------------------------


def _gemm_method(s: dict) -> str:
    return "fused-cast" if s["M"] * s["K"] * s["N"] >= FUSED_CAST_MIN_MKN else "drain"


def gemm_tile_n(N: int, herd_n: int = 4) -> int:
    """tile_n for N: 128, halved (64, 32) while herd_n*tile_n does not divide N; then the largest multiple
    of 16 up to 128 that does (registry: N=896 -> 32, N=960 -> 80, N=256 -> 64, N=8960 -> 64)."""
    for t in (128, 64, 32):
        if N % (t * herd_n) == 0:
            return t
    for t in range(128, 15, -16):
        if N % (t * herd_n) == 0:
            return t
    return 16


def gemm_tile_k_l2(K: int, N: int, tile_k_l1: int = 32) -> int:
    """tile_k_l2 for (K, N): 256, else 512, else the largest multiple of 64 (<= 512) dividing K, else the
    largest multiple of tile_k_l1 - always keeping the B-tile DMA stride tile_k_l2*N within 1,048,576.
    Multiples of 64 first: mlir-air's registry measured silent corruption at tile_k_l2 160, 288 and 480
    (K = 960, 1440, 320) while 64, 192, 320 and 960 were clean."""
    ok = lambda t: t > 0 and K % t == 0 and t * N <= GEMM_B_STRIDE_LIMIT  # noqa: E731
    for t in (256, 512):
        if ok(t):
            return t
    for step in (64, tile_k_l1):
        for t in range(min(512, K) // step * step, 0, -step):
            if ok(t):
                return t
    return tile_k_l1


def _gemm_default(s: dict, target: str) -> dict:
    """The recommended GEMM tile: the fullest herd (8x4 on NPU2) whose tiles divide M and N, tile_m 64
    (fused-cast) / 32 (drain) shrinking to 16, tile_n per `gemm_tile_n`, tile_k_l2 per `gemm_tile_k_l2`."""
    cols, rows = _columns(target), _rows(target)
    M, N = s["M"], s["N"]
    method = _gemm_method(s)
    best = None
    for herd_n in _halvings(rows):
        tile_n = gemm_tile_n(N, herd_n)
        if N % (tile_n * herd_n):
            continue
        for herd_m in _halvings(cols):
            for tile_m in _halvings(64 if method == "fused-cast" else 32, stop=16):
                if M % (tile_m * herd_m) == 0:
                    key = (herd_m * herd_n, tile_m, tile_n)
                    if best is None or key > best[0]:
                        best = (key, tile_m, tile_n, herd_m, herd_n)
                    break
    if best is None:  # nothing legal (tiny or ragged M/N): the full-array tile, reported as illegal
        best = (None, 64 if method == "fused-cast" else 32, gemm_tile_n(N, rows), cols, rows)
    _, tile_m, tile_n, herd_m, herd_n = best
    return {
        "tile_m": tile_m,
        "tile_k_l2": gemm_tile_k_l2(s["K"], N),
        "tile_k_l1": 32,
        "tile_n": tile_n,
        "herd_m": herd_m,
        "herd_n": herd_n,
        "method": method,
    }


def _halvings(start: int, stop: int = 1) -> list[int]:
    out = []
    while start >= stop:
        out.append(start)
        start //= 2
    return out


def _gemm_rules(target: str) -> list[Rule]:
    cols, rows = _columns(target), _rows(target)
    return [
        ("gemm.N_divisible_by_tile_n_herd_n", lambda s, t: s["N"] % (t["tile_n"] * t["herd_n"]) == 0,
         lambda s, t: f"N={s['N']} is not a multiple of tile_n*herd_n={t['tile_n']}*{t['herd_n']}; not asserted "
         "by the compiler - the uncovered columns are silently never written"),
        ("gemm.M_divisible_by_tile_m_herd_m", lambda s, t: s["M"] % (t["tile_m"] * t["herd_m"]) == 0,
         lambda s, t: f"M={s['M']} is not a multiple of tile_m*herd_m={t['tile_m']}*{t['herd_m']}"),
        ("gemm.K_divisible_by_tile_k_l2", lambda s, t: s["K"] % t["tile_k_l2"] == 0,
         lambda s, t: f"K={s['K']} is not a multiple of tile_k_l2={t['tile_k_l2']}"),
        ("gemm.tile_k_l2_divisible_by_tile_k_l1", lambda s, t: t["tile_k_l2"] % t["tile_k_l1"] == 0,
         lambda s, t: f"tile_k_l2={t['tile_k_l2']} is not a multiple of tile_k_l1={t['tile_k_l1']}"),
        ("gemm.b_tile_dma_stride", lambda s, t: t["tile_k_l2"] * s["N"] <= GEMM_B_STRIDE_LIMIT,
         lambda s, t: f"tile_k_l2*N = {t['tile_k_l2'] * s['N']} exceeds the DMA stride limit {GEMM_B_STRIDE_LIMIT}"),
        ("gemm.drain_tile_m_le_32", lambda s, t: t.get("method") != "drain" or t["tile_m"] <= 32,
         lambda s, t: f"the drain method holds an f32 accumulator and a bf16 drain buffer: tile_m={t['tile_m']} "
         "> 32 overflows the 64 KiB L1"),
        ("gemm.mmul_tile_m_multiple_of_16", lambda s, t: t["tile_m"] % 16 == 0,
         lambda s, t: f"tile_m={t['tile_m']} is not a multiple of 16 (2x2 unrolled 8x8x8 MMA)"),
        ("gemm.mmul_tile_n_multiple_of_16", lambda s, t: t["tile_n"] % 16 == 0,
         lambda s, t: f"tile_n={t['tile_n']} is not a multiple of 16 (2x2 unrolled 8x8x8 MMA)"),
        ("gemm.mmul_tile_k_l1_multiple_of_8", lambda s, t: t["tile_k_l1"] % 8 == 0,
         lambda s, t: f"tile_k_l1={t['tile_k_l1']} is not a multiple of the MMA depth 8"),
        ("gemm.herd_fits_array", lambda s, t: 1 <= t["herd_m"] <= cols and 1 <= t["herd_n"] <= rows,
         lambda s, t: f"herd {t['herd_m']}x{t['herd_n']} does not fit the {cols}x{rows} array"),
        ("gemm.method_known", lambda s, t: t.get("method", "auto") in ("auto", "fused-cast", "drain"),
         lambda s, t: f"method {t.get('method')!r} is not one of auto, fused-cast, drain"),
    ]


def _gemm_herd(t: dict) -> list[int]:
    return [t["herd_m"], t["herd_n"]]


def _gemm_notes(s: dict, t: dict, target: str) -> list[str]:
    notes = []
    if t["tile_n"] < 128 and s["N"] % (t["tile_n"] * t["herd_n"]) == 0:
        notes.append(f"N={s['N']} is not {128 * t['herd_n']}-aligned: tile_n {t['tile_n']} keeps "
                     f"herd_n*tile_n | N (tile_n 128 is ~1.3x faster where it fits)")
    if t["tile_k_l2"] * 2 * s["N"] > GEMM_B_STRIDE_LIMIT and t["tile_k_l2"] < 256:
        notes.append(f"tile_k_l2 {t['tile_k_l2']}: the B-tile DMA stride tile_k_l2*N must stay <= {GEMM_B_STRIDE_LIMIT}")
    if s["K"] < GEMM_HIGH_PRECISION_MIN_K:
        notes.append(f"K={s['K']} < {GEMM_HIGH_PRECISION_MIN_K}: outputs ~1/sqrt(K) are large enough that the high-precision atol "
                     "(1.5e-3, sized at K=8192) trips on a few near-zero-reference elements - NPU2 does the same "
                     "(registry: 1024x768x3072, 2048x896x4864); the plan runs such rows on bf16-out-low, as the registry does")
    if t["tile_k_l2"] % 64:
        notes.append(f"tile_k_l2 {t['tile_k_l2']} is not a multiple of 64: mlir-air's registry measured silent "
                     "corruption at such tilings (160, 288, 480) - check mean_rel_L1")
    return notes


# --- GEMV ------------------------------------------------------------------------------------------------


def _gemv_l2(t: dict, K: int) -> int:
    return t["herd_m"] * t["tile_m"] * K * 2 + t["herd_m"] * t["tile_m"] * 2


def _gemv_default(s: dict, target: str) -> dict:
    """herd_m 8 (shrinking only when M forces it), the largest tile_m of 16/8/4/2 within the L2 budget and
    the BD repeat limit, m_input = tile_m unless the L1 tile would overflow (registry: 8/8/8, 8/2/2)."""
    M, K = s["M"], s["K"]
    choice = None
    for herd in _halvings(_columns(target)):
        for tile_m in (16, 8, 4, 2):
            t = {"tile_m": tile_m, "herd_m": herd}
            if M % (tile_m * herd) == 0 and _gemv_l2(t, K) <= GEMV_L2_BYTES and M // (tile_m * herd) - 1 <= BD_REPEAT_LIMIT:
                choice = (tile_m, herd)
                break
        if choice:
            break
    tile_m, herd = choice or (2, _columns(target))
    m_input = tile_m
    while m_input > 1 and ((m_input + 1) * K * 2 > GEMV_L1_BYTES or tile_m % m_input):
        m_input //= 2
    return {"tile_m": tile_m, "m_input": m_input, "herd_m": herd}


def _gemv_rules(target: str) -> list[Rule]:
    cols = _columns(target)
    return [
        ("gemv.M_divisible_by_tile_m_herd_m", lambda s, t: s["M"] % (t["tile_m"] * t["herd_m"]) == 0,
         lambda s, t: f"M={s['M']} is not a multiple of tile_m*herd_m={t['tile_m']}*{t['herd_m']}"),
        ("gemv.tile_m_even", lambda s, t: t["tile_m"] % 2 == 0,
         lambda s, t: f"tile_m={t['tile_m']} is odd (the 4-byte transfer-length check)"),
        ("gemv.K_divisible_by_64", lambda s, t: s["K"] % 64 == 0,
         lambda s, t: f"K={s['K']} is not a multiple of 64 (the kernel's 64-lane accumulate)"),
        ("gemv.l2_budget", lambda s, t: _gemv_l2(t, s["K"]) <= GEMV_L2_BYTES,
         lambda s, t: f"herd_m*tile_m*K*2 + herd_m*tile_m*2 = {_gemv_l2(t, s['K'])} > {GEMV_L2_BYTES} bytes of L2"),
        ("gemv.bd_repeat_le_255", lambda s, t: s["M"] // (t["tile_m"] * t["herd_m"]) - 1 <= BD_REPEAT_LIMIT,
         lambda s, t: f"{s['M'] // (t['tile_m'] * t['herd_m'])} outer iterations exceed the buffer-descriptor "
         f"repeat limit ({BD_REPEAT_LIMIT} repeats): run it per partition (e.g. 16384 rows)"),
        ("gemv.tile_m_divisible_by_m_input", lambda s, t: t["m_input"] >= 1 and t["tile_m"] % t["m_input"] == 0,
         lambda s, t: f"tile_m={t['tile_m']} is not a multiple of m_input={t['m_input']}"),
        ("gemv.l1_budget", lambda s, t: (t["m_input"] + 1) * s["K"] * 2 <= GEMV_L1_BYTES,
         lambda s, t: f"the [m_input, K] A tile plus the [K] vector, {(t['m_input'] + 1) * s['K'] * 2} bytes, "
         f"overflow the {GEMV_L1_BYTES}-byte L1"),
        ("gemv.herd_fits_array", lambda s, t: 1 <= t["herd_m"] <= cols,
         lambda s, t: f"herd_m={t['herd_m']} exceeds the {cols} columns"),
    ]


# --- norms, rope, elementwise ----------------------------------------------------------------------------


def _largest_divisor(n: int, cap: int) -> int:
    for d in range(min(cap, n), 0, -1):
        if n % d == 0:
            return d
    return 1


def _norm_default(s: dict, target: str) -> dict:
    return {"herd_x": _largest_divisor(s["M"], _columns(target))}


def _norm_rules(kernel: str, target: str) -> list[Rule]:
    cols = _columns(target)
    return [
        (f"{kernel}.M_divisible_by_herd_x", lambda s, t: s["M"] % t["herd_x"] == 0,
         lambda s, t: f"M={s['M']} rows do not split over herd_x={t['herd_x']}"),
        (f"{kernel}.N_divisible_by_vector_size", lambda s, t: s["N"] % 16 == 0,
         lambda s, t: f"N={s['N']} is not a multiple of the 16-lane bf16 vector"),
        (f"{kernel}.herd_fits_array", lambda s, t: 1 <= t["herd_x"] <= cols,
         lambda s, t: f"herd_x={t['herd_x']} exceeds the {cols} columns"),
    ]


def _rope_default(s: dict, target: str) -> dict:
    return {"herd_x": _largest_divisor(s["rows"], _columns(target)), "herd_y": 1}


def _rope_rules(target: str) -> list[Rule]:
    cols = _columns(target)
    return [
        ("rope.rows_divisible_by_herd", lambda s, t: s["rows"] % (t["herd_x"] * t["herd_y"]) == 0,
         lambda s, t: f"rows={s['rows']} do not split over herd {t['herd_x']}x{t['herd_y']}"),
        ("rope.three_dma_tiles_le_columns", lambda s, t: t["herd_x"] * t["herd_y"] <= cols,
         lambda s, t: f"herd {t['herd_x']}x{t['herd_y']}: 3 shim DMAs per tile (input, LUT, output) allow at "
         f"most {cols} tiles"),
        ("rope.head_dim_multiple_of_32", lambda s, t: s["head_dim"] % 32 == 0,
         lambda s, t: f"head_dim={s['head_dim']}: each half must fill 16-lane vectors"),
    ]


_ELT = {  # kernel: (tile key, default tile, max herd_y, DMAs per tile)
    "eltwise_add": ("tile", 2048, 1, 3),
    "silu_mul": ("tile_n", 4096, 1, 3),
    "gelu": ("tile_n", 4096, 2, 2),
}


def _elt_default(kernel: str):
    key, tile, hy, _ = _ELT[kernel]

    def default(s: dict, target: str) -> dict:
        cols = _columns(target)
        herd_y = min(hy, _rows(target))
        for t in (tile, tile // 2, tile // 4, tile // 8, 256, 128, 64, 32, 16):
            for hx in range(cols, 0, -1):
                for y in range(herd_y, 0, -1):
                    if s["N"] % (t * hx * y) == 0:
                        return {key: t, "herd_x": hx, "herd_y": y}
        return {key: 16, "herd_x": 1, "herd_y": 1}

    return default


def _elt_rules(kernel: str, target: str) -> list[Rule]:
    key, _, max_y, dmas = _ELT[kernel]
    cols = _columns(target)
    if dmas == 3:
        herd_rule = (f"{kernel}.herd_y_eq_1", lambda s, t: t["herd_y"] == 1,
                     lambda s, t: f"herd_y={t['herd_y']}: 3 DMAs per tile (2 in, 1 out) exhaust the shim channels "
                     "beyond one row")
    else:
        herd_rule = (f"{kernel}.tiles_le_16", lambda s, t: t["herd_x"] * t["herd_y"] <= 2 * cols,
                     lambda s, t: f"herd {t['herd_x']}x{t['herd_y']}: 2 DMAs per tile place at most "
                     f"{2 * cols} tiles (8x2), the full 8x4 does not")
    return [
        herd_rule,
        (f"{kernel}.N_divisible_by_tile_herd", lambda s, t: s["N"] % (t[key] * t["herd_x"] * t["herd_y"]) == 0,
         lambda s, t: f"N={s['N']} is not a multiple of {key}*herd_x*herd_y={t[key]}*{t['herd_x']}*{t['herd_y']}"),
        (f"{kernel}.tile_fits_l1", lambda s, t: t[key] <= 4096 and t[key] % 16 == 0,
         lambda s, t: f"{key}={t[key]} must be a multiple of 16 and <= 4096 (ping-ponged buffers in 64 KiB L1)"),
        (f"{kernel}.herd_fits_array", lambda s, t: 1 <= t["herd_x"] <= cols and 1 <= t["herd_y"] <= _rows(target),
         lambda s, t: f"herd {t['herd_x']}x{t['herd_y']} does not fit the {cols}x{_rows(target)} array"),
    ]


# --- flash attention -------------------------------------------------------------------------------------


def _fa_default(s: dict, target: str) -> dict:
    cols, rows = _columns(target), _rows(target)
    lkp = 64 if s["dk"] % 64 == 0 and s["dv"] % 64 == 0 else s["dk"]
    hpu = 2 if s["heads_q"] % 2 == 0 else 1
    q_tiles = cols // 2  # 4 q tiles per head pair (NPU2: 2 x 4 = 8 columns)
    if hpu == 1 and cols < 8:
        q_tiles = cols
    tile_q = 64
    while q_tiles > 1 and s["lq"] % (tile_q * q_tiles):
        q_tiles //= 2
    stages = rows
    while stages > 1 and s["lk"] % (lkp * stages):
        stages //= 2
    return {"lqp": tile_q * q_tiles, "lkp": lkp, "tile_q": tile_q, "num_q_tiles": q_tiles,
            "num_cascade_stages": stages, "num_heads_per_unroll": hpu}


def _fa_rules(target: str) -> list[Rule]:
    cols, rows = _columns(target), _rows(target)
    return [
        ("flash_attention.lkp_equals_head_dim",
         lambda s, t: t["lkp"] == s["dk"] or (t["lkp"] == 64 and s["dk"] % 64 == 0 and s["dv"] % 64 == 0),
         lambda s, t: f"lkp={t['lkp']} must equal head_dim dk={s['dk']} (or be 64 with dk, dv multiples of 64: "
         "the dk/dv-chunked layout mlir-air runs at head_dim 128)"),
        ("flash_attention.causal_tile_q_eq_lkp_eq_64",
         lambda s, t: not s["causal"] or (t["tile_q"] == t["lkp"] == 64),
         lambda s, t: f"causal masking needs tile_q == lkp == 64 (tile_q={t['tile_q']}, lkp={t['lkp']})"),
        ("flash_attention.heads_per_unroll_le_2", lambda s, t: 1 <= t["num_heads_per_unroll"] <= 2,
         lambda s, t: f"num_heads_per_unroll={t['num_heads_per_unroll']} > 2 runs out of shim DMA channels"),
        ("flash_attention.heads_divisible_by_unroll", lambda s, t: s["heads_q"] % t["num_heads_per_unroll"] == 0,
         lambda s, t: f"heads_q={s['heads_q']} is not a multiple of num_heads_per_unroll={t['num_heads_per_unroll']}"),
        ("flash_attention.columns_le_array",
         lambda s, t: t["num_heads_per_unroll"] * t["num_q_tiles"] <= cols,
         lambda s, t: f"num_heads_per_unroll*num_q_tiles = {t['num_heads_per_unroll'] * t['num_q_tiles']} > {cols} columns"),
        ("flash_attention.stages_le_rows", lambda s, t: 1 <= t["num_cascade_stages"] <= rows,
         lambda s, t: f"num_cascade_stages={t['num_cascade_stages']} exceeds the {rows} compute rows"),
        ("flash_attention.lqp_divisible_by_q_tiles", lambda s, t: t["lqp"] == t["tile_q"] * t["num_q_tiles"],
         lambda s, t: f"lqp={t['lqp']} must be tile_q*num_q_tiles={t['tile_q']}*{t['num_q_tiles']}"),
        ("flash_attention.lq_divisible_by_lqp", lambda s, t: s["lq"] % t["lqp"] == 0,
         lambda s, t: f"lq={s['lq']} is not a multiple of lqp={t['lqp']}"),
        ("flash_attention.lk_divisible_by_lkp_stages",
         lambda s, t: s["lk"] % (t["lkp"] * t["num_cascade_stages"]) == 0,
         lambda s, t: f"lk={s['lk']} is not a multiple of lkp*num_cascade_stages={t['lkp']}*{t['num_cascade_stages']}"),
    ]


def _fa_herd(t: dict) -> list[int]:
    return [t["num_heads_per_unroll"] * t["num_q_tiles"], t["num_cascade_stages"]]


def _fa_notes(s: dict, t: dict, target: str) -> list[str]:
    if s["dk"] != 64:
        return [f"head_dim {s['dk']}: mlir-air's registry runs head_dim 128 at lkp 64 with dk/dv chunks of 64 "
                "(the emulated executor models that layout)"]
    return []


# --- dispatch --------------------------------------------------------------------------------------------

_DEFAULTS = {
    "gemm": _gemm_default,
    "gemv": _gemv_default,
    "rmsnorm": _norm_default,
    "layernorm": _norm_default,
    "rope": _rope_default,
    "flash_attention": _fa_default,
    "eltwise_add": _elt_default("eltwise_add"),
    "silu_mul": _elt_default("silu_mul"),
    "gelu": _elt_default("gelu"),
}


def _rules(kernel: str, target: str) -> list[Rule]:
    if kernel == "gemm":
        return _gemm_rules(target)
    if kernel == "gemv":
        return _gemv_rules(target)
    if kernel in ("rmsnorm", "layernorm"):
        return _norm_rules(kernel, target)
    if kernel == "rope":
        return _rope_rules(target)
    if kernel == "flash_attention":
        return _fa_rules(target)
    return _elt_rules(kernel, target)


def _herd(kernel: str, t: dict) -> list[int]:
    if kernel == "gemm":
        return _gemm_herd(t)
    if kernel == "gemv":
        return [t["herd_m"], 1]
    if kernel in ("rmsnorm", "layernorm"):
        return [t["herd_x"], 1]
    if kernel == "flash_attention":
        return _fa_herd(t)
    return [t["herd_x"], t["herd_y"]]


def default_tile(kernel: str, shape: dict, target: str = "npu2") -> dict:
    """The planner's recommended tile for (kernel, shape, target), unchecked (see plan_tile)."""
    t = _DEFAULTS[kernel](get_spec(kernel).normalize_shape(shape), target)
    return t


def check_tile(kernel: str, shape: dict, tile: dict, target: str = "npu2") -> list[tuple[str, str]]:
    """Every (rule, message) that `tile` breaks for (kernel, shape, target), in rule order."""
    s = get_spec(kernel).normalize_shape(shape)
    out = []
    for name, ok, msg in _rules(kernel, target):
        try:
            good = ok(s, tile)
        except (KeyError, ZeroDivisionError, TypeError) as e:
            out.append((name, f"tile cannot be evaluated ({type(e).__name__}: {e})"))
            continue
        if not good:
            out.append((name, msg(s, tile)))
    return out


def _normalize_tile(kernel: str, tile: dict, default: dict) -> dict:
    unknown = set(tile) - set(default)
    if unknown:
        raise TileRuleViolation(
            f"{kernel}.tile_keys", f"unknown tile key(s) {', '.join(sorted(unknown))}; known: {', '.join(default)}"
        )
    out = dict(default)
    for k, v in tile.items():
        if isinstance(default[k], str):
            out[k] = str(v)
            continue
        try:
            out[k] = int(v)
        except (TypeError, ValueError):
            raise TileRuleViolation(f"{kernel}.tile_keys", f"{k}={v!r} is not an integer") from None
        if out[k] <= 0:
            raise TileRuleViolation(f"{kernel}.tile_keys", f"{k}={out[k]} must be positive")
    return out


def _justify(kernel: str, s: dict, t: dict, herd: list[int], target: str, tiles_target: int) -> str:
    n = herd[0] * herd[1]
    if n >= tiles_target:
        return ""
    cols = _columns(target)
    if kernel in ("eltwise_add", "silu_mul") and herd[1] == 1 and herd[0] == cols:
        return f"3 DMAs per tile (2 in, 1 out): the shim channels place one row of {cols} tiles, not more"
    if kernel == "rope" and herd[0] * herd[1] == cols:
        return f"3 DMAs per tile (input, LUT, output): at most {cols} tiles place"
    if kernel in ("rmsnorm", "layernorm", "rope", "gemv"):
        rows_key = "rows" if kernel == "rope" else "M"
        if s[rows_key] < tiles_target or s[rows_key] % tiles_target:
            return (f"{rows_key}={s[rows_key]}: only {n} of {tiles_target} tiles get whole rows"
                    + (" (no row parallelism at M=1, decode)" if s[rows_key] == 1 else ""))
    if kernel == "flash_attention":
        why = []
        if t["num_heads_per_unroll"] == 1 and s["heads_q"] % 2:
            why.append(f"{s['heads_q']} query heads (odd): one head per unroll, half the columns")
        if t["num_heads_per_unroll"] * t["num_q_tiles"] < cols and not why:
            why.append(f"lq={s['lq']} fills {t['num_q_tiles']} q tiles of {t['tile_q']} rows per head")
        if t["num_cascade_stages"] < _rows(target):
            why.append(f"lk={s['lk']} splits over {t['num_cascade_stages']} cascade stages only")
        if why:
            return "; ".join(why)
    if kernel == "gemm":
        return f"M={s['M']}: herd_m {t['herd_m']} (M < tile_m*{cols} or not a multiple of it)"
    if kernel == "gelu":
        return f"N={s['N']} does not split over 8x2 tiles of {t['tile_n']}"
    return f"{n} of {tiles_target} tiles placed for this shape"


def plan_tile(kernel: str, shape: dict, target: str = "npu2", tile: dict | None = None, *, force: bool = False) -> TilePlan:
    """The recommended (or the given, completed) tile for (kernel, shape, target), checked against every
    hard rule; see the module docstring. Raises TileRuleViolation (unless `force`)."""
    if target not in ARRAYS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(ARRAYS)}")
    spec = get_spec(kernel)
    s = spec.normalize_shape(shape)
    default = _DEFAULTS[kernel](s, target)
    t = _normalize_tile(kernel, tile, default) if tile else default
    if kernel == "gemm" and t.get("method") == "auto":
        t["method"] = _gemm_method(s)
    violations = check_tile(kernel, s, t, target)
    warnings: list[str] = []
    if violations:
        if tile and not force:
            rule, msg = violations[0]
            raise TileRuleViolation(rule, msg, violations)
        if tile:
            warnings += [f"forced tile breaks {rule}: {msg}" for rule, msg in violations]
        else:  # the shape itself admits no legal tile: say so, the hardware needs it padded
            warnings += [f"no legal {target} tile for this shape ({rule}: {msg}); pad it for the hardware"
                         for rule, msg in violations]
    if kernel == "gemm":
        warnings += _gemm_notes(s, t, target)
    if kernel == "flash_attention":
        warnings += _fa_notes(s, t, target)
    herd = _herd(kernel, t)
    target_tiles = spec.target_tiles[target]
    return TilePlan(
        kernel=kernel,
        tile=t,
        herd=herd,
        tiles_in_flight=herd[0] * herd[1],
        tiles_target=target_tiles,
        justification=_justify(kernel, s, t, herd, target, target_tiles),
        warnings=warnings,
        legal=not violations,
    )
