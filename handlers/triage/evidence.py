"""The evidence dict a failure is triaged on, and how a rule's predicate reads it (`lookup`).

Evidence keys (all optional; a predicate whose keys are missing is *unknown*, not false). The phase
gates build this dict:

  kind                  "kernel" | "block" | "token_gate" | "diagnosis" | "transcript"
  kernel                gemm, gemv, rmsnorm, layernorm, rope, flash_attention, eltwise_add, silu_mul, gelu
  shape, tile           dicts; keys are matched case-insensitively (M, K, N / tile_m, tile_n, tile_k_l2,
                        herd_m, herd_n, lkp, ...); predicates also look for a name at the top level
  herd                  [rows, cols] of the herd, e.g. [8, 4]
  nan_count, n_elements, mismatches, mean_rel_L1, max_abs        from the output check
  contract, mismatch_ref_max, mismatch_err_max   the row's contract; the largest |ref| / error at a mismatch
  all_zero, constant_output      bool: the output is all zeros / one repeated value
  correlation           output vs reference (also accepted: cosine)
  bad_column_fraction, first_bad_column   fraction of output columns holding any mismatch / the first one
  second_call_mismatch  bool: the first call is correct and a later call of the same kernel is wrong
  first_call_nan        bool: NaN on the first call only (later calls look fine)
  standalone_ok         bool: the kernel passes its standalone harness
  chained_ok            bool: the kernel is still correct when chained with other kernels / layers
  layer_cosines         list of per-layer cosines (whole-tensor or per-position min), layer 0 first
  block_cosine, per_position_min         Phase 2 block gate figures
  culprit               the kernel the Phase 2 bisect names (gemm, flash_attention, eltwise_add, ...)
  divergence_step       first token step where the two sides differ (None = no divergence)
  token_gate_passed     bool, the prompt's token-gate verdict (the KV-cache and LM-head rules need it, or
                        both ranks); rank_ours_in_ref / rank_ref_in_ours: 1-based ranks (None = outside top-k)
  prefill_ok            bool: prefill output (per-layer cosine, first token) matches the reference
  head_dim, dk_chunks, lkp, layout ("seq-first" | "head-first")   flash attention
  runtime_hang          bool: the NPU call hung / timed out at run time
  smaller_shape_passes  bool: the same kernel passes at smaller variants of the failing shape
  multi_launch          bool: the failing build is a merged multi-launch ELF
  compile_seconds       float; timed_out_stage: "compile" | "run"
"""

from __future__ import annotations

from typing import Any

MISSING = object()  # what `lookup` returns for a key the evidence does not hold


def _ci_get(mapping: Any, name: str) -> Any:
    if not isinstance(mapping, dict):
        return MISSING
    if name in mapping:
        return mapping[name]
    low = name.lower()
    for k, v in mapping.items():
        if str(k).lower() == low:
            return v
    return MISSING


def lookup(evidence: dict[str, Any], key: str) -> Any:
    """Value of `key` in the evidence: a dotted path (`shape.N`), or a bare name looked up at the top
    level and then in `shape` and `tile` (case-insensitive). `MISSING` when absent."""
    if "." in key:
        cur: Any = evidence
        for part in key.split("."):
            cur = _ci_get(cur, part)
            if cur is MISSING:
                return MISSING
        return cur
    for where in (evidence, evidence.get("shape"), evidence.get("tile")):
        value = _ci_get(where, key)
        if value is not MISSING:
            return value
    return MISSING


def number(value: Any) -> float | None:
    """A real number from the evidence (bools and non-numbers: None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def herd_dim(evidence: dict[str, Any], name: str, index: int) -> Any:
    """A herd dimension: `name` (herd_m / herd_n) if the evidence has it, else `herd[index]`; MISSING otherwise."""
    value = lookup(evidence, name)
    if value is not MISSING:
        return value
    herd = evidence.get("herd")
    if isinstance(herd, (list, tuple)) and len(herd) > index:
        return herd[index]
    return MISSING
