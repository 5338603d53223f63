"""The NPU2 figures the performance gates decide on (Phases 4-6) and the evaluator recomputes: the model's
prediction of a deployment's dispatch plan at the compiled prefill length and the modelled decode context,
under the deployment's switches and weight format (`npu_kernels.perf.q4nx.WEIGHTS`: bf16, or a 4-bit deployment's
q4nx-host / q4nx-device). Plain functions of (config, switches, weights): any backend, the mlir-air stand-in
and the evaluator call the same ones.

A deployment's switch dict names a switch applied on the decode path (Phase 5) `decode:<switch>` and one
applied on the prefill path (Phase 4) by its bare name (`npu_kernels.perf.dispatch.SWITCHES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npu_kernels.model.config import ModelConfig, bounded_length
from npu_kernels.perf.dispatch import SWITCHES
from npu_kernels.perf.predict import Prediction
from npu_kernels.perf.q4nx import predict_weights

DECODE = "decode:"  # a switch applied to the decode path (Phase 5) is recorded as "decode:<switch>"
NPU2_PREFILL_SEQ = 2048  # the compiled prefill length the modelled figure is taken at (docs/numerics.md)
NPU2_DECODE_CTX = 128  # context length of the modelled decode step (the Llama-3.2-1B profile's assumption)


def path_switches(switches: Mapping[str, bool], path: str) -> dict[str, bool]:
    """The dispatch switches in force on `path` ("prefill": Phase 4's, "decode": Phase 5's) of a deployment's
    switch dict."""
    prefix = DECODE if path == "decode" else ""
    return {k: bool(switches.get(prefix + k, False)) for k in SWITCHES}


def build_seq(config: ModelConfig) -> int:
    """The compiled prefill length of `config`'s deployment: NPU2_PREFILL_SEQ, cut to the model's context window
    (a 512-context model is built, planned and timed at 512; npu_kernels.model.config.bounded_length)."""
    return bounded_length(config, NPU2_PREFILL_SEQ)


def decode_ctx(config: ModelConfig) -> int:
    """The modelled decode context of `config`'s deployment: NPU2_DECODE_CTX, cut to the model's context window."""
    return bounded_length(config, NPU2_DECODE_CTX)


def npu2_prediction(config: ModelConfig, switches: dict[str, bool], weights: str = "bf16") -> Prediction:
    """The NPU2 performance model's prediction the gates decide on: prefill at the compiled seq, decode at the
    modelled context (both within the model's context window), under `switches` (one path's; the evaluator
    recomputes recorded figures with this call)."""
    return predict_weights(config, weights, seq=build_seq(config), switches=switches, ctx=decode_ctx(config))


def per_elf(p: Prediction, path: str) -> dict[str, dict[str, Any]]:
    """The prediction's per-ELF figures of one path ("prefill" / "decode"), keyed by ELF name."""
    return {k.split(":", 1)[1]: v for k, v in p.per_elf.items() if k.startswith(path + ":")}


def npu2_figures(config: ModelConfig, switches: Mapping[str, bool], weights: str = "bf16") -> dict[str, Any]:
    """Modelled NPU2 TTFT (prefill at the compiled seq + LM head) and decode speed, with the per-ELF breakdown
    of each path under its own switches (what Phase 6 records)."""
    pre = npu2_prediction(config, path_switches(switches, "prefill"), weights)
    dec = npu2_prediction(config, path_switches(switches, "decode"), weights)
    return {"source": "modelled-npu2", "seq": pre.seq, "ctx": dec.ctx, "ttft_s": pre.ttft_s, "prefill_s": pre.prefill_s,
            "ms_per_token": dec.ms_per_token, "tokens_per_s": dec.decode_tokens_per_s,
            "prefill_calls_per_layer": pre.prefill_calls_per_layer, "decode_calls_per_layer": dec.decode_calls_per_layer,
            "per_elf": {"prefill": per_elf(pre, "prefill"), "decode": per_elf(dec, "decode")},
            "switches": {"prefill": pre.switches, "decode": dec.switches},
            **({"weights": weights} if weights != "bf16" else {})}
