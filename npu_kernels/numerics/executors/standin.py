"""Stand-ins for an NPU harness, for tests and benchmarks only. Neither is a real executor: `make_executor`
does not know them, `ledger init --executor` cannot choose them, and every row they produce says so in its
provenance.

* The **sleep** stand-in (`ledger worker --executor sleep`): runs the emulated kernel, then sleeps
  `NPU_LEDGER_STANDIN_SLEEP_S` seconds, as a compile + NPU run of minutes would keep a host busy. It serves
  the jobs of emulated deployments; its rows are the emulated rows (same numbers) with
  `provenance["standin_sleep_s"]`. The variable is read only by this stand-in, and the stand-in refuses to
  start without it, so neither can happen by accident.
* A **declared stand-in fault** (`ledger reverify --standin-fault KERNEL[:k=v,...]`): the emulated kernel's
  output for the matching (kernel, shape) rows is multiplied by `FAULT_GAIN` (1 + 2^-4: far past every
  contract's rtol), standing for a harness that a toolchain change broke. Those rows record
  `toolchain["standin_fault"]`, so the ledger never passes them off as the emulated numerics. When the
  mlir-air twin (`ledger twin`) lands, its fault switch plays this part on the mlir-air path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.executors.emulated import EmulatedExecutor
from npu_kernels.settings import env_get

SLEEP_ENV = "NPU_LEDGER_STANDIN_SLEEP_S"
FAULT_GAIN = 1.0 + 2.0**-4


class StandinError(ValueError):
    """Raised when a stand-in is asked for without its declaration (sleep time, fault spec) or with a bad one."""


def standin_sleep_s() -> float:
    """The sleep stand-in's seconds per row, from NPU_LEDGER_STANDIN_SLEEP_S (required, 0 <= s <= 3600)."""
    text = env_get(SLEEP_ENV)
    if text is None:
        raise StandinError(f"the sleep stand-in needs {SLEEP_ENV}=SECONDS (a test/bench seam, not an executor)")
    try:
        seconds = float(text)
    except ValueError:
        raise StandinError(f"{SLEEP_ENV}={text!r} is not a number of seconds") from None
    if not 0.0 <= seconds <= 3600.0:
        raise StandinError(f"{SLEEP_ENV}={text!r} is outside 0..3600 seconds")
    return seconds


@dataclass(frozen=True)
class StandinFault:
    """A declared fault: `kernel`, and optionally shape fields a row must match (`rope:head_dim=128`)."""

    kernel: str
    shape: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, spec: str) -> "StandinFault":
        kernel, _, rest = spec.strip().partition(":")
        try:
            get_spec(kernel)
        except Exception as e:  # noqa: BLE001 - the catalog names what exists
            raise StandinError(f"stand-in fault {spec!r}: {e}") from None
        fields = []
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = part.partition("=")
            if not eq or not key or not value:
                raise StandinError(f"stand-in fault {spec!r}: expected KERNEL[:key=value,...], got {part!r}")
            fields.append((key.strip(), value.strip()))
        return cls(kernel, tuple(fields))

    def __str__(self) -> str:
        return self.kernel + (":" + ",".join(f"{k}={v}" for k, v in self.shape) if self.shape else "")

    def matches(self, kernel: str, shape: Mapping[str, Any]) -> bool:
        return kernel == self.kernel and all(str(shape.get(k)).lower() == v.lower() for k, v in self.shape)


class FaultyEmulated(EmulatedExecutor):
    """The emulated executor with one kernel's output multiplied by FAULT_GAIN (a declared stand-in fault)."""

    def __init__(self, kernel: str, target: str = "npu2") -> None:
        super().__init__(target)
        real = getattr(super(), kernel)

        def faulty(*args, **kwargs):
            out = real(*args, **kwargs)
            if isinstance(out, tuple):
                return (_gain(out[0]), *out[1:])
            return _gain(out)

        setattr(self, kernel, faulty)


def _gain(out):
    arr = np.asarray(out)
    return (arr.astype(np.float32) * np.float32(FAULT_GAIN)).astype(arr.dtype)
