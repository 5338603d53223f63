"""Host-side and XRT-call constants, each derived from one figure of the Llama-3.2-1B profile.

The profile (profile_llama32_1b.toml, mlir-air llama32_1b/docs/profile.md) is the only end-to-end
calibration source. Every constant is one measured figure divided by the amount of work the dispatch plan
says the profiled deployment did (all switches on, seq 2048), so each keeps a physical unit:

  bo_write_bps      host -> BO write rate (map + memcpy + sync TO_DEVICE): profiled BO-write total 46 ms over
                    the WRITE bytes of the 49 prefill calls (profile.md:144).
  bo_read_bps       BO read rate (sync FROM_DEVICE + zero-copy view): 5 ms over the READ bytes (profile.md:144).
  strided_copy_bps  host strided copy (seq-first -> cache / head-first layouts): kv_cache_extract, 1.1 ms per
                    layer for K and V (profile.md:137); also used for the head-first seq<->head transpose.
  embed_bps         embedding gather: 5.8 ms for seq x E bf16 rows (profile.md:136).
  final_rmsnorm_s   the one-row CPU RMSNorm before the LM head, 3.1 ms (profile.md:138).
  py_per_layer_s    Python/numpy scheduling per prefill layer, 125 ms / 16 (profile.md:109).
  decode_cpu_layer_s  CPU decode work per layer (attention over the KV cache, RMSNorm, host): 5 ms / 16
                    (profile.md:220), taken at the profile's decode context; the context-dependent part is
                    the KV-cache stream at bo_write_bps (host memory rate), so longer contexts cost more.
  decode_glue_s     M=1 glue on the CPU in split-FFN decodes, 0.13 ms per layer (llms/README.md:84 - prose
                    about the dispatch rule, not the held-out performance table).
  xrt_call_s        fixed cost of one XRT call (run start + wait, load_and_run bookkeeping): least squares, on
                    relative error, of the 7 profiled per-call times (profile.md:125-128, 217-219) minus their
                    modelled BO write + NPU run + BO read. One parameter, fitted once.
PROFILE_DECODE_CTX = 128 is an assumption: the profile does not state the decode context (its 100 tokens
follow a short prompt and drift < 1%), so the fixed part is taken at 128 positions.
"""

from __future__ import annotations

import functools

from kernels.model.config import ModelConfig
from kernels.perf.anchors import profile
from kernels.perf.cost import call_cost
from kernels.perf.dispatch import dispatch_plan

PROFILE_DECODE_CTX = 128
LLAMA32_1B = ModelConfig(n_layers=16, emb_dim=2048, n_heads=32, n_kv_heads=8, head_dim=64, hidden_dim=8192,
                         vocab_size=128256, rope_theta=500000.0, tie_word_embeddings=True)


def _sum(d: dict) -> int:
    return sum(d.values())


@functools.lru_cache(maxsize=1)
def host_constants() -> dict[str, float]:
    """The constants of the module docstring (seconds, bytes per second), computed once."""
    p = profile()
    plan = dispatch_plan(LLAMA32_1B, None, 2048, PROFILE_DECODE_CTX)
    L = plan.n_layers
    calls = plan.prefill_layer
    write = L * sum(_sum(c.write) for c in calls) + _sum(plan.lm_head.write)
    read = L * sum(_sum(c.read) for c in calls) + _sum(plan.lm_head.read)
    kv = next(o.nbytes for o in plan.prefill_host_layer if o.name == "kv_cache_extract")
    embed = next(o.nbytes for o in plan.prefill_once if o.name == "embed_lookup")
    h = {
        "bo_write_bps": write / (p["xrt_totals_ms"]["bo_write"] * 1e-3),
        "bo_read_bps": read / (p["xrt_totals_ms"]["bo_read"] * 1e-3),
        "strided_copy_bps": kv / (p["host_ops_ms"]["kv_cache_extract"] * 1e-3),
        "embed_bps": embed / (p["host_ops_ms"]["embed_lookup"] * 1e-3),
        "final_rmsnorm_s": p["host_ops_ms"]["final_rms_norm"] * 1e-3,
        "py_per_layer_s": p["python_scheduling_prefill_s"]["value"] / L,
        "decode_glue_s": p["decode_glue_ms"]["value"] * 1e-3,
    }
    dkv = next(o.nbytes for o in plan.decode_host_layer if o.kind == "decode_attention")
    h["decode_cpu_layer_s"] = p["decode_cpu_ms"]["value"] * 1e-3 / L - dkv / h["bo_write_bps"]
    h["xrt_call_s"] = 0.0
    h["xrt_call_s"] = _fit_xrt_call(plan, h)
    return h


def _fit_xrt_call(plan, h: dict[str, float]) -> float:
    p = profile()
    measured = {**{f"prefill:{k}": v for k, v in p["prefill_per_call_ms"].items() if k != "src"},
                **{f"decode:{k}": v for k, v in p["decode_per_call_ms"].items() if k != "src"}}
    calls = {f"prefill:{c.elf}": c for c in plan.prefill_layer} | {f"decode:{c.elf}": c for c in plan.decode_layer}
    calls["prefill:lm_head_gemv"] = calls["decode:lm_head_gemv"] = plan.lm_head
    num = den = 0.0
    for key, m_ms in measured.items():
        m = m_ms * 1e-3
        pred = call_cost(calls[key], plan.switches, h)["total_s"]
        num += (m - pred) / m ** 2
        den += 1.0 / m ** 2
    return max(0.0, num / den)
