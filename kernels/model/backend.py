"""The seam for whole-model work: what Phases 2-7 ask of a model, whoever runs it.

`ModelBackend` is the protocol the phase gates (`handlers.gates`), `ledger run / verify-model / diagnose` and
the evaluator talk to. Its operations are the ones the recipe needs: the layer-0 block comparison on the
canonical prompt (and a bisect when it fails), the token gate over a prompt set, the per-layer diagnosis, a
prefill / decode performance measurement, the integrated runner of Phase 6, and a copy of itself with an
optimisation switched on (`with_options`). Every result carries the numbers and thresholds of its event.

`InProcessBackend` implements it with the decoder pipeline built from leaf kernels (`kernels.model.pipeline`)
on the emulated or torch executor, against HF transformers bf16 (`kernels.model.hf_reference`). A backend
for an mlir-air model directory (its `make verify / diagnosis / profile`) implements the same protocol.
`make_backend` is the one place that chooses.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from kernels.model.config import ModelConfig
from kernels.model.pipeline import FAULTS, SWITCHES

__all__ = ["FAULTS", "SWITCHES", "BackendUnavailable", "InProcessBackend", "Measurement", "ModelBackend", "make_backend"]
from kernels.thresholds import TOKEN_GATE_STEPS, TOKEN_GATE_TOP_K


class BackendUnavailable(RuntimeError):
    """Raised when no model backend exists for a deployment's executor (the message says what would)."""


@dataclass(frozen=True)
class Measurement:
    """One performance figure of a backend: the median of its samples, in seconds (per token for decode)."""

    metric: str  # "prefill_s" | "s_per_token"
    median_s: float
    samples_s: list[float]
    n_tokens: int
    source: str  # how the figure was obtained: "wall" (this machine's clock), "modelled-npu2", "measured-npu2"
    warmup: int = 0
    detail: dict[str, Any] = field(default_factory=dict)


class ModelBackend(Protocol):
    name: str  # the executor the numbers come from

    @property
    def options(self) -> dict[str, Any]: ...  # the pipeline options in force (switches, faults)

    def with_options(self, switches: dict[str, bool], faults: frozenset[str] = frozenset()) -> "ModelBackend": ...

    def tokenizer(self) -> Any: ...

    def block_gate(self):  # -> kernels.model.compare.BlockResult on the canonical prompt
        ...

    def bisect_block(self):  # -> kernels.model.compare.BisectResult
        ...

    def prompts(self, full: bool) -> list: ...  # kernels.model.prompts.Prompt

    def token_gate(self, prompt, context: str):  # -> kernels.model.compare.TokenGateResult
        ...

    def diagnose(self) -> list[dict[str, Any]]: ...  # LayerDiagnosed fields per layer

    def measure_prefill(self, n_tokens: int) -> Measurement: ...

    def measure_decode(self, n_context: int, steps: int) -> Measurement: ...

    def integrated_run(self, tokens: np.ndarray, n_tokens: int) -> dict[str, Any]: ...


# --- the in-process pipeline ------------------------------------------------------------------------------

WARMUP, RUNS = 5, 20  # wall-clock measurements: untimed warm-up runs, then timed runs (median)


@lru_cache(maxsize=4)
def _weights(folder: str, config: ModelConfig):
    from kernels.model.weights import load_weights

    return load_weights(folder, config)


@lru_cache(maxsize=4)
def hf_reference(folder: str):
    """The HF transformers bf16 reference of a model folder (one per process and folder)."""
    from kernels.model.hf_reference import HfRunner

    return HfRunner(folder)


def _median_of(run: Callable[[], float], warmup: int, runs: int) -> tuple[float, list[float]]:
    for _ in range(warmup):
        run()
    samples = [run() for _ in range(runs)]
    return statistics.median(samples), samples


class InProcessBackend:
    """The decoder pipeline on an emulated / torch executor, judged against HF bf16 in this process."""

    def __init__(self, model_path: str | Path, config: ModelConfig, executor: str, target: str = "npu2",
                 switches: dict[str, bool] | None = None, faults: frozenset[str] = frozenset()) -> None:
        from kernels.executors import make_executor
        from kernels.model.pipeline import NpuPipeline, PipelineOptions

        self.model_path, self.config, self.name, self.target = str(model_path), config, executor, target
        self._switches = {k: bool((switches or {}).get(k, False)) for k in SWITCHES}
        self._faults = frozenset(faults)
        self.pipeline = NpuPipeline(_weights(self.model_path, config), config, make_executor(executor, target=target),
                                    PipelineOptions(**self._switches, faults=self._faults))

    @property
    def options(self) -> dict[str, Any]:
        return self.pipeline.options.to_dict()

    def with_options(self, switches: dict[str, bool], faults: frozenset[str] = frozenset()) -> "InProcessBackend":
        return InProcessBackend(self.model_path, self.config, self.name, self.target, switches, faults)

    @property
    def reference(self):
        return hf_reference(self.model_path)

    def tokenizer(self):
        return self.reference.tokenizer

    def _canonical(self) -> list[int]:
        from kernels.model.prompts import canonical_tokens

        return canonical_tokens(self.tokenizer())

    # -- Phase 2 --

    def block_gate(self):
        from kernels.model.compare import block_gate

        tokens = self._canonical()
        ours = self.pipeline.prefill(tokens).layer_intermediates[0]["ffn_out"]
        ref = self.reference.prefill(tokens).layer_intermediates[0]["ffn_out"]
        return block_gate(ours, ref, self.config.head_dim, n_positions=len(tokens), executor=self.name)

    def bisect_block(self):
        from kernels.model.compare import bisect_block

        tokens = self._canonical()
        ref = self.reference.prefill(tokens).layer_intermediates[0]["ffn_out"]
        return bisect_block(self.pipeline.with_fp32_kernels, tokens, ref, self.config.head_dim)

    # -- Phases 3, 6, 7 --

    def prompts(self, full: bool) -> list:
        from kernels.model.prompts import prompts_for

        return prompts_for(self.tokenizer(), full=full)

    def token_gate(self, prompt, context: str):
        from kernels.model.compare import token_gate

        return token_gate(self.pipeline, self.reference, prompt.tokens, n_tokens=TOKEN_GATE_STEPS, k=TOKEN_GATE_TOP_K,
                          prompt_index=prompt.index, prompt=prompt.text, tokenizer=self.tokenizer(), context=context)

    def diagnose(self) -> list[dict[str, Any]]:
        from kernels.model.compare import diagnose_layers

        tokens = self._canonical()
        return diagnose_layers(self.pipeline.prefill(tokens), self.reference.prefill(tokens), executor=self.name)

    # -- Phases 4, 5 --

    def _prompt(self, length: int) -> np.ndarray:
        """A fixed prompt of `length` tokens: the canonical prompt repeated (deterministic)."""
        base = self._canonical()
        reps = -(-length // len(base))
        return np.asarray((base * reps)[:length], np.int64)

    def measure_prefill(self, n_tokens: int, warmup: int = WARMUP, runs: int = RUNS) -> Measurement:
        tokens = self._prompt(n_tokens)

        def run() -> float:
            t0 = time.perf_counter()
            self.pipeline.prefill(tokens)
            return time.perf_counter() - t0

        median, samples = _median_of(run, warmup, runs)
        return Measurement("prefill_s", median, samples, n_tokens, "wall", warmup)

    def measure_decode(self, n_context: int, steps: int, warmup: int = WARMUP, runs: int = RUNS) -> Measurement:
        tokens = self._prompt(n_context)

        def run() -> float:
            rec = self.pipeline.prefill(tokens)
            tok, pos = rec.top1_token, len(tokens)
            t0 = time.perf_counter()
            for i in range(steps):
                tok = self.pipeline.decode_step(tok, pos + i).top1_token
            return (time.perf_counter() - t0) / steps

        median, samples = _median_of(run, warmup, runs)
        return Measurement("s_per_token", median, samples, n_context, "wall", warmup, {"decode_steps": steps})

    # -- Phase 6 --

    def integrated_run(self, tokens: np.ndarray, n_tokens: int) -> dict[str, Any]:
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
        return {
            "tokens": out, "setup_s": setup_s, "prefill_s": prefill_s, "ttft_s": prefill_s,  # token 1 = prefill argmax
            "ms_per_token": (decode_total / len(step_s) * 1e3) if step_s else None,
            "tokens_per_s": (len(step_s) / decode_total) if decode_total > 0 else None,
            "profile": {"setup_s": setup_s, "prefill_s": prefill_s, "decode_s_per_token": step_s,
                        "lm_head_s": lm_head, "top_kernels": [{"kernel": k, **v} for k, v in top], "stages": stages},
            "pipeline": pipe.options.to_dict(),
        }


def make_backend(executor: str, model_path: str | Path, config: ModelConfig, *, target: str = "npu2",
                 switches: dict[str, bool] | None = None, faults: frozenset[str] = frozenset()) -> ModelBackend:
    """The model backend of a deployment's executor."""
    if executor == "mlir-air":
        raise BackendUnavailable(
            "the mlir-air executor has no model backend yet: Phases 2-7 on hardware run an mlir-air model "
            "directory's `make verify` / `make diagnosis` / `make profile`; the in-process pipeline runs on "
            "emulated or torch")
    return InProcessBackend(model_path, config, executor, target, switches, faults)
