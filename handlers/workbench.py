"""Verbs of the engineer's workbench that used to sit inside a click command, for the CLI and the MCP server to
share: `ledger quantize`, `ledger scaffold`, `ledger doctor`, and what `ledger init` names next (`next_steps`).
Each returns what its `--json` prints (`handlers.results_workbench`) or raises one line (ValueError /
`ScaffoldError`), never prints.

Imports: handlers (doctor, gates, uow), kernels, registry.
"""

from __future__ import annotations

from pathlib import Path

from handlers.doctor import doctor, toolchain_refusal, toolchain_warning
from handlers.gates import GateRun
from handlers.gates.runtime import declared_options
from handlers.uow import DeploymentUnit
from npu_kernels.backends.model_backends import backend_type
from npu_kernels.mlir_air.checkout import ROOT, is_twin
from npu_kernels.mlir_air.contract import CONTRACT_COMMIT, CONTRACT_VERSION, looks_like_checkout
from npu_kernels.mlir_air.lock import probe_toolchain
from npu_kernels.mlir_air.scaffold import ScaffoldError, scaffold
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.q4nx_bundle import BUNDLE_FILE, write_bundle
from registry.model_docs import model_dir_name
from registry.text import ledger_command
from npu_kernels.settings import env_get

ENV_MLIR_AIR = "MLIR_AIR_DIR"


def mlir_air_dir(given: str | None = None) -> str:
    """`given`, else $MLIR_AIR_DIR; ValueError when neither names one."""
    root = given or env_get(ENV_MLIR_AIR)
    if not root:
        raise ValueError("MLIR_AIR_DIR is not set: point it at an mlir-air checkout (or `ledger twin DIR`)")
    return root


def quantize_folder(folder: str | Path, out: str | Path, layout: str = "llama", fmt: str = "q4nx") -> dict:
    """`ledger quantize FOLDER --to q4nx OUT`: the bundle written (`write_bundle`'s account), its path and format;
    OUT a folder gets `model.q4nx` inside."""
    config = resolve(load_raw_config(Path(folder)))
    target = Path(out)
    target = target / BUNDLE_FILE if target.is_dir() else target
    written = write_bundle(folder, target, config, layout)
    return {**written, "path": str(target), "format": fmt, "layout": layout}


def scaffold_deployment(ledger, workspace: Path, name: str, root: str | None = None,
                        stand_in: str | None = None) -> dict:
    """`ledger scaffold NAME`: NAME's model directory in the mlir-air checkout `root` (default $MLIR_AIR_DIR):
    {"dir", "written", "kept"}. Raises ScaffoldError / ValueError with one line."""
    state = DeploymentUnit(ledger, name).state
    if not state.config:
        raise ScaffoldError(f"deployment {name!r} has no resolved config (is it in scope?)")
    config = GateRun(state=state, workspace=workspace).config
    return scaffold(mlir_air_dir(root), model_dir_name(name), state.model_path, config, stand_in,
                    switches=declared_options(state)[0], drafter=bool(state.drafter))


def next_steps(name: str, executor: str, root: str | None = None) -> str:
    """What `ledger init NAME` names next: `ledger advance NAME`, preceded, for an executor that runs an mlir-air
    model directory, by the `ledger scaffold` that writes it in the checkout `root` (default $MLIR_AIR_DIR): with
    `--stand-in emulated` on a twin, where a hardware directory cannot run (`scaffold` refuses one there)."""
    advance = ledger_command("advance", name)
    if not backend_type(executor).hardware:
        return advance
    root = root or env_get(ENV_MLIR_AIR)
    scaffold_line = ledger_command("scaffold", name, *(("--stand-in", "emulated") if is_twin(root) else ()))
    where = "" if root else f" (with {ENV_MLIR_AIR} pointing at the mlir-air checkout)"
    return f"{scaffold_line}{where}, then {advance}"


def twin_copy(finding, directory: str | Path) -> str | None:
    """The npu-ledger file (relative to its checkout) a check read in place of the checkout's own, in a
    `ledger twin` directory; None when it read the directory's file (or nothing)."""
    if not finding.read or not is_twin(directory):
        return None
    read = Path(finding.read)
    if read.is_relative_to(Path(directory).resolve()) or read == Path(directory) / finding.check.file:
        return None
    return str(read.relative_to(ROOT)) if read.is_relative_to(ROOT) else read.name


def doctor_report(directory: str | None = None) -> dict:
    """`ledger doctor [DIR] --json`: the checkout, its commit and toolchain (its floor's refusal or warning), the
    contract, each finding (with `twin_copy`: the stand-in's own file a twin's check read) and whether it is clean.
    ValueError: no checkout given or found."""
    directory = mlir_air_dir(directory)
    if not Path(directory).is_dir() or not looks_like_checkout(directory):
        raise ValueError(f"{directory} is not an mlir-air checkout (no programming_examples/llms/verify/"
                         "verify_runner.py)")
    findings = doctor(directory)
    refused = toolchain_refusal(directory)  # below the toolchain floor: nothing built with it is usable
    probed = dict(probe_toolchain(directory))
    return {"checkout": str(directory), "commit": probed.get("mlir_air_commit"),
            "contract_version": CONTRACT_VERSION, "contract_commit": CONTRACT_COMMIT, "twin": is_twin(directory),
            "clean": not any(f.fails for f in findings) and not refused,
            "toolchain": {k: probed.get(k) for k in ("llvm_aie_version", "mlir_aie_hash")},
            "toolchain_refusal": refused, "toolchain_warning": toolchain_warning(directory),
            "findings": [{**f.as_json(), "fails": f.fails, "twin_copy": twin_copy(f, directory)} for f in findings]}
