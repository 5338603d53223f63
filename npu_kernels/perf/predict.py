"""End-to-end NPU2 performance prediction of a deployment: TTFT, decode ms/token, per-ELF breakdown.

`predict(config, seq=2048, switches=None, ctx=128) -> Prediction` costs the dispatch plan
(`npu_kernels.perf.dispatch`): each XRT call = BO write (write bytes, plus weights when weight residency is off,
plus intermediates when intermediate BOs are off, at the host write rate) + NPU run (the sum of its
launches, `npu_kernels.perf.kernel_model`) + BO read + the fixed XRT call cost (`npu_kernels.perf.cost`); plus the host ops (KV-cache
extract, transposes, bias adds, embedding, final RMSNorm, Python scheduling, CPU decode attention / glue;
`npu_kernels.perf.host`). TTFT = prefill + the LM head (one row); decode = layers + the LM head per token.
Deterministic: same inputs, same figures. `render_table(p)` gives a profile.md-like text table,
`write_png(p, path)` a bar chart of the per-ELF breakdown (matplotlib, Agg).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from npu_kernels.perf.cost import call_cost, host_op_s, launch_s
from npu_kernels.perf.dispatch import ElfCall, HostOp, dispatch_plan
from npu_kernels.perf.host import host_constants
from npu_kernels.perf.memory import memory_fit

PADDED_SRC = "smollm2_1_7b/ARCHITECTURE.md:69 (EOS-pad), llms/README.md performance table at seq_len=2048 (e972f29)"


@dataclass
class Prediction:
    ttft_s: float
    prefill_s: float
    decode_tokens_per_s: float
    ms_per_token: float
    prefill_calls_per_layer: int
    decode_calls_per_layer: int
    per_elf: dict[str, dict[str, Any]]  # "prefill:<elf>" / "decode:<elf>" -> per-call figures and count
    per_kernel: dict[str, dict[str, float]]  # phase -> kernel -> ms (NPU run, whole prefill / per token)
    host: dict[str, dict[str, float]]  # phase -> host op -> ms
    totals: dict[str, dict[str, float]]  # phase -> bo_write/npu/bo_read/xrt/host ms
    seq: int
    ctx: int
    switches: dict[str, bool]
    lean: bool
    modelled: bool = True
    notes: list[str] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)  # npu_kernels.perf.memory.memory_fit's figures

    def to_dict(self) -> dict:
        return asdict(self)


def _ms(s: float) -> float:
    return round(s * 1e3, 4)


def predict(config, seq: int = 2048, switches=None, ctx: int = 128, host_bytes: int | None = None,
            profiled: bool = False) -> Prediction:
    """See the module docstring. `switches`: None (all on), a dict, or the names that are on; `host_bytes`:
    the target machine's memory, when known, for the memory-fit check (npu_kernels.perf.memory); `profiled`: the
    lean decode in the form Llama-3.2-1B's profile.md measured (npu_kernels.perf.dispatch.dispatch_plan)."""
    plan = dispatch_plan(config, switches, seq, ctx, profiled=profiled)
    h = host_constants()
    sw, L = plan.switches, plan.n_layers
    per_elf: dict[str, dict[str, Any]] = {}
    per_kernel: dict[str, dict[str, float]] = {"prefill": {}, "decode": {}}
    totals = {ph: {"bo_write": 0.0, "npu": 0.0, "bo_read": 0.0, "xrt": 0.0, "host": 0.0} for ph in ("prefill", "decode")}

    def account(phase: str, call: ElfCall, count: int) -> float:
        c = call_cost(call, sw, h)
        key = f"{phase}:{call.elf}"
        e = per_elf.setdefault(key, {"calls": 0, "launches": len(call.launches), "per_call_ms": _ms(c["total_s"]),
                                     "bo_write_ms": _ms(c["bo_write_s"]), "npu_ms": _ms(c["npu_s"]),
                                     "bo_read_ms": _ms(c["bo_read_s"]), "xrt_ms": _ms(c["xrt_s"]), "total_ms": 0.0})
        e["calls"] += count
        e["total_ms"] = round(e["total_ms"] + c["total_s"] * count * 1e3, 4)
        for k in ("bo_write", "npu", "bo_read", "xrt"):
            totals[phase][k] += c[f"{k}_s"] * count
        for la in call.launches:
            per_kernel[phase][la.kernel] = per_kernel[phase].get(la.kernel, 0.0) + launch_s(la) * count
        return c["total_s"] * count

    host: dict[str, dict[str, float]] = {"prefill": {}, "decode": {}}

    def host_account(phase: str, op: HostOp, count: int) -> float:
        s = host_op_s(op, h) * count
        host[phase][op.name] = host[phase].get(op.name, 0.0) + s
        totals[phase]["host"] += s
        return s

    La, Lc = L - plan.n_conv_layers, plan.n_conv_layers  # attention layers, a hybrid's short-convolution layers
    prefill = sum(account("prefill", c, La) for c in plan.prefill_layer)
    prefill += sum(host_account("prefill", op, La) for op in plan.prefill_host_layer)
    prefill += sum(account("prefill", c, Lc) for c in plan.conv_prefill_layer)
    prefill += sum(host_account("prefill", op, Lc) for op in plan.conv_prefill_host_layer)
    py = h["py_per_layer_s"] * L
    host["prefill"]["python scheduling"] = py
    totals["prefill"]["host"] += py
    prefill += py
    prefill += sum(host_account("prefill", op, 1) for op in plan.prefill_once)
    ttft = prefill + account("prefill", plan.lm_head, 1)
    token = sum(account("decode", c, La) for c in plan.decode_layer)
    token += sum(host_account("decode", op, La) for op in plan.decode_host_layer)
    token += sum(account("decode", c, Lc) for c in plan.conv_decode_layer)
    token += sum(host_account("decode", op, Lc) for op in plan.conv_decode_host_layer)
    token += account("decode", plan.lm_head, 1)
    notes = [f"modelled NPU2 at a prefill of {seq} positions: mlir-air compiles its prefill ELFs for one seq_len and "
             f"pads every prompt to it ({PADDED_SRC}), so a prompt of any length up to {seq} costs this TTFT"]
    if config.head_dim != 64:
        notes.append(f"head_dim {config.head_dim}: head-first flash attention with a host seq<->head transpose")
    if not plan.lean:
        notes.append("decode is 5 GEMV ELFs with the M=1 glue on the host: the fused o_gemv_ffn cascade needs K "
                     "divisible by 512 and emb_dim/512 <= 4 core rows (npu_kernels.model.config.is_lean)")
    if Lc:
        notes.append(f"{Lc} of {L} layers are short convolutions (their own front ELFs, the shared MLP tail, no KV "
                     "cache); conv1d and eltwise_mul are costed on their own constants, fitted on the idle-NPU2 rows of "
                     "supported_kernels.md@0b499c9 (anchors.toml)")
    fit = memory_fit(plan, config, ctx, host_bytes)
    notes += fit.lines()
    return Prediction(
        ttft_s=round(ttft, 6), prefill_s=round(prefill, 6), decode_tokens_per_s=round(1.0 / token, 4),
        ms_per_token=_ms(token), prefill_calls_per_layer=len(plan.prefill_layer),
        decode_calls_per_layer=len(plan.decode_layer), per_elf=per_elf,
        per_kernel={ph: {k: _ms(v) for k, v in sorted(d.items())} for ph, d in per_kernel.items()},
        host={ph: {k: _ms(v) for k, v in d.items()} for ph, d in host.items()},
        totals={ph: {k: _ms(v) for k, v in d.items()} for ph, d in totals.items()},
        seq=seq, ctx=ctx, switches=dict(sw), lean=plan.lean, notes=notes,
        memory={"fits": fit.fits, "total_bytes": fit.total_bytes, "weights_bytes": fit.weights_bytes,
                "kv_cache_bytes": fit.kv_cache_bytes, "activation_bytes": fit.activation_bytes,
                "largest_bo_bytes": fit.largest_bo_bytes, "largest_bo": fit.largest_bo, "problems": fit.problems})


def render_table(p: Prediction, title: str = "Modelled NPU2 profile") -> str:
    """A profile.md-like text table of a Prediction (modelled figures, not measurements)."""
    lines = [f"# {title} (modelled)", "",
             f"TTFT (seq {p.seq}): {p.ttft_s:.3f} s | decode: {p.ms_per_token:.1f} ms/token "
             f"({p.decode_tokens_per_s:.2f} tok/s, ctx {p.ctx}) | ELF/layer {p.prefill_calls_per_layer} / "
             f"{p.decode_calls_per_layer}", "",
             "| phase | ELF | launches | per-call | x calls | total | BO write | NPU run | BO read | XRT |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, e in p.per_elf.items():
        phase, elf = key.split(":", 1)
        lines.append(f"| {phase} | {elf} | {e['launches']} | {e['per_call_ms']:.2f} ms | {e['calls']} | "
                     f"{e['total_ms']:.1f} ms | {e['bo_write_ms']:.2f} | {e['npu_ms']:.2f} | {e['bo_read_ms']:.2f} | "
                     f"{e['xrt_ms']:.2f} |")
    lines += ["", "| phase | BO write | NPU run | BO read | XRT | host |", "|---|---|---|---|---|---|"]
    for ph, t in p.totals.items():
        lines.append(f"| {ph} | {t['bo_write']:.1f} ms | {t['npu']:.1f} ms | {t['bo_read']:.1f} ms | "
                     f"{t['xrt']:.1f} ms | {t['host']:.1f} ms |")
    lines += ["", "| phase | host op | total |", "|---|---|---|"]
    lines += [f"| {ph} | {k} | {v:.2f} ms |" for ph, d in p.host.items() for k, v in d.items()]
    lines += ["", "| phase | kernel | NPU time |", "|---|---|---|"]
    lines += [f"| {ph} | {k} | {v:.2f} ms |" for ph, d in p.per_kernel.items() for k, v in d.items()]
    if p.notes:
        lines += [""] + [f"- {n}" for n in p.notes]
    return "\n".join(lines) + "\n"


def write_png(p: Prediction, path: str, title: str = "Modelled NPU2 time per ELF") -> str:
    """A horizontal bar chart of the per-ELF totals (prefill: whole prompt, decode: per token)."""
    import matplotlib  # here, not at the top: matplotlib is slow to import and only the charts need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(p.per_elf)
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(keys) + 1.5))
    parts = [("bo_write_ms", "BO write"), ("npu_ms", "NPU run"), ("bo_read_ms", "BO read"), ("xrt_ms", "XRT")]
    left = [0.0] * len(keys)
    for field_, label in parts:
        vals = [p.per_elf[k][field_] * p.per_elf[k]["calls"] for k in keys]
        ax.barh(keys, vals, left=left, label=label)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_xlabel("ms (prefill: whole prompt; decode: per token)")
    ax.set_title(f"{title}: TTFT {p.ttft_s:.2f} s, {p.ms_per_token:.1f} ms/token")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
