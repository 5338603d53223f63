"""`InProcessBackend`: the `ModelBackend` (npu_kernels.backends.base) of the decoder pipeline built from leaf kernels
(`npu_kernels.model.pipeline`) on the emulated or torch executor, against HF transformers bf16
(`npu_kernels.model.hf_reference`), in this process."""

from __future__ import annotations

import time

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from npu_kernels.backends.base import IntegratedRun, Measurement, ModelBackend, Npu2Figures
from npu_kernels.numerics.executors import make_executor
from npu_kernels.model.features.short_conv import carried_state_check
from npu_kernels.model.compare import bisect_block, block_gate, block_kernel_order, diagnose_layers, token_gate
from npu_kernels.model.config import ModelConfig
from npu_kernels.model.hf_reference import HfRunner, load_tokenizer
from npu_kernels.model.faults import WEIGHT_FAULTS, build_pipeline, bundle_dequantiser
from npu_kernels.model.q4nx_bundle import BUNDLE_FILE, host_dequantised_weights, is_quantised_folder
from npu_kernels.model.q4nx_device import decode_weights
from npu_kernels.model.options import SWITCHES as PIPELINE_SWITCHES
from npu_kernels.model.options import PipelineOptions
from npu_kernels.model.prompts import Prompt, canonical_tokens, mlir_air_prompts, prompts_for
from npu_kernels.model.weights import bf16_checkpoint, load_weights
from npu_kernels.perf.curve import context_window, npu2_curve
from npu_kernels.perf.dispatch import SWITCHES
from npu_kernels.perf.q4nx import check_weights
from npu_kernels.perf.figures import (
    DECODE,
    npu2_figures,
    npu2_prediction,
    path_switches,
    per_elf,
)
from npu_kernels.thresholds import BLOCK_REMEASURE_ATOL, TOKEN_GATE_STEPS, TOKEN_GATE_TOP_K

__all__ = ["InProcessBackend", "Measurement", "ModelBackend", "hf_reference", "pipeline_executor"]


# --- the in-process pipeline ------------------------------------------------------------------------------

@lru_cache(maxsize=4)
def _weights(folder: str, config: ModelConfig, faults: frozenset[str] = frozenset(), share_reference: bool = True):
    """A bf16 folder's weights; a 4-bit deployment's reference folder holds its bundle, which the pipeline
    dequantises on the host at load (npu_kernels.model.q4nx_bundle; a weights fault wraps the dequantisation)."""
    if is_quantised_folder(folder):
        return host_dequantised_weights(folder, config, bundle_dequantiser(faults & WEIGHT_FAULTS))
    # the HF reference of a BF16 checkpoint holds the checkpoint's bits: the pipeline shares them, so the
    # process holds the weights once in bf16 (issue 48 item 3; the gates load the reference in any case). A process
    # that never runs the reference (the twin's stand-in for the NPU) reads the bits from the file instead: loading
    # transformers' model in each of a twin deployment's ~85 stand-in programs made it 3x slower.
    shared = hf_reference(folder).bf16_bits() if share_reference and bf16_checkpoint(folder) else None
    return load_weights(folder, config, shared)


@lru_cache(maxsize=2)
def _decode_weights(folder: str, config: ModelConfig):
    """An on-device 4-bit deployment's decode weights: its bundle re-quantised (npu_kernels.model.q4nx_device)."""
    return decode_weights(Path(folder) / BUNDLE_FILE, config)


@lru_cache(maxsize=4)
def hf_reference(folder: str):
    """The HF transformers bf16 reference of a model folder (one per process and folder)."""
    return HfRunner(folder)


def pipeline_executor(executor: str, target: str = "npu2"):
    """The executor a model pipeline runs on. The emulated one sums its GEMVs in BLAS order: mv.cc's lane order
    (the kernel runs' default) made SmolLM2's Phase 3 --full 2.1x slower (41.6 s -> 88.1 s) for a one-ulp move
    on ~1 output in 2000; `describe()` records the choice."""
    return make_executor(executor, target=target, **({"gemv_order": "blas"} if executor == "emulated" else {}))


class InProcessBackend:
    """The decoder pipeline on an emulated / torch executor, judged against HF bf16 in this process."""

    switches_keep_numbers = True  # PipelineOptions' switches change the dispatch, never the numbers
    hardware = False
    runs_q4nx_device = True  # npu_kernels.model.pipeline_q4, for weights "q4nx-device"
    runs_speculation = True  # a drafter's speculative loop (npu_kernels.model.speculative) on the same executor
    can_bisect = True  # the pipeline swaps its kernels to FP32 one at a time (npu_kernels.model.compare.bisect_block)
    block_remeasure_atol = BLOCK_REMEASURE_ATOL  # a re-run differs by bf16 flips only

    def __init__(self, model_path: str | Path, config: ModelConfig, executor: str, target: str = "npu2",
                 switches: dict[str, bool] | None = None, faults: frozenset[str] = frozenset(),
                 weights: str = "bf16", *, share_reference: bool = True) -> None:
        """`share_reference`: the pipeline holds the HF reference's own bf16 parameters (its process runs the
        reference anyway); False reads them from the checkpoint (a process that never runs the reference)."""
        self.model_path, self.config, self.name, self.target = str(model_path), config, executor, target
        self._share_reference = share_reference
        known = {*SWITCHES, *(DECODE + k for k in SWITCHES)}
        self._switches = {k: bool(v) for k, v in (switches or {}).items() if k in known}
        self._faults = frozenset(faults)
        # the in-process pipeline has one code path per switch for prefill and decode alike: a switch applied on
        # either path turns it on (the token gate then checks those numerics); dispatch-only switches have none
        numerics = {k: self._switches.get(k, False) or self._switches.get(DECODE + k, False) for k in PIPELINE_SWITCHES}
        self.weights = check_weights(weights)  # what the NPU2 model prices (npu_kernels.perf.q4nx.WEIGHTS)
        decode = _decode_weights(self.model_path, config) if weights == "q4nx-device" else None
        held = _weights(self.model_path, config, self._faults & WEIGHT_FAULTS, share_reference)
        self.pipeline = build_pipeline(held, config, pipeline_executor(executor, target),
                                       PipelineOptions(**numerics, faults=self._faults), decode)

    @property
    def options(self) -> dict[str, Any]:
        """The pipeline's options plus every dispatch switch in force (prefill and "decode:" ones)."""
        return {**self.pipeline.options.to_dict(), "switches": dict(sorted(self._switches.items()))}

    def with_options(self, switches: dict[str, bool], faults: frozenset[str] = frozenset()) -> "InProcessBackend":
        return InProcessBackend(self.model_path, self.config, self.name, self.target, switches, faults, self.weights,
                                share_reference=self._share_reference)

    @property
    def reference(self):
        return hf_reference(self.model_path)

    def tokenizer(self):
        """The folder's tokenizer, without loading the HF model (npu_kernels.model.hf_reference.load_tokenizer)."""
        return load_tokenizer(self.model_path)

    def _canonical(self) -> list[int]:
        return canonical_tokens(self.tokenizer())

    # -- Phase 2 --

    def block_gate(self, layer: int = 0):
        """Layer `layer`'s output vs HF's on the canonical prompt (past layer 0: after the layers before it)."""
        tokens = self._canonical()
        ours = self.pipeline.prefill(tokens).layer_intermediates[layer]["ffn_out"]
        ref = self.reference.prefill(tokens).layer_intermediates[layer]["ffn_out"]
        return block_gate(ours, ref, self.config.head_dim, n_positions=len(tokens), layer=layer, executor=self.name)

    def conv_state_check(self) -> dict[str, Any]:
        """The carried convolution state after the canonical prompt's prefill vs HF's conv cache, then one decode
        step (npu_kernels.model.features.short_conv): the fields of a ConvStateChecked."""
        tokens = self._canonical()
        check = carried_state_check(self.pipeline, self.reference, tokens)
        return {"executor": self.name, "n_positions": len(tokens), **check.to_json()}

    def bisect_block(self):
        tokens = self._canonical()
        ref = self.reference.prefill(tokens).layer_intermediates[0]["ffn_out"]
        return bisect_block(self.pipeline.with_fp32_kernels, tokens, ref, self.config.head_dim,
                            order=block_kernel_order(self.config))

    # -- Phases 3, 6, 7 --

    def prompts(self, full: bool) -> list[Prompt]:
        # an mlir-air checkout's own prompt files when MLIR_AIR_DIR has them (comparable with its make verify)
        return mlir_air_prompts(self.tokenizer(), full) or prompts_for(self.tokenizer(), full=full)

    def token_gate(self, prompt, context: str):
        return token_gate(self.pipeline, self.reference, prompt.tokens, n_tokens=TOKEN_GATE_STEPS, k=TOKEN_GATE_TOP_K,
                          prompt_index=prompt.index, prompt=prompt.text, tokenizer=self.tokenizer(), context=context)

    def diagnose(self) -> list[dict[str, Any]]:
        tokens = self._canonical()
        return diagnose_layers(self.pipeline.prefill(tokens), self.reference.prefill(tokens), executor=self.name)

    # -- Phases 4, 5 --
    #
    # The figure a gate decides on is the modelled NPU2 time of the deployment's dispatch plan under the switches
    # in force (`npu_kernels.perf`): the same plan always gives the same figure, whatever this machine is doing.
    # The emulator's own wall time for one run is recorded beside it, as information only.

    def predict(self, path: str):
        """The NPU2 model's prediction of `path` ("prefill" / "decode") under that path's switches."""
        return npu2_prediction(self.config, path_switches(self._switches, path), self.weights)

    def npu2_figures(self) -> Npu2Figures:
        """Modelled NPU2 TTFT and decode speed with the per-ELF breakdown of each path (Phase 6):
        `npu_kernels.perf.figures.npu2_figures` under this backend's switches, and the curves against prefill length
        and decode context (`npu_kernels.perf.curve`, bounded by the model folder's context window)."""
        curve = npu2_curve(self.config, path_switches(self._switches, "prefill"), path_switches(self._switches, "decode"),
                           max_positions=context_window(self.model_path), weights=self.weights)
        return Npu2Figures.of(npu2_figures(self.config, self._switches, self.weights), curve)

    def _prompt(self, length: int) -> np.ndarray:
        """A fixed prompt of `length` tokens: the canonical prompt repeated (deterministic)."""
        base = self._canonical()
        reps = -(-length // len(base))
        return np.asarray((base * reps)[:length], np.int64)

    def measure_prefill(self, info_tokens: int | None) -> Measurement:
        p = self.predict("prefill")
        detail: dict[str, Any] = {"switches": p.switches, "per_elf": per_elf(p, "prefill"),
                                  "totals_ms": p.totals["prefill"], "calls_per_layer": p.prefill_calls_per_layer}
        if info_tokens:
            tokens = self._prompt(info_tokens)
            t0 = time.perf_counter()
            self.pipeline.prefill(tokens)
            detail.update(emulator_wall_s=time.perf_counter() - t0, emulator_wall_tokens=int(info_tokens))
        return Measurement("prefill_s", p.prefill_s, [p.prefill_s], p.seq, "modelled-npu2", 0, detail)

    def measure_decode(self, info_tokens: int | None, steps: int) -> Measurement:
        p = self.predict("decode")
        per_token = p.ms_per_token / 1e3
        detail: dict[str, Any] = {"switches": p.switches, "per_elf": per_elf(p, "decode"),
                                  "totals_ms": p.totals["decode"], "calls_per_layer": p.decode_calls_per_layer}
        if info_tokens:
            tokens = self._prompt(info_tokens)
            tok, pos = self.pipeline.prefill(tokens).top1_token, len(tokens)
            t0 = time.perf_counter()
            for i in range(steps):
                tok = self.pipeline.decode_step(tok, pos + i).top1_token
            detail.update(emulator_wall_s_per_token=(time.perf_counter() - t0) / steps,
                          emulator_wall_context=int(info_tokens), decode_steps=steps)
        return Measurement("s_per_token", per_token, [per_token], p.ctx, "modelled-npu2", 0, detail)

    # -- Phase 6 --

    def integrated_run(self, tokens: np.ndarray, n_tokens: int) -> IntegratedRun:
        """Setup (outside the timed region), then prefill + greedy decode, timed; with a per-stage profile."""
        pipe = self.pipeline
        t0 = time.perf_counter()
        pipe.prefill(tokens[: min(len(tokens), 8)])  # setup: weights converted/quantised, caches built
        setup_s = time.perf_counter() - t0
        pipe.reset_timers()
        if hasattr(pipe.k, "timer"):
            pipe.k.timer.reset()
        t0 = time.perf_counter()
        rec = pipe.prefill(tokens)
        prefill_s = time.perf_counter() - t0
        out = [rec.top1_token]
        step_s = []
        pos = len(tokens)
        for i in range(n_tokens - 1):
            t1 = time.perf_counter()
            out.append(pipe.decode_step(out[-1], pos + i).top1_token)
            step_s.append(time.perf_counter() - t1)
        decode_total = sum(step_s)
        profile = pipe.profile()
        stages = profile.get("stages", {})
        lm_head = sum(v["seconds"] for k, v in stages.items() if "lm_head" in k)
        top = sorted(profile.get("kernels", {}).items(), key=lambda kv: -kv[1]["seconds"])[:5]
        return IntegratedRun(
            tokens=out, setup_s=setup_s, prefill_s=prefill_s, ttft_s=prefill_s,  # token 1 = the prefill's argmax
            ms_per_token=(decode_total / len(step_s) * 1e3) if step_s else None,
            tokens_per_s=(len(step_s) / decode_total) if decode_total > 0 else None,
            profile={"setup_s": setup_s, "prefill_s": prefill_s, "decode_s_per_token": step_s,
                     "lm_head_s": lm_head, "top_kernels": [{"kernel": k, **v} for k, v in top], "stages": stages},
            pipeline=self.options,
        )
