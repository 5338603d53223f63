"""What an mlir-air checkout is to the tool: a real one, or the stand-in `ledger twin` writes (its marker file),
and the npu-ledger checkout whose code the stand-in's scripts and a scaffolded model directory call back into."""

from __future__ import annotations

import shlex
from pathlib import Path

MARKER = ".npu-ledger-twin"  # written at the root of a stand-in checkout (npu_kernels.mlir_air.twin.write_twin)
ROOT = Path(__file__).resolve().parents[2]  # the npu-ledger checkout (the folder holding npu_kernels/)


def is_twin(directory: str | Path | None) -> bool:
    """True when `directory` is a stand-in checkout written by `ledger twin`."""
    return bool(directory) and (Path(directory) / MARKER).is_file()


# What every stand-in script runs: the twin's harnesses, its verify runner and the stand-in model directory's adapter
# and inference module all call back into this package (npu_kernels.mlir_air.twin); mlir-air's own files never do.
STANDIN_CODE = "npu_kernels.mlir_air.twin"
STANDIN_MODEL_FILE = "stand_in.json"  # written by `ledger scaffold NAME --stand-in emulated` (npu_kernels.mlir_air.scaffold)
_CODE_SUFFIXES = (".py", ".sh", ".mk")
_CODE_NAMES = ("Makefile", "makefile", "GNUmakefile")
_SCAN_FILES = 64  # code files read per directory, at most
_SCAN_BYTES = 1 << 20  # one file read, at most (a Makefile or script; larger files are not scripts we run)
_STANDIN_PACKAGE = ROOT / "npu_kernels" / "mlir_air" / "twin"  # STANDIN_CODE's folder in this checkout


def _reads_standin_code(path: Path) -> bool:
    try:
        if not path.is_file() or path.stat().st_size > _SCAN_BYTES:
            return False
        with open(path, "rb") as f:
            return STANDIN_CODE.encode() in f.read(_SCAN_BYTES)
    except OSError:
        return False


def _code_files(directory: Path) -> list[Path]:
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return []
    return [p for p in entries if p.name in _CODE_NAMES or p.suffix in _CODE_SUFFIXES][:_SCAN_FILES]


def standin_reasons(path: str | Path) -> list[str]:
    """Why `path` (a file or directory a command ran in or named) is part of a stand-in, one phrase each; empty
    when it is not: inside a `ledger twin` checkout (its marker in the path or an ancestor), inside a stand-in model
    directory (stand_in.json beside it or above), or a script or directory whose code calls the stand-in package
    (STANDIN_CODE: a twin copied without its marker, a stand-in scaffold without its stand_in.json). npu-ledger's
    own checkout (ROOT) is not read as code: a hardware model directory runs npu-ledger's walk from it."""
    p = Path(path)
    reasons: list[str] = []
    for anc in (p, *p.parents):
        if (anc / MARKER).is_file():
            reasons.append(f"inside a `ledger twin` checkout ({MARKER} in {anc.name or anc})")
            break
    for anc in (p, *p.parents):
        if (anc / STANDIN_MODEL_FILE).is_file():
            reasons.append(f"inside a stand-in model directory ({STANDIN_MODEL_FILE} in {anc.name})")
            break
    if p == ROOT or ROOT in p.parents:
        if p == _STANDIN_PACKAGE or _STANDIN_PACKAGE in p.parents:
            reasons.append("npu-ledger's stand-in code (npu_kernels/mlir_air/twin)")
        return reasons
    if p.is_dir():
        code = [f for f in _code_files(p) if _reads_standin_code(f)]
        if code:
            reasons.append(f"its {code[0].name} runs npu-ledger's stand-in ({STANDIN_CODE})")
    elif _reads_standin_code(p):
        reasons.append(f"a script that runs npu-ledger's stand-in ({STANDIN_CODE})")
    return reasons


def _named_paths(command: str, cwd: Path) -> tuple[list[Path], list[str]]:
    """The existing paths a shell command names (each word, a `KEY=value`'s or `--opt=value`'s value, resolved
    against `cwd`), and the Python modules it runs (`-m MODULE`)."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: read the words as the shell would not; take them whitespace-split
        words = command.split()
    paths: list[Path] = []
    modules: list[str] = []
    for i, word in enumerate(words):
        if i > 0 and words[i - 1] == "-m":
            modules.append(word)
        candidates = [word]
        if "=" in word:
            candidates.append(word.split("=", 1)[1])
        for text in candidates:
            if not text or len(text) > 4096 or "\x00" in text:
                continue
            candidate = Path(text) if text.startswith("/") else cwd / text
            try:
                if candidate.exists():
                    resolved = candidate.resolve()
                    if resolved not in paths:
                        paths.append(resolved)
            except (OSError, RuntimeError):
                continue
    return paths, modules


def where_it_ran(command: str, cwd: str | Path | None = None) -> dict:
    """The facts a harness or model-directory run records of where it ran (`provenance["ran"]`), from which
    npu_kernels.provenance decides whether its figures can be NPU2 measurements:

      cwd       the working directory the command ran in, resolved
      paths     every existing path the command names (resolved: links followed), its make variables' values included
      standin   [{"path", "why"}]: each of those (and the working directory) that is part of a stand-in
                (standin_reasons), and each `-m` module of npu-ledger's stand-in package

    Decided from what the command ran, never from where MLIR_AIR_DIR points: a harness table whose commands run a
    twin's harnesses while MLIR_AIR_DIR names a real checkout is a stand-in, as is a stand-in model directory
    scaffolded into a real checkout."""
    here = Path(cwd).resolve() if cwd else Path.cwd().resolve()
    paths, modules = _named_paths(command, here)
    standin = [{"path": str(p), "why": why} for p in [here, *paths] for why in standin_reasons(p)]
    standin += [{"path": f"-m {m}", "why": f"npu-ledger's stand-in module ({STANDIN_CODE})"}
                for m in modules if m == STANDIN_CODE or m.startswith(STANDIN_CODE + ".")]
    return {"cwd": str(here), "paths": [str(p) for p in paths], "standin": standin}
