"""The cost of one XRT call and of one host op, given the host constants `h` (`npu_kernels.perf.host`).

A call = BO write + NPU run (its launches at the deployment's tiles, one dispatch per call) + BO read + the host
side of the call (`xrt_call_s`).

`npu_kernels.perf.host` fits the fixed XRT call cost with `call_cost`, and `npu_kernels.perf.predict` sums both over a
deployment's dispatch plan; neither imports the other.
"""

from __future__ import annotations

from npu_kernels.perf.dispatch import ElfCall, HostOp, Launch
from npu_kernels.perf.kernel_model import kernel_latency_s


def call_cost(call: ElfCall, switches: dict[str, bool], h: dict[str, float]) -> dict[str, float]:
    """BO write / NPU run / BO read / XRT seconds of one call under `switches`."""
    write = sum(call.write.values())
    if not switches["weight_residency"]:
        write += sum(call.static.values())
    if not switches["intermediate_bos"]:
        write += sum(call.intermediate.values())
    # each launch's modelled time holds the registry's whole per-launch floor, of which the call's one dispatch
    # (`dispatch_share_s`, npu_kernels.perf.host) is paid once per call, not once per launch
    npu = sum(launch_s(la) for la in call.launches) - (len(call.launches) - 1) * h["dispatch_share_s"]
    out = {"bo_write_s": write / h["bo_write_bps"], "npu_s": npu,
           "bo_read_s": sum(call.read.values()) / h["bo_read_bps"], "xrt_s": h["xrt_call_s"]}
    out["total_s"] = sum(out.values())
    return out


def launch_s(la: Launch) -> float:
    """Modelled NPU2 seconds of one launch at the tile the deployment builds it with (planner default if none)."""
    return kernel_latency_s(la.kernel, la.shape, la.tile)


def host_op_s(op: HostOp, h: dict[str, float]) -> float:
    """Seconds of one host op (copy, memcpy, embedding gather, fixed CPU work, decode attention / glue)."""
    if op.kind == "strided_copy":
        return op.nbytes / h["strided_copy_bps"]
    if op.kind == "memcpy":
        return op.nbytes / h["bo_write_bps"]
    if op.kind == "embed":
        return op.nbytes / h["embed_bps"]
    if op.kind == "fixed":
        return h["final_rmsnorm_s"]
    if op.kind == "decode_attention":
        return h["decode_cpu_layer_s"] + op.nbytes / h["bo_write_bps"]
    if op.kind == "decode_glue":
        return h["decode_glue_s"]
    raise ValueError(f"unknown host op kind {op.kind!r}")
