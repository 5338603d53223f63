"""The mlir-air contract check with the registry's part added: what `ledger doctor` and the advance preflight run.

`doctor_checks()` is `npu_kernels.mlir_air.contract`'s checks plus the tested-shapes table headers
`registry.mlir_air_tables` reads and writes (supported_kernels.md and details/<page>.md at e972f29, the pages
mlir-air had then; the later kernels' pages are optional import schemas, not part of the contract).
`doctor(dir)` gives one `ContractFinding` per check, then one `new` finding per tested-shapes table beyond the contract
(`registry_news`: informative, never failing); `toolchain_refusal(dir)` is one line when the toolchain is below the
contract's floor (npu_kernels.mlir_air.toolchain_floor); `preflight(dir)` is None when `dir` can be run against (a
checkout meeting the contract, a toolchain meeting the floor), else one line saying why not;
`advance_refusal(state, name)` is that check for `ledger advance` of an mlir-air
deployment.
"""

from __future__ import annotations

from pathlib import Path

from handlers.gates.runtime import backend_class
from npu_kernels.backends.model_backends import backend_type
from statemachine.state import DeploymentState
from npu_kernels.mlir_air.table import ENV_TABLE
from npu_kernels.mlir_air.contract import CONTRACT_COMMIT, Check, ContractFinding, check_checkout, table_checks, usable_checkout
from npu_kernels.mlir_air.toolchain_floor import floor_refusal, known_bad, toolchain_versions
from registry.importer_scan import read_markdown
from registry.mlir_air_tables import DETAILS, INDEX, LATER, PAGE_OF
from statemachine.phases import Phase, Status
from npu_kernels.settings import env_get

REGISTRY = "programming_examples/kernel_registry"


def doctor_checks() -> list[Check]:
    files: dict[str, list[tuple[str, ...]]] = {f"{REGISTRY}/supported_kernels.md": list(INDEX.values())}
    for key, tables in DETAILS.items():
        files[f"{REGISTRY}/details/{PAGE_OF[key]}.md"] = [header for _, header in tables]
    return table_checks(files, at=f"{CONTRACT_COMMIT[:7]} (registry.mlir_air_tables: supported_kernels.md:41-334, "
                                  "details/*.md:90-177)")


def registry_news(directory: str | Path) -> list[ContractFinding]:
    """Tested-shapes tables the checkout's registry has beyond the contract (status `new`, never failing): those
    of kernels mlir-air added later that the importer has a schema for (`LATER`), and those it has none for
    (`ledger registry import` refuses their rows unless --allow-skip)."""
    folder = Path(directory) / REGISTRY
    if not folder.is_dir():
        return []
    out = []
    for a in read_markdown(folder)[1]:
        if a.kernel in LATER:
            spec = LATER[a.kernel]
            page, at = (("supported_kernels", spec["index_commit"]) if a.file == "supported_kernels.md"
                        else (spec["page"], spec["commit"]))
            note = f"read by the importer's {a.kernel} schema ({page}.md at {at[:7]})"
        elif any("no schema" in s for s in a.skipped):
            note = "no schema: `ledger registry import` refuses these rows (--allow-skip imports the rest)"
        else:
            continue
        check = Check(what="a tested-shapes table beyond the contract", file=f"{REGISTRY}/{a.file}", at="",
                      kind="new_table", items=(a.header,), twin="")
        out.append(ContractFinding(check, "new", (f"[{a.header}] {a.read} row(s): {note}",), read=a.file))
    return out


def doctor(directory: str | Path) -> list[ContractFinding]:
    return check_checkout(directory, doctor_checks()) + registry_news(directory)


def toolchain_refusal(directory: str | None, model: str | None = None) -> str | None:
    """One line when the toolchain this checkout builds with is below a contract floor (the Peano version mlir-air's
    nightly records: npu_kernels.mlir_air.toolchain_floor), for every model or for `model`'s directory; else None."""
    return floor_refusal(toolchain_versions(directory), model)


def toolchain_warning(directory: str | None) -> str | None:
    """One line when the toolchain is a version mlir-air found to build wrong code, else None."""
    return known_bad(toolchain_versions(directory))


def preflight(directory: str | None, model: str | None = None) -> str | None:
    return usable_checkout(directory, doctor_checks()) or toolchain_refusal(directory, model)


def advance_refusal(state: DeploymentState, name: str, mlir_air_dir: str | None = None) -> str | None:
    """One line refusing `ledger advance NAME` before any attempt is opened, when the folded deployment `state`
    runs on the mlir-air executor (its backend is `hardware`: an mlir-air checkout's model directory), has a phase
    to run, and `mlir_air_dir` (default $MLIR_AIR_DIR) is not a usable checkout; None otherwise (a finished
    deployment is left to `advance` to report). `advance` calls it on its own fold (AdvanceRequest.preflight)."""
    if not backend_class(state).hardware or state.status in (Status.DEPLOYED, Status.REJECTED, Status.NEEDS_HUMAN_REVIEW):
        return None
    if env_get(ENV_TABLE) and Phase.KERNELS not in state.passed:
        return None  # Phase 1 runs the commands of the harness table given ($NPU_LEDGER_HARNESSES), not a checkout's
    why = preflight(mlir_air_dir if mlir_air_dir is not None else env_get("MLIR_AIR_DIR"), name)
    return f"{name} runs on mlir-air and {lower_first(why)}; nothing was run" if why else None


def checkout_refusal(executor: str, mlir_air_dir: str | None = None) -> str | None:
    """Why a deployment on `executor` cannot be recorded here: an executor that runs mlir-air's harnesses (its
    backend is `hardware`) with no usable checkout at `mlir_air_dir` (default $MLIR_AIR_DIR), the line `advance`
    would refuse with; None otherwise, and when Phase 1 runs a harness table's own commands ($NPU_LEDGER_HARNESSES)."""
    if not backend_type(executor).hardware or env_get(ENV_TABLE):
        return None
    return preflight(mlir_air_dir if mlir_air_dir is not None else env_get("MLIR_AIR_DIR"))


def lower_first(sentence: str) -> str:
    """`sentence` continuing another: its first letter lower-cased unless it starts a name written in capitals
    (`MLIR_AIR_DIR is not set` stays as it is)."""
    return sentence[:1].lower() + sentence[1:] if sentence[1:2].islower() else sentence
