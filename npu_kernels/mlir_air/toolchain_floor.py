"""The toolchain versions an mlir-air run records, and the floor below which the contract says nothing builds
(issue #38 item 4): Peano >= 21 for every model, the llvm-aie mlir-air's CI pins at e972f29, and >= 22 for a
model directory that requires it (gemma4_e2b_q4nx's lit `REQUIRES: peano_ge22`); a version mlir-air found to build
wrong code is named (`known_bad`), with the build its nightly verifies with since (22.0.0.2026090201+a36c62b9 on
2026-09-14, issue 46).

Versions, in the keys mlir-air's nightly records with every perf row (.github/workflows/nightlyPerfBenchmark.yml
@0252fbd, step "Combine perf JSON": `toolchain.llvm_aie_version` is `pip show llvm-aie`'s Version, e.g.
"21.0.0.2026080601+f4a72c27"; `toolchain.mlir_aie_hash` is the `HASH=` line of the checkout's
utils/clone-mlir-aie.sh):

* `llvm_aie_version` (Peano): on a `ledger twin` checkout, its `toolchain.json` (the twin's record, written by
  `write_twin_toolchain`, in the nightly's key); else the installed `llvm-aie` distribution's version (what `pip
  show` reads); else the version in `$PEANO_INSTALL_DIR/bin/clang --version` ("clang version 21.0.0..."); None
  when none is found.
* `mlir_aie_hash`: the checkout's utils/clone-mlir-aie.sh `HASH=` (None in a twin, which has no such file).

The floors are contract.toml's `[[toolchain.floor]]` entries (key, tool, min_major, source): `floor_refusal(v)`
is None when every recorded version meets its floor (an unknown version is not refused: nothing says it is
below), else one line naming the tool, its version, the floor and the floor's source.

Imports: the standard library and npu_kernels.mlir_air.checkout only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Mapping

import tomllib

from npu_kernels.mlir_air.checkout import is_twin
from npu_kernels.settings import env_get

TOOLCHAIN = tomllib.loads((Path(__file__).resolve().parent / "contract.toml").read_text(encoding="utf-8")).get("toolchain", {})
FLOORS: tuple[dict[str, Any], ...] = tuple(TOOLCHAIN.get("floor", ()))
KNOWN_BAD: tuple[dict[str, Any], ...] = tuple(TOOLCHAIN.get("known_bad", ()))
TWIN_TOOLCHAIN = "toolchain.json"  # at a twin's root: {"llvm_aie_version": ...}, the nightly's key
# the twin's default Peano: the llvm-aie mlir-air's CI pins at e972f29 (nightlyPerfBenchmark.yml:154)
TWIN_PEANO = "21.0.0.2026080601+f4a72c27"
PEANO_VERSION = r"\d+(\.\d+)*([.+][0-9A-Za-z.+]*)?"  # a version as `ledger twin --peano` (and its MCP tool) take it
_HASH = re.compile(r"^\s*(?:export\s+)?HASH=([0-9a-f]{7,40})\s*$", re.M)
_CLANG = re.compile(r"clang version (\d+(?:\.\d+)*)")


def write_twin_toolchain(root: str | Path, peano: str) -> None:
    """A twin's toolchain record: the Peano version it stands for, under the nightly's key."""
    (Path(root) / TWIN_TOOLCHAIN).write_text(json.dumps({"llvm_aie_version": peano}, indent=2) + "\n")


def _twin_record(root: str | Path) -> dict[str, Any]:
    try:
        rec = json.loads((Path(root) / TWIN_TOOLCHAIN).read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _clang_version() -> str | None:
    root = env_get("PEANO_INSTALL_DIR")
    if not root:
        return None
    try:
        r = subprocess.run([os.path.join(root, "bin", "clang"), "--version"], capture_output=True, text=True,
                           timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    m = _CLANG.search(r.stdout + r.stderr)
    return m.group(1) if m else None


def peano_version(mlir_air_dir: str | None) -> str | None:
    """The Peano (llvm-aie) version the run builds with (see the module docstring), or None when unknown."""
    if mlir_air_dir and is_twin(mlir_air_dir):
        found = _twin_record(mlir_air_dir).get("llvm_aie_version")
        return str(found) if found else None
    try:
        return version("llvm-aie")
    except PackageNotFoundError:
        return _clang_version()


def mlir_aie_hash(mlir_air_dir: str | None) -> str | None:
    """The mlir-aie commit the checkout pins (utils/clone-mlir-aie.sh `HASH=`), or None."""
    if not mlir_air_dir:
        return None
    try:
        text = (Path(mlir_air_dir) / "utils" / "clone-mlir-aie.sh").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = _HASH.search(text)
    return m.group(1) if m else None


def toolchain_versions(mlir_air_dir: str | None) -> dict[str, str | None]:
    """The versions the nightly records, for this checkout and machine."""
    return {"llvm_aie_version": peano_version(mlir_air_dir), "mlir_aie_hash": mlir_aie_hash(mlir_air_dir)}


def major(text: str | None) -> int | None:
    m = re.match(r"\s*(\d+)", str(text or ""))
    return int(m.group(1)) if m else None


def floor_refusal(versions: Mapping[str, Any], model: str | None = None) -> str | None:
    """None when every version meets its contract floor (or is unknown); else one line naming the floor. A floor
    with `models` applies only to those model directories (`model`: the deployment's directory name)."""
    for f in FLOORS:
        if f.get("models") and model not in f["models"]:
            continue
        have = versions.get(f["key"])
        got = major(have)
        if got is not None and got < int(f["min_major"]):
            return (f"{f['tool']} {have} is below the toolchain floor {f['tool']} >= {f['min_major']} "
                    f"(contract.toml [toolchain]; {f['source']})")
    return None


def known_bad(versions: Mapping[str, Any]) -> str | None:
    """One line when a recorded version is one mlir-air found to build wrong code (contract.toml
    [[toolchain.known_bad]]), naming the build mlir-air's nightly verifies with instead when the entry has one;
    else None."""
    for bad in KNOWN_BAD:
        if versions.get(bad["key"]) == bad["version"]:
            instead = (f"; mlir-air's nightly verifies with {bad['instead']} ({bad['instead_source']})"
                       if bad.get("instead") else "")
            return f"{bad['key']} {bad['version']} is known to build wrong code ({bad['source']}){instead}"
    return None
