"""The memory a deployment needs on this machine, estimated from its config, and the machine's own.

`ledger init` states the estimate and refuses, in one line, a model the machine cannot hold (issue 48 item 3): a
deployment on the emulated / torch executors runs the whole model in this process, and so does the HF reference on
every executor. The estimate, from the config alone:

  runtime      0.5 GiB: Python, numpy, torch and transformers imported (0.41 GiB measured before any weight loaded,
               tests/models.py's tiny Llama, 2026-12-04)
  weights      bytes per parameter (parameters: every tensor the config requires, `weights.expected_tensors`; a
               tied head counted once):
                 emulated          4: the weights held once in bf16 - the HF reference's parameters, which the
                                   pipeline of a BF16 checkpoint holds as they are (2: `HfRunner.bf16_bits`,
                                   `weights.load_weights(shared=...)`, widened exactly per GEMM / GEMV call, a fused
                                   step's rows assembled per call) - and the executor's resident GEMM operand, held
                                   as bf16 bits (2, `EmulatedExecutor._gemm_operand`, the weight residency switch;
                                   the embedding has none, so 4 over-states a tied head by 2 B a value). A
                                   checkpoint not all BF16 is not shared: + UNSHARED_BYTES (`memory_need(shared=
                                   False)`; `init` assumes BF16)
                 torch             6: as emulated, but the torch executor keeps a bf16 copy of both the GEMM's and
                                   the GEMV's operand (2 + 2; not measured at 1B)
                 mlir-air          4: the HF bf16 reference (2) and the NPU2's weight BOs, which live in the same
                                   host DDR (2, bf16)
               measured on the emulated executor, a random-weight Llama-3.2-1B-size folder (1.236 G parameters,
               benchmarks/bench_deploy_1b.py, 2026-12-07, weights held once in bf16): Phase 0 2.73 GiB peak RSS,
               Phases 2 and 3 (the reference and the pipeline sharing it) 3.44 GiB = 0.5 GiB + 2.5 B per parameter;
               the Phases 4-6 work with every switch on (+ the resident GEMM operands; the ungated probe) 4.90 GiB =
               3.8 B per parameter + runtime, under the 6.0 GiB this estimate states for it. The reference's parameters are transformers' mapping of the safetensors file
               (file-backed pages, counted in RSS once touched), and the pipeline's views of them are the same pages.
               The same folder, 2026-12-04, with the pipeline's weights held as float32 values (8 B per parameter):
               Phase 0 (the reference alone) 2.78 GiB RSS = 0.48 GiB + 2.0 B per parameter; Phases 2-3 (the
               reference and the pipeline) 7.42-7.61 GiB = 6.0-6.2 B per parameter + runtime; the Phases 4-6 work
               with every switch on (+ the resident operands; the benchmark's ungated probe, Phase 3 having stopped
               the deployment) 9.36 GiB = 7.7 B per parameter + runtime. Before the weights were held once
               (dd99c44) the same deployment peaked at 22.7 GB, ~15 B per parameter: the float32 (in, out) copy, the
               fused concatenation and its GEMV rows and the executor's float32 operand beside one another.
               SmolLM2-135M-Instruct (134.5 M parameters) then peaked at 1.60 GiB (9.5 B per parameter).
  working set  at the compiled prefill length S = 2048 (Phase 1's GEMM rows, the Phases 4-6 prefill; the gates'
               own prompts are shorter, so an upper bound): both sides' KV caches (float32 + bf16: 6 B per element,
               2 x layers x S x kv heads x head_dim), one layer's attention scores (S x S x heads, float32) and one
               prefill layer's activations (S x (4E + 3F), float32). No logits of every position: the pipeline's
               LM head runs at the predicted position only, and the HF reference keeps that one (`logits_to_keep=1`)

The machine's memory is MemTotal of /proc/meminfo: a need above it is refused (None where the file cannot be read:
nothing is refused, and the line says so). MemAvailable is stated beside it, not judged: the deployment runs at
`advance`, later, and on a shared machine what is free at `init` says little about then.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from npu_kernels.model.config import ModelConfig

GIB = 2**30
RUNTIME_BYTES = GIB // 2
BYTES_PER_PARAM = {"emulated": 4, "torch": 6, "mlir-air": 4}
UNSHARED_BYTES = 2  # the in-process pipeline's own bf16 copy where the checkpoint is not BF16 (module docstring)
IN_PROCESS = ("emulated", "torch")
WORKING_SEQ = 2048  # npu_kernels.model.plan.DEFAULT_SEQ: the compiled prefill length
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class MemoryNeed:
    params: int
    weights_bytes: int
    working_bytes: int
    runtime_bytes: int
    per_param: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.working_bytes + self.runtime_bytes

    def how(self) -> str:
        return (f"{self.per_param} B x {self.params / 1e9:.3g} G parameters {self.weights_bytes / GIB:.1f} GiB + "
                f"working set at {WORKING_SEQ} positions {self.working_bytes / GIB:.1f} GiB + runtime "
                f"{self.runtime_bytes / GIB:.1f} GiB")


def parameter_count(config: ModelConfig) -> int:
    from npu_kernels.model.weights import expected_tensors

    total = 0
    for shape in expected_tensors(config).values():
        n = 1
        for d in shape:
            n *= int(d)
        total += n
    return total


def memory_need(config: ModelConfig, executor: str = "emulated", shared: bool = True) -> MemoryNeed:
    """The estimate of the module docstring for a deployment of `config` on `executor`; `shared=False`: the
    checkpoint is not (all) BF16, so an in-process pipeline cannot share the reference's tensors
    (`npu_kernels.model.weights.bf16_checkpoint`)."""
    c, S = config, WORKING_SEQ
    params = parameter_count(c)
    per_param = BYTES_PER_PARAM.get(executor, max(BYTES_PER_PARAM.values()) + UNSHARED_BYTES)
    per_param += 0 if shared or executor not in IN_PROCESS else UNSHARED_BYTES
    kv = 2 * c.n_layers * S * c.n_kv_heads * c.head_dim * 6
    scores = S * S * c.n_heads * 4
    activations = S * (4 * c.emb_dim + 3 * c.hidden_dim) * 4
    return MemoryNeed(params, params * per_param, kv + scores + activations, RUNTIME_BYTES, per_param)


def _meminfo_bytes(field: str, meminfo: Path) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith(f"{field}:"):
                value, unit = line.split()[1:3]
                return int(value) * (1024 if unit.lower() == "kb" else 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def machine_memory_bytes(meminfo: Path = MEMINFO) -> int | None:
    """MemTotal of /proc/meminfo in bytes; None where it cannot be read."""
    return _meminfo_bytes("MemTotal", meminfo)


def available_memory_bytes(meminfo: Path = MEMINFO) -> int | None:
    """MemAvailable of /proc/meminfo in bytes (what is free now, information only); None where it cannot be read."""
    return _meminfo_bytes("MemAvailable", meminfo)


def memory_line(need: MemoryNeed, total: int | None, available: int | None = None) -> str:
    """The line `init` prints: the need, how it is estimated, and the machine's memory (and what is free now)."""
    now = f", {available / GIB:.1f} GiB available now" if available is not None else ""
    machine = (f"of this machine's {total / GIB:.1f} GiB (MemTotal, /proc/meminfo{now})" if total is not None
               else "(this machine's memory unknown: /proc/meminfo unreadable)")
    return f"memory: about {need.total_bytes / GIB:.1f} GiB needed {machine}: {need.how()}"


def memory_problem(need: MemoryNeed, total: int | None) -> str | None:
    """Why this machine cannot hold the deployment (one line), or None."""
    if total is None or need.total_bytes <= total:
        return None
    return (f"needs about {need.total_bytes / GIB:.1f} GiB, more than this machine's {total / GIB:.1f} GiB "
            f"(MemTotal, /proc/meminfo): {need.how()}")
