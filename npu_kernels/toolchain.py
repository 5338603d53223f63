"""The toolchain a measurement ran on, as every KernelVerified (`provenance["toolchain"]`) and every
PerformanceMeasured (`toolchain`) records it.

`current_toolchain(executor)` is a flat dict of strings (a value None means "looked for, not found"):

  npu_ledger          this package's version (every executor)
  executor            emulated | torch | mlir-air
  emulated_numerics   EMULATED_NUMERICS_VERSION (emulated: the CPU model of the NPU2 datapath is the "compiler")
  perf_model          PERF_MODEL_VERSION (emulated / torch: the modelled NPU2 figures come from it)
  torch               torch's version (torch executor)
  mlir_air_commit, aie_opt, air_opt, xrt_smi, peano
                      on an NPU2 machine: the mlir-air checkout's commit and the versions found
                      (npu_kernels.mlir_air.lock.probe_toolchain; peano's clang from PEANO_INSTALL_DIR)
  llvm_aie_version, mlir_aie_hash
                      on mlir-air: the Peano (llvm-aie) version and the checkout's pinned mlir-aie commit, in the keys
                      mlir-air's nightly records them (npu_kernels.mlir_air.toolchain_floor; a twin: its toolchain.json)
  mlir_air_contract   the mlir-air contract version the checkout was read by (npu_kernels.mlir_air.contract);
                      absent on rows recorded before it existed
  standin            on a `ledger twin` checkout: "ledger twin" (npu_kernels.mlir_air.lock.probe_toolchain reads its marker);
                      npu_kernels.provenance makes every figure run there a stand-in rehearsal
  standin_fault       only on rows of a declared stand-in fault (npu_kernels.numerics.executors.standin): never on real rows

`toolchain_label` renders one as a short, stable text (the history projection's x axis);
`toolchain_changes(recorded, current)` names the keys that differ (what `ledger reverify` reports).
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Mapping

from npu_kernels.numerics.executors.emulated import EMULATED_NUMERICS_VERSION
from npu_kernels.mlir_air.lock import first_output_line, probe_toolchain
from npu_kernels.perf import PERF_MODEL_VERSION
from npu_kernels.settings import env_get

# the keys that identify a toolchain, in the order labels show them
KEYS = ("npu_ledger", "executor", "emulated_numerics", "perf_model", "torch", "mlir_air_commit", "mlir_air_contract",
        "aie_opt",
        "air_opt", "xrt_smi", "peano", "llvm_aie_version", "mlir_aie_hash", "standin", "standin_fault")


@lru_cache(maxsize=1)
def npu_ledger_version() -> str:
    try:
        return version("npu-ledger")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+source"


def _peano_version() -> str | None:
    root = env_get("PEANO_INSTALL_DIR")
    return first_output_line([os.path.join(root, "bin", "clang"), "--version"]) if root else None


def current_toolchain(executor: str, *, mlir_air_dir: str | None = None) -> dict[str, Any]:
    """The toolchain `executor` runs on in this process (mlir-air: probed; see the module docstring)."""
    tc: dict[str, Any] = {"npu_ledger": npu_ledger_version(), "executor": executor}
    if executor == "mlir-air":
        tc.update(_mlir_air_toolchain(mlir_air_dir if mlir_air_dir is not None else env_get("MLIR_AIR_DIR")))
        return tc
    if executor == "torch":
        import torch  # only on the torch executor: torch is slow to import and the others never need it

        tc["torch"] = str(torch.__version__)
    else:
        tc["emulated_numerics"] = EMULATED_NUMERICS_VERSION
    tc["perf_model"] = PERF_MODEL_VERSION
    return tc


@lru_cache(maxsize=4)
def _mlir_air_probe(mlir_air_dir: str | None) -> tuple[tuple[str, Any], ...]:
    found = dict(probe_toolchain(mlir_air_dir))
    found["peano"] = _peano_version()
    return tuple(sorted(found.items()))


def _mlir_air_toolchain(mlir_air_dir: str | None) -> dict[str, Any]:
    return dict(_mlir_air_probe(mlir_air_dir))


def with_npu_ledger(toolchain: Mapping[str, Any] | None, executor: str) -> dict[str, Any]:
    """A toolchain dict an executor recorded (mlir-air's probe), completed with npu-ledger's version."""
    return {"npu_ledger": npu_ledger_version(), "executor": executor, **dict(toolchain or {})}


def toolchain_label(tc: Mapping[str, Any] | None) -> str:
    """A short stable text naming the toolchain ("unrecorded" for rows written before provenance existed)."""
    if not tc:
        return "unrecorded"
    parts = []
    for key in KEYS:
        value = tc.get(key)
        if value is None or key == "executor":
            continue
        text = str(value)
        if key == "mlir_air_commit":
            text = text[:10]
        parts.append(f"{key.replace('_', '-')} {text}")
    return f"{tc.get('executor', '?')}: " + ", ".join(parts)


def toolchain_changes(recorded: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """What differs between a recorded toolchain and the current one, as 'key: old -> new' lines."""
    if not recorded:
        return ["no toolchain recorded (a row written before provenance existed)"]
    keys = [k for k in KEYS if k in recorded or k in current] + sorted((set(recorded) | set(current)) - set(KEYS))
    return [f"{k}: {recorded.get(k)} -> {current.get(k)}" for k in keys if recorded.get(k) != current.get(k)]
