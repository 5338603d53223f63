"""The vocabulary triage rules are written in: named predicates over the evidence dict
(`handlers.triage.evidence`), each answering (true / false / unknown, the fact it used). `PREDICATES` is the
table a rule's `fn` names; parameters come from the TOML (`{ fn = "ge", key = "head_dim", value = 128 }`) and
no expression from the TOML is ever evaluated as code. A limit a predicate checks is imported from where it
is defined (the tile planner's `npu_kernels.numerics.tiles`, the gates' `npu_kernels.thresholds`), never restated.

A new predicate: a function here and its entry in `PREDICATES`; a new rule: a `[[rule]]` table in rules.toml.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable

import npu_kernels.thresholds as thresholds
from handlers.triage.evidence import MISSING, herd_dim, lookup, number
from npu_kernels.numerics.kernels import kernel_tolerance
from npu_kernels.thresholds import ATOL_ARTIFACT, per_position_threshold
from npu_kernels.numerics.tiles import GEMM_B_STRIDE_LIMIT, GEMV_L2_BYTES, check_tile, default_tile

Outcome = tuple[bool | None, str]  # (true / false / unknown, a sentence about the fact used)


class RuleError(ValueError):
    """Raised when a rules file is malformed: a missing field, a bad regex, an unknown predicate or
    parameter, or a duplicate rule id."""


def _compare(op: str, symbol: str, test: Callable[[float, float], bool]):
    def predicate(ev: dict[str, Any], *, key: str, value: float) -> Outcome:
        got = lookup(ev, key)
        if got is MISSING or got is None:
            return None, ""
        x = number(got)
        if x is None or math.isnan(x):
            return None, ""
        ok = test(x, float(value))
        return ok, f"{key} = {got:g} ({'' if ok else 'not '}{symbol} {value:g})"

    predicate.__name__ = op
    return predicate


def eq(ev: dict[str, Any], *, key: str, value: Any) -> Outcome:
    got = lookup(ev, key)
    if got is MISSING:
        return None, ""
    if isinstance(value, str) and isinstance(got, str):
        ok = got.lower() == value.lower()
    else:
        ok = got == value
    return ok, f"{key} = {got!r}"


def one_of(ev: dict[str, Any], *, key: str, values: list[Any]) -> Outcome:
    got = lookup(ev, key)
    if got is MISSING or got is None:
        return None, ""
    norm = [v.lower() if isinstance(v, str) else v for v in values]
    ok = (got.lower() if isinstance(got, str) else got) in norm
    return ok, f"{key} = {got!r}"


def is_true(ev: dict[str, Any], *, key: str) -> Outcome:
    got = lookup(ev, key)
    if not isinstance(got, bool):
        return None, ""
    return got, f"{key} = {str(got).lower()}"


def is_false(ev: dict[str, Any], *, key: str) -> Outcome:
    got = lookup(ev, key)
    if not isinstance(got, bool):
        return None, ""
    return (not got), f"{key} = {str(got).lower()}"


def is_nan(ev: dict[str, Any], *, key: str) -> Outcome:
    got = lookup(ev, key)
    x = number(got) if got is not MISSING else None
    if x is None:
        return None, ""
    return math.isnan(x), f"{key} = {got}"


def nan_present(ev: dict[str, Any]) -> Outcome:
    """NaN in the output: nan_count > 0, or a NaN mean_rel_L1 / max_abs."""
    count = number(lookup(ev, "nan_count"))
    if count is not None and count > 0:
        return True, f"nan_count = {int(count)}"
    for key in ("mean_rel_L1", "max_abs"):
        x = number(lookup(ev, key))
        if x is not None and math.isnan(x):
            return True, f"{key} = nan"
    if count is not None:
        return False, "nan_count = 0"
    known = [number(lookup(ev, k)) for k in ("mean_rel_L1", "max_abs")]
    return (False, "error figures are finite") if any(v is not None for v in known) else (None, "")


def gemm_n_misaligned(ev: dict[str, Any]) -> Outcome:
    """GEMM `N % (tile_n * herd_n) != 0`, which the builder does not assert."""
    n, tile_n, herd_n = number(lookup(ev, "N")), number(lookup(ev, "tile_n")), number(herd_dim(ev, "herd_n", 1))
    if n is None or tile_n is None or herd_n is None or tile_n * herd_n == 0:
        return None, ""
    step = int(tile_n * herd_n)
    ok = int(n) % step != 0
    product = f"tile_n*herd_n = {int(tile_n)}*{int(herd_n)} = {step}"
    return ok, f"N = {int(n)} is {'not ' if ok else ''}a multiple of {product}"


def gemm_b_stride_exceeds(ev: dict[str, Any], *, limit: int = GEMM_B_STRIDE_LIMIT) -> Outcome:
    """GEMM B-tile DMA stride `tile_k_l2 * N` above the buffer-descriptor stride cap."""
    n, tk = number(lookup(ev, "N")), number(lookup(ev, "tile_k_l2"))
    if n is None or tk is None:
        return None, ""
    stride = int(n * tk)
    ok = stride > limit
    return ok, f"tile_k_l2*N = {int(tk)}*{int(n)} = {stride} ({'above' if ok else 'within'} the {limit} stride cap)"


def gemv_l2_overflow(ev: dict[str, Any], *, budget: int = GEMV_L2_BYTES) -> Outcome:
    """GEMV staged L2 buffer `herd_m*tile_m*K*2 + herd_m*tile_m*2` bytes above the memtile budget."""
    k, tm, hm = number(lookup(ev, "K")), number(lookup(ev, "tile_m")), number(herd_dim(ev, "herd_m", 0))
    if k is None or tm is None or hm is None:
        return None, ""
    need = int(hm * tm * k * 2 + hm * tm * 2)
    ok = need > budget
    return ok, f"GEMV L2 staging = {need} bytes ({'above' if ok else 'within'} the {budget}-byte budget)"


def near_zero_atol_trip(ev: dict[str, Any]) -> Outcome:
    """A GEMM's mismatches are the high-precision atol tripping, not a wrong datapath: mean_rel_L1 inside the
    high tier (ATOL_ARTIFACT's bound), every mismatch at a near-zero reference (|ref| <= the low tier's
    atol / rtol, where its tolerance is atol-dominated) and within the low tier's atol: the low tier holds it."""
    n, ref_max = number(lookup(ev, "mismatches")), number(lookup(ev, "mismatch_ref_max"))
    err_max, rel = number(lookup(ev, "mismatch_err_max")), number(lookup(ev, "mean_rel_L1"))
    if None in (n, ref_max, err_max, rel) or any(math.isnan(x) for x in (ref_max, err_max, rel)):
        return None, ""
    if n <= 0:
        return False, "no mismatches"
    rtol, atol = kernel_tolerance(ATOL_ARTIFACT["kernel"], "bf16-out-low")  # the artifact's kernel's low tier
    ok = rel <= ATOL_ARTIFACT["max_mean_rel_L1"] and ref_max <= atol / rtol and err_max <= atol
    return ok, (f"{int(n)} mismatches at |ref| <= {ref_max:.3g}, error <= {err_max:.3g} (low tier: atol {atol:g}, "
                f"atol/rtol {atol / rtol:.3g}), mean_rel_L1 {rel:.3g} (high tier <= {ATOL_ARTIFACT['max_mean_rel_L1']:g})")


def tile_rule_broken(ev: dict[str, Any], *, rules: list[str]) -> Outcome:
    """The evidence's (kernel, shape, tile) breaks one of the tile planner's hard rules named in `rules`
    (npu_kernels.numerics.tiles.check_tile re-derives it from the recorded shape and tile, completed with the planner's
    defaults): true naming the rule and its numbers; unknown when the tile keeps them or there is no kernel
    and shape."""
    kernel, shape, tile = ev.get("kernel"), ev.get("shape"), ev.get("tile")
    if not isinstance(kernel, str) or not isinstance(shape, dict) or not any(r.startswith(f"{kernel}.") for r in rules):
        return None, ""
    try:
        full = {**default_tile(kernel, shape, ev.get("target") or "npu2"), **(tile or {})}
        broken = [(name, msg) for name, msg in check_tile(kernel, shape, full, ev.get("target") or "npu2")
                  if name in rules]
    except Exception:  # noqa: BLE001 - a shape the catalog cannot read is not evidence either way
        return None, ""
    if broken:
        return True, "; ".join(f"{name}: {msg}" for name, msg in broken)
    # a kept rule is no evidence against the error text: the planner checks every rule before anything runs,
    # so the same message can come from elsewhere (a merged ELF, a hand-set tile) - unknown, not false
    return None, ""


def fa_dk_chunks_gt(ev: dict[str, Any], *, value: int = 1) -> Outcome:
    """Flash attention head-dim chunks above `value`: dk_chunks, or head_dim / lkp (lkp defaults to 64,
    the Makefile's LKP and the only working point in mlir-air's FlashAttention sweep)."""
    chunks = number(lookup(ev, "dk_chunks"))
    how = "dk_chunks"
    if chunks is None:
        hd = number(lookup(ev, "head_dim"))
        if hd is None:
            hd = number(lookup(ev, "DK"))
        lkp = number(lookup(ev, "lkp")) or 64.0
        if hd is None:
            return None, ""
        chunks = hd / lkp
        how = f"head_dim / lkp = {int(hd)} / {int(lkp)}"
    ok = chunks > value
    return ok, f"{how} = {chunks:g} dk chunk(s) ({'' if ok else 'not '}> {value})"


def _layer_cosines(ev: dict[str, Any]) -> list[float] | None:
    raw = ev.get("layer_cosines")
    if not isinstance(raw, (list, tuple)) or len(raw) < 2:
        return None
    vals = [number(v) for v in raw]
    if any(v is None for v in vals):
        return None
    return vals  # type: ignore[return-value]


def _largest_drop(cos: list[float]) -> tuple[float, int]:
    drops = [(cos[i] - cos[i + 1], i) for i in range(len(cos) - 1) if not math.isnan(cos[i] - cos[i + 1])]
    return max(drops) if drops else (0.0, 0)


def cosine_cliff(ev: dict[str, Any], *, min_drop: float = 0.05) -> Outcome:
    """A sudden per-layer cosine drop `cos[i] - cos[i+1] > min_drop` between consecutive layers."""
    cos = _layer_cosines(ev)
    if cos is None:
        return None, ""
    drop, i = _largest_drop(cos)
    if drop > min_drop:
        return True, (
            f"layer cosine falls {drop:.3f} from layer {i} ({cos[i]:.4f}) to layer {i + 1} ({cos[i + 1]:.4f}), "
            f"above the {min_drop:g} cliff threshold"
        )
    return False, f"largest layer-to-layer cosine drop is {drop:.3f} (no cliff above {min_drop:g})"


def layers_healthy(ev: dict[str, Any], *, min_cos: float = 0.85, min_drop: float = 0.05) -> Outcome:
    """Every layer cosine ≥ min_cos and no cliff."""
    cos = _layer_cosines(ev)
    if cos is None:
        return None, ""
    drop, _ = _largest_drop(cos)
    low = min(cos)
    ok = not any(math.isnan(c) for c in cos) and low >= min_cos and drop <= min_drop
    return ok, f"per-layer cosine min {low:.4f}, largest drop {drop:.3f}"


def gradual_drift(ev: dict[str, Any], *, below: float = 0.85, min_drop: float = 0.05) -> Outcome:
    """The last layer's cosine is below `below` without any cliff (a slow slide, not a step)."""
    cos = _layer_cosines(ev)
    if cos is None:
        return None, ""
    drop, _ = _largest_drop(cos)
    ok = cos[-1] < below and drop <= min_drop
    return ok, f"last-layer cosine {cos[-1]:.4f} (threshold {below:g}), largest drop {drop:.3f}"


def token_gate_failed(ev: dict[str, Any]) -> Outcome:
    """The token gate failed at the first divergence: token_gate_passed is false, or a rank is None."""
    passed = ev.get("token_gate_passed")
    if isinstance(passed, bool):
        return (not passed), f"token_gate_passed = {str(passed).lower()}"
    if "divergence_step" in ev and ev["divergence_step"] is None:
        return False, "no divergence"
    if "rank_ours_in_ref" in ev and "rank_ref_in_ours" in ev:
        a, b = ev["rank_ours_in_ref"], ev["rank_ref_in_ours"]
        ok = a is None or b is None
        return ok, f"ranks at the divergence: ours in ref {a}, ref in ours {b}"
    return None, ""


def divergence_step(ev: dict[str, Any], *, op: str, value: int) -> Outcome:
    """Compare the first divergence step (None = no divergence, which is false for every comparison)."""
    if "divergence_step" not in ev:
        return None, ""
    step = ev["divergence_step"]
    if step is None:
        return False, "no divergence"
    x = number(step)
    if x is None:
        return None, ""
    ok = {"eq": x == value, "ge": x >= value, "gt": x > value, "le": x <= value, "lt": x < value}[op]
    return ok, f"first divergence at token step {int(x)}"


def per_position_below_threshold(ev: dict[str, Any]) -> Outcome:
    """Phase 2: per-position cosine min under its head_dim threshold (`npu_kernels.thresholds.per_position_threshold`)."""
    ppm, hd = number(lookup(ev, "per_position_min")), number(lookup(ev, "head_dim"))
    if ppm is None:
        return None, ""
    threshold = per_position_threshold(64 if hd is None else int(hd))
    ok = ppm < threshold
    return ok, f"per-position cosine min {ppm:.4f} ({'below' if ok else 'meets'} the {threshold} threshold)"


def any_of(ev: dict[str, Any], *, of: list[dict[str, Any]]) -> Outcome:
    """True if any sub-predicate is true; false if all are false; else unknown."""
    unknown = False
    notes = []
    for sub in of:
        ok, note = call_predicate(sub, ev)
        if ok:
            return True, note
        if ok is None:
            unknown = True
        elif note:
            notes.append(note)
    return (None, "") if unknown else (False, "; ".join(notes))


PREDICATES: dict[str, Callable[..., Outcome]] = {
    "eq": eq,
    "one_of": one_of,
    "ge": _compare("ge", "≥", lambda x, v: x >= v),
    "gt": _compare("gt", ">", lambda x, v: x > v),
    "le": _compare("le", "≤", lambda x, v: x <= v),
    "lt": _compare("lt", "<", lambda x, v: x < v),
    "is_true": is_true,
    "is_false": is_false,
    "is_nan": is_nan,
    "nan_present": nan_present,
    "gemm_n_misaligned": gemm_n_misaligned,
    "gemm_b_stride_exceeds": gemm_b_stride_exceeds,
    "gemv_l2_overflow": gemv_l2_overflow,
    "near_zero_atol_trip": near_zero_atol_trip,
    "fa_dk_chunks_gt": fa_dk_chunks_gt,
    "tile_rule_broken": tile_rule_broken,
    "cosine_cliff": cosine_cliff,
    "layers_healthy": layers_healthy,
    "gradual_drift": gradual_drift,
    "token_gate_failed": token_gate_failed,
    "divergence_step": divergence_step,
    "per_position_below_threshold": per_position_below_threshold,
    "any_of": any_of,
}


def predicate_params(spec: dict[str, Any]) -> dict[str, Any]:
    """A predicate's parameters; a `value` spelled as a name of `npu_kernels.thresholds` (e.g. "BLOCK_COSINE_MIN")
    is that threshold, so a rule never restates a number the gates own."""
    params = {k: v for k, v in spec.items() if k not in ("fn", "key_symptom")}
    value = params.get("value")
    if isinstance(value, str) and value.isupper():
        if not isinstance(getattr(thresholds, value, None), (int, float)):
            raise RuleError(f"predicate value {value!r} names no numeric threshold in npu_kernels.thresholds.")
        params["value"] = getattr(thresholds, value)
    return params


def call_predicate(spec: dict[str, Any], ev: dict[str, Any]) -> Outcome:
    """Evaluate one predicate table of a rule (`{ fn = ..., <params> }`) on the evidence."""
    return PREDICATES[spec["fn"]](ev, **predicate_params(spec))


def check_predicate(spec: Any, where: str) -> dict[str, Any]:
    """`spec` itself when it names a known predicate with parameters it takes (any_of: recursively); else
    RuleError saying where (`where`) and what is wrong."""
    if not isinstance(spec, dict) or not isinstance(spec.get("fn"), str):
        raise RuleError(f"{where}: a predicate must be a table with an `fn` name, got {spec!r}.")
    fn = PREDICATES.get(spec["fn"])
    if fn is None:
        raise RuleError(f"{where}: unknown predicate {spec['fn']!r} (known: {', '.join(sorted(PREDICATES))}).")
    params = predicate_params(spec)
    try:
        inspect.signature(fn).bind({}, **params)
    except TypeError as e:
        raise RuleError(f"{where}: bad parameters for {spec['fn']!r}: {e}.") from e
    if spec["fn"] == "any_of":
        for i, sub in enumerate(params["of"]):
            check_predicate(sub, f"{where}.of[{i}]")
    return spec
