"""The eight phase gates of an NPU2 deployment and the statuses a deployment can be in.

`Phase` numbers the gates 0..7. `Status` names the lifecycle states: `phaseN` means "phase N is the next
gate to pass" (its attempt may be open or not yet started); `needs_human_review` keeps the phase it
stopped at in `DeploymentState.next_phase`.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class Phase(IntEnum):
    REFERENCE = 0
    KERNELS = 1
    BLOCK = 2
    FULL_MODEL = 3
    PREFILL_OPT = 4
    DECODE_OPT = 5
    FINALIZE = 6
    EVALUATION = 7

    @property
    def title(self) -> str:
        return _TITLES[self]

    @property
    def status(self) -> Status:
        """The status in which this phase is the next gate to pass."""
        return Status(f"phase{int(self)}")

    @property
    def pass_trigger(self) -> str:
        return f"pass_phase_{int(self)}"

    @property
    def fail_trigger(self) -> str:
        return f"fail_phase_{int(self)}"

    @property
    def inconclusive_trigger(self) -> str:
        return f"inconclusive_phase_{int(self)}"


_TITLES = {
    Phase.REFERENCE: "CPU/HF reference",
    Phase.KERNELS: "per-kernel validation",
    Phase.BLOCK: "single block",
    Phase.FULL_MODEL: "full model",
    Phase.PREFILL_OPT: "prefill optimisation",
    Phase.DECODE_OPT: "decode optimisation",
    Phase.FINALIZE: "finalize",
    Phase.EVALUATION: "independent evaluation",
}


class Status(StrEnum):
    REQUESTED = "requested"
    PHASE0 = "phase0"
    PHASE1 = "phase1"
    PHASE2 = "phase2"
    PHASE3 = "phase3"
    PHASE4 = "phase4"
    PHASE5 = "phase5"
    PHASE6 = "phase6"
    PHASE7 = "phase7"
    DEPLOYED = "deployed"
    REJECTED = "rejected"  # architecture out of scope
    NEEDS_HUMAN_REVIEW = "needs_human_review"  # a gate failed twice, or Phase 7 said FAIL

    @property
    def phase(self) -> Phase | None:
        """The gate this status waits on (`phase3` -> Phase 3); None for the other statuses."""
        return Phase(int(self.value[5:])) if self.value.startswith("phase") else None
