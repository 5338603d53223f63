"""Where a figure comes from: one closed vocabulary, decided where the evidence is made, from facts the tool
checks, and re-derived from the same recorded facts by every reader (the registry fold, the evaluator).

    npu2-measured       a harness or `make profile` on a real NPU2: the device the harness ran on is named (pyxrt)
                        and the toolchain was probed (aie-opt, air-opt, xrt-smi or peano found, and the mlir-air
                        commit), and the command ran in no stand-in: its working directory and every path it named
                        were resolved and checked (`ran`, npu_kernels.mlir_air.checkout.where_it_ran)
    standin-rehearsal   a command that ran in a stand-in: a `ledger twin` checkout (its `.npu-ledger-twin` marker,
                        recorded as toolchain["standin"] when MLIR_AIR_DIR is one, and in `ran.standin` when the
                        command's directory or a path it named is inside one), a stand-in model directory
                        (stand_in.json), or a script of npu-ledger's stand-in package: the emulated executor's
                        numerics, the performance model's time
    modelled-npu2       the NPU2 performance model's figure (npu_kernels.perf): a prediction, deterministic
    cpu-emulator        the emulated / torch / fp32 executor on this machine: CPU numerics, this machine's wall time
    unattested          a harness transcript whose device or toolchain was not reported (a real checkout with no
                        device found, a transcript recorded without --device / --toolchain): kept and shown, never
                        verified, chosen as best or exported as a measurement
    imported:<source>   someone else's figure, with its origin: `imported:mlir-air-registry` (mlir-air's own
                        kernel_registry), `imported:mlir-air-nightly` (its nightly perf history),
                        `imported:mlir-air-readme` (a model directory README's stated figure, set beside predictions)

Only `npu2-measured` and `imported:mlir-air-registry` may be shown as verified on NPU2 or chosen as best
(`counts_as_npu2`); mlir-air's nightly figures are NPU2 measurements too, shown as imported, never as ours.
An event records its claim (`provenance_class`); `kernel_row_provenance` re-derives it from the stored facts and
`claim_problem` names a disagreement (the evaluator's finding; the registry always believes the facts).
"""

from __future__ import annotations

from typing import Any, Mapping

NPU2_MEASURED = "npu2-measured"
STANDIN_REHEARSAL = "standin-rehearsal"
MODELLED_NPU2 = "modelled-npu2"
CPU_EMULATOR = "cpu-emulator"
UNATTESTED = "unattested"
IMPORTED_PREFIX = "imported:"
IMPORTED_REGISTRY = IMPORTED_PREFIX + "mlir-air-registry"
IMPORTED_NIGHTLY = IMPORTED_PREFIX + "mlir-air-nightly"
IMPORTED_README = IMPORTED_PREFIX + "mlir-air-readme"  # a model directory README's stated figure (predict's anchors)

CLASSES = (NPU2_MEASURED, STANDIN_REHEARSAL, MODELLED_NPU2, CPU_EMULATOR, UNATTESTED, IMPORTED_REGISTRY,
           IMPORTED_NIGHTLY, IMPORTED_README)

# what a person reads beside a figure
LABELS = {
    NPU2_MEASURED: "measured on NPU2",
    STANDIN_REHEARSAL: "stand-in rehearsal (emulated numerics, modelled time; not NPU2)",
    MODELLED_NPU2: "modelled NPU2 (performance model; not measured)",
    CPU_EMULATOR: "CPU emulator (this machine; not NPU2)",
    UNATTESTED: "unattested harness run (no device/toolchain reported; not counted as NPU2)",
    IMPORTED_REGISTRY: "imported from mlir-air's kernel registry (measured on NPU2 by mlir-air)",
    IMPORTED_NIGHTLY: "imported from mlir-air's nightly (measured on NPU2 by mlir-air)",
    IMPORTED_README: "stated in an mlir-air model README (measured on NPU2 by mlir-air)",
}
SHORT = {NPU2_MEASURED: "measured NPU2", STANDIN_REHEARSAL: "stand-in rehearsal", MODELLED_NPU2: "modelled NPU2",
         CPU_EMULATOR: "CPU emulator", UNATTESTED: "unattested", IMPORTED_REGISTRY: "imported (mlir-air registry)",
         IMPORTED_NIGHTLY: "imported (mlir-air nightly)", IMPORTED_README: "mlir-air README"}

# a toolchain key whose presence says a real NPU toolchain was found (npu_kernels.toolchain; the commit alone is not)
ATTESTING_TOOLS = ("aie_opt", "air_opt", "xrt_smi", "peano")
STANDIN_KEYS = ("standin", "standin_fault")


class ProvenanceError(ValueError):
    """Raised when a provenance class is not one of the closed set."""


def check_class(value: str) -> str:
    """`value` if it is one of the closed set (CLASSES), else ProvenanceError naming the set."""
    if value not in CLASSES:
        raise ProvenanceError(f"provenance {value!r} is not one of {', '.join(CLASSES)}")
    return value


def counts_as_npu2(cls: str) -> bool:
    """True for the figures that may be shown as verified on NPU2, chosen as best or exported as measured."""
    return cls in (NPU2_MEASURED, IMPORTED_REGISTRY)


def harness_provenance(toolchain: Mapping[str, Any] | None, device: str | None,
                       ran: Mapping[str, Any] | None = None, *, ran_by_tool: bool = False) -> str:
    """The class of a harness (or `make profile`) run from what was probed where it ran: a stand-in decides first
    (the checkout's marker in the toolchain, or `ran.standin`: the command's directory or a path it named is part of
    a stand-in); then a named device with a real toolchain found is NPU2, provided a command the tool ran
    (`ran_by_tool`) recorded where it ran (`ran.cwd`); anything less is unattested. A transcript a person recorded
    (`ledger record harness`) ran nowhere the tool saw: its declared device and toolchain decide."""
    tc = dict(toolchain or {})
    ran = dict(ran or {})
    if any(tc.get(k) for k in STANDIN_KEYS) or ran.get("standin"):
        return STANDIN_REHEARSAL
    if ran_by_tool and not ran.get("cwd"):
        return UNATTESTED  # the tool ran it but did not record where: it cannot say no stand-in was involved
    if device and tc.get("mlir_air_commit") and any(tc.get(k) for k in ATTESTING_TOOLS):
        return NPU2_MEASURED
    return UNATTESTED


def run_provenance(prov: Mapping[str, Any] | None) -> str:
    """The class of a run's recorded provenance dict (command, toolchain, device, ran; a timing run's under
    `latency_run`): harness_provenance over those facts. A record with a `command` was run by the tool."""
    prov = dict(prov or {})
    ran = dict(prov.get("ran") or {})
    latency = prov.get("latency_run") or {}
    if isinstance(latency, Mapping) and (latency.get("ran") or {}).get("standin"):
        ran["standin"] = [*(ran.get("standin") or []), *latency["ran"]["standin"]]
    return harness_provenance(prov.get("toolchain"), prov.get("device"), ran, ran_by_tool=bool(prov.get("command")))


def kernel_row_provenance(payload: Mapping[str, Any]) -> str:
    """A KernelVerified payload's class, re-derived from its recorded facts (source, provenance.toolchain,
    provenance.device), never from its `provenance_class` claim."""
    source = payload.get("source") or "emulated"
    prov = payload.get("provenance") or {}
    if source == "imported":
        return IMPORTED_REGISTRY
    if source in ("harness", "diagnosis"):
        return run_provenance(prov)
    return CPU_EMULATOR


def claim_problem(claimed: str | None, derived: str) -> str | None:
    """A sentence when an event's recorded class differs from the one its facts give (None when they agree, or
    when the event predates the field)."""
    if not claimed or claimed == derived:
        return None
    if claimed == NPU2_MEASURED:
        return (f"claims {NPU2_MEASURED} but its recorded facts make it {derived} "
                "(an NPU2 measurement names its device and a probed toolchain, on a checkout that is not a stand-in)")
    return f"claims {claimed} but its recorded facts make it {derived}"


# the `source` a performance figure's record names (npu_kernels.backends.base.Measurement / Npu2Figures)
_MODELLED_SOURCES = (MODELLED_NPU2,)
_WALL_SOURCES = ("wall", CPU_EMULATOR)
_DEVICE_SOURCES = ("mlir-air-profile", "measured-npu2")


def figure_provenance(source: str, facts: Mapping[str, Any] | None) -> str:
    """The class of a performance figure from the source its record names and, for a device's figure, the facts
    recorded with it (toolchain, device, the backend's `stand_in`)."""
    facts = dict(facts or {})
    if source in _MODELLED_SOURCES:
        return MODELLED_NPU2
    if source in _WALL_SOURCES:
        return CPU_EMULATOR
    if source in _DEVICE_SOURCES:
        if facts.get("stand_in"):
            return STANDIN_REHEARSAL
        return run_provenance(facts)
    return UNATTESTED


def perf_run_facts(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded facts of the run behind a PerformanceMeasured payload (Phases 4-5: profile.provenance; Phase 6:
    profile.npu2.provenance), {} when it records none."""
    prof = payload.get("profile") or {}
    return dict(prof.get("provenance") or (prof.get("npu2") or {}).get("provenance") or {})


def perf_row_provenance(payload: Mapping[str, Any]) -> str:
    """A PerformanceMeasured payload's class, re-derived from its profile's source and recorded facts (Phases 4-5:
    profile.provenance; Phase 6: profile.npu2.provenance), never from its `provenance_class` claim."""
    prof = payload.get("profile") or {}
    facts = perf_run_facts(payload)
    source = str(prof.get("source") or "")
    if not source:  # a record that names no source is the executor's own wall time (registry.perf_records)
        return CPU_EMULATOR if payload.get("executor") in ("emulated", "torch") else UNATTESTED
    return figure_provenance(source, facts)
