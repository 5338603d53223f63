"""The per-stage bookkeeping of a decoder pipeline (npu_kernels.model.pipeline): every stage runs inside
`_stage("<name>", "<kernel>")`, timed under "<prefill|decode>:<name>", and `profile()` joins the stage times with
the executor's own per-kernel timer. A pipeline sets `stage_timer`, `stage_kernels`, `_phase` and `k`."""

from __future__ import annotations

from typing import Any


class StageBookkeeping:
    def _stage(self, name: str, kernel: str):
        """`with self._stage(name, kernel):` times the block under "<phase>:<name>" and records its kernel."""
        key = f"{self._phase}:{name}"
        self.stage_kernels[key] = kernel
        return self.stage_timer.time(key)

    def profile(self) -> dict[str, Any]:
        """Per-stage time (with the kernel each stage uses) and the executor's per-kernel totals."""
        stages = {key: {"kernel": self.stage_kernels[key], "seconds": s, "calls": self.stage_timer.calls[key]}
                  for key, s in self.stage_timer.seconds.items()}
        timer = getattr(self.k, "timer", None)
        kernels = {n: {"seconds": s, "calls": timer.calls.get(n, 0)} for n, s in timer.seconds.items()} \
            if timer is not None else {}
        return {"stages": stages, "kernels": kernels}

    def reset_timers(self) -> None:
        self.stage_timer.reset()
        self.stage_kernels.clear()
