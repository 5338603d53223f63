"""Does a deployment fit: its buffer objects against the limits NPU2 addresses them under.

`memory_fit(plan, config, ctx) -> MemoryFit` sums what mlir-air keeps resident (llama32_1b/ARCHITECTURE.md:44-47
at e972f29: per-layer BOs, weights written once): every prefill and decode call's static (weight) BOs per
layer, the LM head's, the KV cache at `ctx` positions, and the largest call's activation BOs; and it checks the
one addressing limit mlir-air documents: a shim buffer descriptor's byte offset is a uint32, so one BO is
addressable over at most 4 GiB (llms/llama31_8b_q4nx/README.md:181-183, e972f29, where 4.375 GiB of decode
weights in one buffer came back NaN). NPU2 has no memory of its own for them: the BOs live in the host's DDR,
shared with the CPU, so the total must fit the target machine's memory, which a config alone does not know
(`host_bytes`, when given, is compared). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BO_ADDRESS_LIMIT = 4 * 2**30  # bytes one BO addresses (uint32 shim BD offset)
BO_LIMIT_SRC = "mlir-air llms/llama31_8b_q4nx/README.md:181-183 (e972f29): a shim BD byte offset is a uint32"
BF16 = 2


@dataclass
class MemoryFit:
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    largest_bo_bytes: int
    largest_bo: str
    fits: bool
    problems: list[str] = field(default_factory=list)
    decode_4bit_bytes: int = 0  # of weights_bytes: a 4-bit decode's weight BOs (q4nx-device), 0 for bf16

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes

    def lines(self) -> list[str]:
        gib = 2**30
        split = (f": bf16 prefill {(self.weights_bytes - self.decode_4bit_bytes) / gib:.2f} + 4-bit decode "
                 f"{self.decode_4bit_bytes / gib:.2f}" if self.decode_4bit_bytes else "")
        out = [f"resident in host DDR shared with NPU2: {self.total_bytes / gib:.2f} GiB (weight BOs "
               f"{self.weights_bytes / gib:.2f}{split}, KV cache {self.kv_cache_bytes / gib:.2f}, activation BOs "
               f"{self.activation_bytes / gib:.2f}); largest single BO {self.largest_bo_bytes / gib:.2f} GiB "
               f"({self.largest_bo}) of the {BO_ADDRESS_LIMIT / gib:.0f} GiB one BO addresses ({BO_LIMIT_SRC})"]
        return out + self.problems


def memory_fit(plan, config, ctx: int, host_bytes: int | None = None, decode_call=None) -> MemoryFit:
    """See the module docstring. `plan` is a npu_kernels.perf.dispatch.DispatchPlan. `decode_call`: one ElfCall
    that is the whole decode of a 4-bit deployment (q4nx-device: npu_kernels.perf.q4nx.fused_decode_call), whose
    static BOs - the 4-bit weights of every layer and the LM head, and its `kv_cache` window - replace the bf16
    decode's per-layer weight BOs and the KV cache at `ctx`; the prefill keeps its bf16 weight BOs."""
    L = plan.n_layers
    decode_4bit = 0
    if decode_call is None:
        calls = [*plan.prefill_layer, *plan.decode_layer]
        weights = L * sum(sum(c.static.values()) for c in calls) + sum(plan.lm_head.static.values())
        kv = 2 * L * ctx * config.n_kv_heads * config.head_dim * BF16
    else:
        calls = [*plan.prefill_layer, decode_call]
        kv = decode_call.static.get("kv_cache", 0)
        decode_4bit = sum(decode_call.static.values()) - kv
        weights = (L * sum(sum(c.static.values()) for c in plan.prefill_layer) + sum(plan.lm_head.static.values())
                   + decode_4bit)
    acts = max(sum(c.write.values()) + sum(c.intermediate.values()) for c in calls)
    name, size = max(((f"{c.elf}:{b}", n) for c in [*calls, plan.lm_head] for b, n in c.static.items()),
                     key=lambda x: x[1])
    problems = []
    if size > BO_ADDRESS_LIMIT:
        problems.append(f"does not fit: BO {name} is {size / 2**30:.2f} GiB, past the 4 GiB one BO addresses - "
                        "split it (as llama31_8b_q4nx's DECODE_WGROUP splits its decode weights)")
    total = weights + kv + acts
    if host_bytes is not None and total > host_bytes:
        problems.append(f"does not fit: {total / 2**30:.2f} GiB resident exceeds the {host_bytes / 2**30:.1f} GiB "
                        "of host memory given")
    return MemoryFit(weights, kv, acts, size, name, not problems, problems, decode_4bit)
