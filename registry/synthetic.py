"""Build `RecordedEvent`s without a database: for tests and the registry benchmark.

`record(items)` stamps (stream_id, event[, event_id]) items with seq, per-stream version and a
`recorded_at` a fixed step apart, storing each payload through the ledger's canonical JSON exactly as
the recorder does. `synthetic_kernel_events(n)` makes `n` realistic `KernelVerified` items over many
kernels, shapes, deployments, executors and verdicts — deterministic for a given seed.
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta, timezone
from typing import Iterable, Sequence

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.perf.constants import PEAK_FLOPS
from npu_kernels.numerics.spec import ShapeError
from npu_kernels.perf.evidence import EvidenceError, output_elements
from npu_kernels.thresholds import DDR_BANDWIDTH_BYTES_S
from ledger import events as ev
from ledger.canonical import dumps, loads
from ledger.events import Event, KernelVerified
from ledger.record import RecordedEvent
from ledger.streams import deployment_stream
from registry.catalog import gemm_lookup_methods

T0 = datetime(2026, 6, 18, 9, 0, 0, tzinfo=timezone.utc)


# the device and toolchain a synthetic harness row claims (npu_kernels.provenance counts such a row as npu2-measured, so
# the benchmark folds a registry with NPU2 rows in it); synthetic ledgers are bench data, never a workspace's
SYNTHETIC_NPU2 = {"device": "synthetic NPU2 (bench data)",
                  "toolchain": {"executor": "mlir-air", "mlir_air_commit": "synthetic", "xrt_smi": "synthetic"}}

def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record(
    items: Iterable[tuple], start_seq: int = 1, t0: datetime = T0, step: timedelta = timedelta(minutes=1)
) -> list[RecordedEvent]:
    """RecordedEvents for (stream_id, event) or (stream_id, event, event_id, [recorded_at]) items, in order."""
    out: list[RecordedEvent] = []
    versions: dict[str, int] = {}
    for i, item in enumerate(items):
        stream_id, event = item[0], item[1]
        event_id = item[2] if len(item) > 2 and item[2] else str(uuid.UUID(int=start_seq + i))
        at = item[3] if len(item) > 3 else stamp(t0 + step * i)
        versions[stream_id] = versions.get(stream_id, 0) + 1
        payload = loads(dumps(event.to_payload()))
        out.append(RecordedEvent(start_seq + i, stream_id, versions[stream_id], event_id, event.type_name, payload, at))
    return out


# (emb, n_heads, n_kv_heads, head_dim, hidden) of realistic decoder-only models
_MODELS = {
    "smollm2_135m_instruct": (576, 9, 3, 64, 1536),
    "llama32_1b": (2048, 32, 8, 64, 8192),
    "qwen25_05b": (896, 14, 2, 64, 4864),
    "qwen3_06b": (1024, 16, 8, 128, 3072),
    "llama32_3b": (3072, 24, 8, 128, 8192),
    "qwen25_15b": (1536, 12, 2, 128, 8960),
    "smollm2_360m": (960, 15, 5, 64, 2560),
    "qwen3_17b": (2048, 16, 8, 128, 6144),
}


def _kernel_rows(emb: int, h: int, hkv: int, d: int, f: int, seq: int) -> list[tuple[str, dict, str, str, str]]:
    """(kernel, shape, contract, role, stage) the model needs (docs/numerics.md 'Kernel x shape list')."""
    gemm = [("Q proj", seq, emb, h * d), ("K/V proj", seq, emb, hkv * d), ("O proj", seq, h * d, emb),
            ("Gate/Up proj", seq, emb, f), ("Down proj", seq, f, emb)]
    rows = [("gemm", {"M": m, "K": k, "N": n}, c, role, "prefill") for role, m, k, n in gemm
            for c in ("bf16-out-high", "bf16-out-low", "f32-out")]
    gemv = [("Q proj", h * d, emb), ("K/V proj", hkv * d, emb), ("O proj", emb, h * d), ("Gate/Up proj", f, emb),
            ("Down proj", emb, f), ("LM head partition", 16384, emb)]
    rows += [("gemv", {"M": m, "K": k}, "bf16", role, "decode") for role, m, k in gemv]
    rows += [
        ("rmsnorm", {"M": seq, "N": emb}, "bf16", "attn/ffn norm", "prefill"),
        ("rope", {"rows": h * seq, "head_dim": d}, "bf16", "Q rope", "prefill"),
        ("rope", {"rows": hkv * seq, "head_dim": d}, "bf16", "K rope", "prefill"),
        ("rope", {"rows": h, "head_dim": d}, "bf16", "Q rope", "decode"),
        ("flash_attention", {"lq": seq, "lk": seq, "dk": d, "heads": h, "kv_heads": hkv, "causal": True}, "bf16",
         "attention", "prefill"),
        ("eltwise_add", {"N": seq * emb}, "bf16", "residual add", "prefill"),
        ("silu_mul", {"N": seq * f}, "bf16", "SwiGLU", "prefill"),
    ]
    return rows


def _sizes(kernel: str, shape: dict) -> tuple[float, float, int | None]:
    """(FLOP, minimum DDR bytes, output elements) of a row; a shape in the registry's older spelling (FlashAttention's
    `heads` / `kv_heads`) is not the numerics catalog's: 2MKN-style FLOP, no bytes, no element count."""
    try:
        spec = get_spec(kernel)
        return spec.flops(shape), spec.bytes(shape), output_elements(kernel, shape)
    except (ShapeError, EvidenceError):
        return 2.0 * shape.get("M", 1) * shape.get("K", 1) * shape.get("N", 1), 0.0, None


def synthetic_kernel_events(n: int, seed: int = 0) -> list[tuple[str, KernelVerified]]:
    """`n` (stream_id, KernelVerified) items: deployments x variants x kernels x shapes, mixed evidence."""
    rng = random.Random(seed)
    pool: list[tuple[str, tuple]] = []
    for name, (emb, h, hkv, d, f) in _MODELS.items():
        for variant in range(4):  # four deployments per architecture (e.g. instruct/base, two seqs)
            seq = (2048, 1024, 512, 256)[variant]
            for row in _kernel_rows(emb, h, hkv, d, f, seq):
                pool.append((deployment_stream(f"{name}_v{variant}"), row))
    out: list[tuple[str, KernelVerified]] = []
    for i in range(n):
        stream, (kernel, shape, contract, role, stage) = pool[i % len(pool)]
        r = rng.random()
        executor, source = ("mlir-air", "harness") if r < 0.2 else (("torch", "torch") if r < 0.3 else ("emulated", "emulated"))
        passed = rng.random() > 0.05
        flops, moved, count = _sizes(kernel, shape)
        # a possible latency (npu_kernels.perf.evidence: under the peak and the DDR bound), 1.2x to 20x the floor
        floor_us = max(flops / PEAK_FLOPS["npu2"], moved / DDR_BANDWIDTH_BYTES_S["npu2"]) * 1e6
        latency = max(rng.uniform(50.0, 5000.0), floor_us * rng.uniform(1.2, 20.0))
        out.append((stream, KernelVerified(
            kernel=kernel, shape=shape, contract=contract, executor=executor, verdict="PASS" if passed else "FAIL",
            rtol=1.6e-2, atol=4e-3 if "low" in contract else 1.5e-3, mean_rel_L1=rng.uniform(1e-3, 2e-2),
            max_abs=rng.uniform(1e-4, 5e-2), max_rel=rng.uniform(1e-2, 1.0), mismatches=0 if passed else rng.randint(1, 50),
            n_elements=count,
            tile={"tile_m": 64, "tile_k_l2": 256, "tile_k_l1": 32, "tile_n": rng.choice((32, 64, 128))}
            if kernel == "gemm" else {"herd_x": 8, "tile_n": 4096},
            herd=[8, 4] if kernel == "gemm" else [8, 1], tiles_in_flight=32 if kernel == "gemm" else 8,
            tiles_target=32 if kernel in ("gemm", "flash_attention") else 8, latency_us=latency,
            gflops=flops / (latency * 1e3) if kernel in ("gemm", "gemv") else None, source=source, role=role,
            stage=stage,
            method=rng.choice(gemm_lookup_methods(contract)) if kernel == "gemm" and executor == "mlir-air" else "",
            provenance={"command": f"ledger kernel run {kernel}", "output_sha256": f"{i:064x}",
                        **(SYNTHETIC_NPU2 if source == "harness" else {})},
        )))
    return out


def deployment_items(name: str, events: Sequence[Event]) -> list[tuple[str, Event]]:
    return [(deployment_stream(name), e) for e in events]


def realistic_deployment(name: str = "smollm2_135m_instruct") -> list[tuple]:
    """A hand-built deployment history: phases 0-3 pass, phase 4 fails (triaged, blocker raised and resumed,
    then passes), kernels incl. one FAIL with a triage, a bisect, per-layer diagnosis, a lesson, an evaluation.

    Items are (stream_id, event[, event_id, recorded_at]) for `record`; seqs follow list order from 1.
    """
    s = deployment_stream(name)
    t = [T0 + timedelta(minutes=m) for m in range(0, 600, 3)]
    at = iter(stamp(x) for x in t)
    items: list[tuple] = []

    def add(event: Event) -> int:
        items.append((s, event, None, next(at)))
        return len(items)  # the seq it will get

    add(ev.DeploymentRequested(model_path="/models/smollm2-135m-instruct", name=name, executor="emulated",
                               hf_model_id="HuggingFaceTB/SmolLM2-135M-Instruct"))
    add(ev.ArchitectureAssessed(architecture="LlamaForCausalLM", in_scope=True,
                                features={"qkv_bias": False, "qk_norm": False, "tied_embeddings": True, "gqa_group": 3}))
    add(ev.PhaseStarted(phase=0, attempt=1))
    cfg = add(ev.ConfigResolved(n_layers=30, emb_dim=576, n_heads=9, n_kv_heads=3, head_dim=64, hidden_dim=1536,
                                vocab_size=49152, rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                                qkv_bias=False, qk_norm=False, architecture="LlamaForCausalLM"))
    add(ev.WeightsChecked(ok=True, n_tensors=272, expected=272))
    base = add(ev.ReferenceBaselineRecorded(
        prompt="What is the capital of France?", n_prompt_tokens=12, top1_token=330, top1_text=" The", top1_prob=0.41,
        entropy=2.3, logits_finite=True, logit_max=21.5, logit_min=-14.2, logit_mean=-1.1, logit_std=3.2,
        thresholds={"min_top1_prob": 0.01}, passed=True))
    add(ev.PhasePassed(phase=0, attempt=1, evidence_seqs=[cfg, base], summary="HF bf16 reference sane"))
    add(ev.PhaseStarted(phase=1, attempt=1))
    kernels = [
        ("gemm", {"M": 2048, "K": 576, "N": 576}, "bf16-out-high", "Q/O proj", 9.4e-3),
        ("gemm", {"M": 2048, "K": 576, "N": 192}, "bf16-out-high", "K/V proj", 9.3e-3),
        ("gemm", {"M": 2048, "K": 576, "N": 1536}, "bf16-out-high", "Gate/Up proj", 9.5e-3),
        ("gemv", {"M": 576, "K": 576}, "bf16", "decode Q/O proj", 2.1e-8),
        ("rmsnorm", {"M": 2048, "N": 576}, "bf16", "attn/ffn norm", 2.4e-3),
        ("rope", {"rows": 18432, "head_dim": 64}, "bf16", "Q rope", 2.8e-3),
        ("flash_attention", {"lq": 2048, "lk": 2048, "dk": 64, "heads": 9, "kv_heads": 3, "causal": True}, "bf16",
         "attention", 1.6e-2),
    ]
    kseqs = []
    for kernel, shape, contract, role, rel in kernels:
        kseqs.append(add(ev.KernelVerified(
            kernel=kernel, shape=shape, contract=contract, executor="emulated", verdict="PASS", rtol=1.6e-2,
            atol=1.5e-3 if kernel == "gemm" else 5e-2, mean_rel_L1=rel, max_abs=1e-3, max_rel=0.2, mismatches=0,
            n_elements=1000, tile={"tile_m": 64, "tile_k_l2": 192, "tile_k_l1": 32, "tile_n": 64} if kernel == "gemm" else {},
            herd=[8, 4] if kernel == "gemm" else None, tiles_in_flight=32 if kernel == "gemm" else 8,
            tiles_target=32 if kernel in ("gemm", "flash_attention") else 8,
            tile_justification="" if kernel != "flash_attention" else "heads-per-unroll 2 limits placement",
            latency_us=812.0, source="emulated", role=role, stage="decode" if kernel == "gemv" else "prefill")))
    bad = add(ev.KernelVerified(
        kernel="silu_mul", shape={"N": 3145728}, contract="bf16", executor="emulated", verdict="FAIL", rtol=1.6e-2,
        atol=8e-2, mean_rel_L1=3.1e-2, max_abs=0.5, max_rel=4.0, mismatches=12, n_elements=3145728, source="emulated",
        role="SwiGLU", stage="prefill", note="tanh approximation off by one ulp"))
    add(ev.FailureTriaged(subject_seq=bad, subject_type="KernelVerified", summary="activation precision",
                          matches=[{"rule_id": "K-SILU-TANH", "root_cause": "bf16 tanh chain", "remedy": "use the tanh LUT",
                                    "confidence": 0.8}]))
    add(ev.KernelVerified(
        kernel="silu_mul", shape={"N": 3145728}, contract="bf16", executor="emulated", verdict="PASS", rtol=1.6e-2,
        atol=8e-2, mean_rel_L1=1.0e-2, max_abs=0.06, max_rel=0.3, mismatches=0, n_elements=3145728, source="emulated",
        role="SwiGLU", stage="prefill"))
    add(ev.PhasePassed(phase=1, attempt=1, evidence_seqs=kseqs, summary="8/8 kernels PASS"))
    add(ev.PhaseStarted(phase=2, attempt=1))
    blk = add(ev.BlockValidated(
        layer=0, executor="emulated", n_positions=12, cosine=0.9981, per_position_min=0.9902, p5=0.991, median=0.998,
        max_abs=0.12, max_rel=0.5, nan_count=0, thresholds={"cosine": 0.99, "per_position_min": 0.99}, passed=True,
        bisect=[{"swapped": ["gemm"], "cosine": 0.9995, "per_position_min": 0.998},
                {"swapped": ["gemm", "flash_attention"], "cosine": 0.9999, "per_position_min": 0.9997}],
        culprit=None))
    add(ev.PhasePassed(phase=2, attempt=1, evidence_seqs=[blk], summary="layer-0 block cosine 0.9981"))
    add(ev.PhaseStarted(phase=3, attempt=1))
    gates = []
    for i, prompt in enumerate(("What is the capital of France?", "Write a haiku about the sea.")):
        gates.append(add(ev.TokenGateChecked(
            prompt_index=i, prompt=prompt, executor="emulated", n_tokens=32, passed=True,
            divergence_step=None if i == 0 else 14, agreed_prefix=32 if i == 0 else 14,
            chosen_ours=None if i == 0 else 1234, chosen_ref=None if i == 0 else 987, topk_ours=[] if i == 0 else [1234, 987, 5, 6, 7],
            topk_ref=[] if i == 0 else [987, 1234, 8, 9, 10], rank_ours_in_ref=None if i == 0 else 2,
            rank_ref_in_ours=None if i == 0 else 2, kl_divergence=0.0 if i == 0 else 0.013)))
    for layer in range(30):
        add(ev.LayerDiagnosed(layer=layer, executor="emulated", cos_min=0.99 - 0.002 * layer, cos_p5=0.995 - 0.001 * layer,
                              cos_median=0.9995 - 0.0002 * layer, cos_mean=0.999 - 0.0002 * layer, max_abs=0.1 + 0.01 * layer,
                              mean_abs=0.01))
    add(ev.PhasePassed(phase=3, attempt=1, evidence_seqs=gates, summary="2/2 prompts pass the top-5 gate"))
    add(ev.PerformanceMeasured(phase=3, executor="emulated", n_prompt_tokens=12, prefill_s=1.84, ms_per_token=95.0,
                               tokens_per_s=10.5, warmup=5, runs=20))
    add(ev.PhaseStarted(phase=4, attempt=1))
    add(ev.OptimizationTried(phase=4, optimisation="weight residency", outcome="applied", before_s=1.84, after_s=1.21,
                             gate_passed=True, reason="weights converted once"))
    add(ev.OptimizationTried(phase=4, optimisation="fused qkv", outcome="reverted", before_s=1.21, after_s=1.35,
                             gate_passed=True, reason="slower"))
    failed = add(ev.PhaseFailed(phase=4, attempt=1, reasons=["prefill 1.21 s not below baseline after re-measure"]))
    add(ev.FailureTriaged(subject_seq=failed, subject_type="PhaseFailed", summary="noisy timing",
                          matches=[{"rule_id": "P4-NOISE", "root_cause": "timer includes setup", "remedy": "move setup out of the timed region",
                                    "confidence": 0.7}]))
    add(ev.PhaseStarted(phase=4, attempt=2))
    failed2 = add(ev.PhaseFailed(phase=4, attempt=2, reasons=["prefill 1.90 s not below baseline 1.84 s"]))
    add(ev.FailureTriaged(subject_seq=failed2, subject_type="PhaseFailed", summary="setup still timed",
                          matches=[{"rule_id": "P4-SETUP", "root_cause": "weight conversion inside the timed loop",
                                    "remedy": "convert weights in setup", "confidence": 0.9}]))
    add(ev.BlockerRaised(phase=4, reason="phase 4 failed twice"))
    add(ev.LessonRecorded(phase=4, text="Keep weight conversion outside the timed region."))
    return items


def realistic_deployment_resolved(name: str = "smollm2_135m_instruct") -> list[tuple]:
    """`realistic_deployment` continued: the blocker is resolved, phases 4-7 pass, an evaluation is recorded."""
    items = realistic_deployment(name)
    s = deployment_stream(name)
    start = T0 + timedelta(minutes=3 * len(items) + 60)
    more = [
        ev.DeploymentResumed(phase=4, note="setup moved out of the timed region"),
        ev.PhaseStarted(phase=4, attempt=3),
        ev.PerformanceMeasured(phase=4, executor="emulated", n_prompt_tokens=12, prefill_s=1.02, warmup=5, runs=20),
        ev.PhasePassed(phase=4, attempt=3, summary="prefill 1.02 s < 1.84 s"),
        ev.PhaseStarted(phase=5, attempt=1),
        ev.OptimizationTried(phase=5, optimisation="kv cache in place", outcome="applied", before_s=0.095, after_s=0.061,
                             gate_passed=True),
        ev.PerformanceMeasured(phase=5, executor="emulated", ms_per_token=61.0, tokens_per_s=16.4, warmup=5, runs=20),
        ev.PhasePassed(phase=5, attempt=1, summary="61 ms/token"),
        ev.PhaseStarted(phase=6, attempt=1),
        ev.PerformanceMeasured(phase=6, executor="emulated", n_prompt_tokens=12, n_tokens=32, ttft_s=1.05,
                               tokens_per_s=16.1, ms_per_token=62.1, setup_s=3.2, warmup=5, runs=20,
                               profile={"gemm": {"seconds": 0.61, "calls": 150}, "flash_attention": {"seconds": 0.2, "calls": 30}}),
        ev.TokenGateChecked(prompt_index=0, prompt="What is the capital of France?", executor="emulated", n_tokens=32,
                            passed=True, agreed_prefix=32, context="phase6"),
        ev.PhasePassed(phase=6, attempt=1, summary="integrated runner passes"),
        ev.LessonRecorded(phase=6, text="Profile before optimising: GEMM dominates prefill."),
        ev.PhaseStarted(phase=7, attempt=1),
        ev.EvaluationRecorded(verdict="PASS-with-warnings", findings=[
            {"severity": "warning", "seq": 12, "message": "flash attention below target tiles (justified)"},
            {"severity": "info", "seq": 27, "message": "bisect recorded although the block passed"}],
            remeasured={"token_gate": {"passed": 2, "failed": 0}, "prefill_s": 1.04}),
        ev.PhasePassed(phase=7, attempt=1, summary="independent evaluation PASS-with-warnings"),
    ]
    for i, e in enumerate(more):
        items.append((s, e, None, stamp(start + timedelta(minutes=4 * i))))
    return items
