"""The base of the event vocabulary (`ledger.events`): `Event` (pydantic, frozen, registered by class name for
`parse_event`), `Measured` (evidence bound to a model digest), `NewEvent` and the literal types. Imported by
ledger.events and the event modules beside it; everyone else imports from ledger.events."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

Verdict = Literal["PASS", "FAIL"]
Target = Literal["npu2", "npu1"]
DType = Literal["bf16", "fp16", "q4nx"]  # fp16: old streams only (init refuses it since issue #26)
ExecutorName = Literal["emulated", "torch", "mlir-air"]
# where an event's figures come from (npu_kernels.provenance.CLASSES; "" in ledgers written before the field)
ProvenanceClass = Literal["", "npu2-measured", "standin-rehearsal", "modelled-npu2", "cpu-emulator", "unattested",
                          "imported:mlir-air-registry", "imported:mlir-air-nightly", "imported:mlir-air-readme"]


class Event(BaseModel):
    """Base of every ledger event. Subclasses are frozen and reject unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=True)
    registry: ClassVar[dict[str, type["Event"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Event.registry[cls.__name__] = cls

    @property
    def type_name(self) -> str:
        return self.__class__.__name__

    def to_payload(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event about to be appended: the typed event plus its client-made id (idempotency key)."""

    event: "Event"
    event_id: str = field(default_factory=lambda: str(uuid.uuid4()))


class Measured(Event):
    """Base of every evidence event: `model_digest` is the `ModelDigested.digest` of the model folder the
    evidence was measured against ("" in ledgers written before the binding, and in imported rows)."""

    model_digest: str = ""
