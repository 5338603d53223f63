"""Parser for what mlir-air's `make profile` targets print: the C++ timers and the RMSNorm profile block.

Three formats, each from mlir-air's own sources (paths under programming_examples/):

* the C++ test executables (`matrix_vector_multiplication/bf16/test.cpp:200-214`, `eltwise_add/test.cpp:142-226`,
  `flash_attention/kernel_fusion_based/test_elf_npu2.cpp:143-145,230-267`):

      Avg NPU GEMV time: 912.5us.          Avg NPU gflops: 18.4
      Min NPU GEMV time: 900us.            Max NPU gflops: 18.6
      Max NPU GEMV time: 930us.            Min NPU gflops: 18.0
      (eltwise: `Avg bandwidth: <x> GB/s`, `PASS: All <N> elements correct.` / `FAIL: <e> / <N> elements incorrect.`;
       attention: `Median NPU attention time: ..us.`, `Stddev ...`, `Raw latencies (us): a,b,c`)

  Twenty timed iterations after ten warm-up ones; no `[precision]` line and (except eltwise) no correctness check.
* RMSNorm's `--profile` mode (`weighted_rms_norm/weighted_rms_norm.py:451-454`):

      Kernel: avg=0.9ms  min=0.8ms  max=1.0ms
      Bandwidth: 18.40 GB/s

* RoPE / SiLU-and-Mul `make profile` run the Python harness with `--perf-iters`: that is XRTRunner's ordinary
  transcript (`Latency (us): ...`, `[precision]`, `PASS!`) and is read by `npu_kernels.mlir_air.transcript`.

`parse_profile_output(text) -> ProfileResult` or `TranscriptError` (nothing recognisable, a timer that printed
no average, a self-contradicting eltwise check). Latencies are microseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from npu_kernels.mlir_air.output import NUMBER, TranscriptError, clean_lines, last_words

_AVG = re.compile(rf"^Avg NPU (?P<what>.+?) time:\s*(?P<t>{NUMBER})\s*us\.?$", re.I)
_MIN = re.compile(rf"^Min NPU (?P<what>.+?) time:\s*(?P<t>{NUMBER})\s*us\.?$", re.I)
_MAX = re.compile(rf"^Max NPU (?P<what>.+?) time:\s*(?P<t>{NUMBER})\s*us\.?$", re.I)
_MEDIAN = re.compile(rf"^Median NPU (?P<what>.+?) time:\s*(?P<t>{NUMBER})\s*us\.?$", re.I)
_GFLOPS = re.compile(rf"^Avg NPU gflops:\s*(?P<g>{NUMBER})$", re.I)
_BANDWIDTH = re.compile(rf"^(?:Avg bandwidth|Bandwidth):\s*(?P<bw>{NUMBER})\s*GB/s$", re.I)
_RAW = re.compile(r"^Raw latencies \(us\):\s*(?P<list>.*)$", re.I)
_KERNEL = re.compile(rf"^Kernel:\s*avg=(?P<avg>{NUMBER})ms\s+min=(?P<min>{NUMBER})ms\s+max=(?P<max>{NUMBER})ms$", re.I)
_ELT_PASS = re.compile(r"^PASS: All (?P<n>\d+) elements correct\.$")
_ELT_FAIL = re.compile(r"^FAIL: (?P<bad>\d+) / (?P<n>\d+) elements incorrect\.$")


@dataclass(frozen=True)
class ProfileResult:
    """One `make profile` run: the timed figures it printed (microseconds), and its check when it has one."""

    what: str  # "GEMV", "attention", "eltwise_add", "RMSNorm"
    latency_us: float  # the average over the timed iterations
    min_us: float | None = None
    max_us: float | None = None
    median_us: float | None = None
    gflops: float | None = None
    bandwidth_gbps: float | None = None
    raw_us: tuple[float, ...] = field(default_factory=tuple)
    checked: int | None = None  # eltwise test.exe: elements checked on the first timed iteration
    incorrect: int | None = None

    def fields(self) -> dict:
        """Latency fields for a `KernelVerified` (its verdict comes from the precision run)."""
        return {"latency_us": self.latency_us, "gflops": self.gflops}


def parse_profile_output(text: str) -> ProfileResult:
    """Parse a `make profile` transcript; raise `TranscriptError` with one sentence otherwise."""
    if not text or not text.strip():
        raise TranscriptError("the profile transcript is empty.", text)
    lines = clean_lines(text)
    found: dict[str, object] = {}
    for line in lines:
        if not line:
            continue
        for key, rx in (("avg", _AVG), ("min", _MIN), ("max", _MAX), ("median", _MEDIAN)):
            m = rx.match(line)
            if m:
                if key in found:
                    raise TranscriptError(f"the profile prints its {key} time twice: several runs concatenated?", text)
                found[key] = float(m["t"])
                found.setdefault("what", m["what"])
                break
        else:
            if m := _GFLOPS.match(line):
                found["gflops"] = float(m["g"])
            elif m := _BANDWIDTH.match(line):
                found["bw"] = float(m["bw"])
            elif m := _RAW.match(line):
                try:
                    found["raw"] = tuple(float(x) for x in m["list"].split(",") if x.strip())
                except ValueError:
                    raise TranscriptError(f"malformed raw latency list: {line!r}.", text) from None
            elif m := _KERNEL.match(line):
                found.update(what="RMSNorm", avg=float(m["avg"]) * 1e3, min=float(m["min"]) * 1e3,
                             max=float(m["max"]) * 1e3)
            elif m := _ELT_PASS.match(line):
                found.update(checked=int(m["n"]), incorrect=0)
            elif m := _ELT_FAIL.match(line):
                if int(m["bad"]) > int(m["n"]):
                    raise TranscriptError(f"{line!r}: more incorrect elements than checked.", text)
                found.update(checked=int(m["n"]), incorrect=int(m["bad"]))
    if "avg" not in found:
        raise TranscriptError(
            "the text matches none of mlir-air's `make profile` formats: no `Avg NPU ... time` line and no "
            f"`Kernel: avg=...ms` block (last line: {last_words(lines)!r}).",
            text,
        )
    avg = float(found["avg"])  # type: ignore[arg-type]
    lo, hi = found.get("min"), found.get("max")
    if lo is not None and hi is not None and not (lo <= avg <= hi):  # type: ignore[operator]
        raise TranscriptError(f"the profile's average {avg} us lies outside its min {lo} / max {hi}.", text)
    return ProfileResult(
        what=str(found.get("what", "")),
        latency_us=avg,
        min_us=lo,  # type: ignore[arg-type]
        max_us=hi,  # type: ignore[arg-type]
        median_us=found.get("median"),  # type: ignore[arg-type]
        gflops=found.get("gflops"),  # type: ignore[arg-type]
        bandwidth_gbps=found.get("bw"),  # type: ignore[arg-type]
        raw_us=found.get("raw", ()),  # type: ignore[arg-type]
        checked=found.get("checked"),  # type: ignore[arg-type]
        incorrect=found.get("incorrect"),  # type: ignore[arg-type]
    )
