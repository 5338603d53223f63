"""Typed views of a PerformanceMeasured's `profile` dict, as the phase pages read it.

The ledger records `profile` as plain JSON (its keys are part of the recorded format, written by the Phase 4-6
gates and `ledger run --profile`); the pages read it through these records instead of string keys:

* `Profile.of(profile)`: where the figure comes from (`source`; "wall" when unsaid), the modelled NPU2
  figures of a Phase 6 record (`npu2`: `RecordedFigures`, None when absent) and the emulator's own wall time
  beside them (`wall`: `EmulatorWall`).
* `RecordedFigures.elfs`: one `ElfFigures` per (path, ELF) of its per-ELF breakdown, prefill first, each path in
  recorded order; a figure the record lacks (mlir-air's `make profile` gives total_ms and calls only) is None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PATHS = ("prefill", "decode")


@dataclass(frozen=True)
class ElfFigures:
    """One ELF's figures on one path: calls per prefill (or per token), and per-call milliseconds."""

    path: str
    elf: str
    calls: Any  # as recorded (0 when absent)
    per_call_ms: float | None
    npu_ms: float | None
    bo_write_ms: float | None
    bo_read_ms: float | None
    xrt_ms: float | None
    total_ms: float | None

    def bar(self) -> tuple[str, float, float, float, float]:
        """(label, BO write, NPU run, BO read, XRT) milliseconds of all its calls: one bar of the chart."""
        return (f"{self.path}: {self.elf}",
                *(float(x or 0.0) * self.calls for x in (self.bo_write_ms, self.npu_ms, self.bo_read_ms, self.xrt_ms)))


@dataclass(frozen=True)
class RecordedFigures:
    """The modelled (or profiled) NPU2 figures a Phase 6 record carries beside its gate figures."""

    source: str | None
    seq: int | None
    ctx: int | None
    prefill_calls_per_layer: int | None
    decode_calls_per_layer: int | None
    elfs: tuple[ElfFigures, ...]

    @classmethod
    def of(cls, npu2: dict[str, Any]) -> RecordedFigures:
        per_elf = npu2.get("per_elf", {})
        elfs = tuple(ElfFigures(path, elf, f.get("calls", 0), f.get("per_call_ms"), f.get("npu_ms"), f.get("bo_write_ms"),
                                f.get("bo_read_ms"), f.get("xrt_ms"), f.get("total_ms"))
                     for path in PATHS for elf, f in (per_elf.get(path) or {}).items())
        return cls(npu2.get("source"), npu2.get("seq"), npu2.get("ctx"), npu2.get("prefill_calls_per_layer"),
                   npu2.get("decode_calls_per_layer"), elfs)


@dataclass(frozen=True)
class EmulatorWall:
    """The emulator's own wall time on the recording machine (information, never a gate figure)."""

    n_prompt_tokens: int | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    ms_per_token: float | None = None
    prefill_s: float | None = None

    @classmethod
    def of(cls, wall: dict[str, Any]) -> EmulatorWall:
        return cls(wall.get("n_prompt_tokens"), wall.get("ttft_s"), wall.get("tokens_per_s"), wall.get("ms_per_token"),
                   wall.get("prefill_s"))


@dataclass(frozen=True)
class Profile:
    """A PerformanceMeasured's `profile`, typed where the pages read it."""

    source: str
    npu2: RecordedFigures | None
    wall: EmulatorWall

    @classmethod
    def of(cls, profile: dict[str, Any] | None) -> Profile:
        profile = profile or {}
        npu2 = profile.get("npu2")
        return cls(profile.get("source") or "wall", RecordedFigures.of(npu2) if npu2 else None,
                   EmulatorWall.of(profile.get("emulator_wall") or {}))
