"""`ledger twin DIR`: a stand-in for an mlir-air checkout, so the hardware workflow runs on a CPU.

`write_twin(dir)` writes a directory shaped like Xilinx/mlir-air: `programming_examples/<dir>/` for every
harness directory `npu_kernels/mlir_air/harnesses.toml` uses, each with a Makefile taking the variables (and
defaults) of mlir-air's own Makefile and forwarding them as the same flags (mlir_air_contract.md §1, each
cited in the generated Makefile), `programming_examples/weighted_rms_norm/weighted_rms_norm.py` (the table
calls that script directly), `programming_examples/layer_norm/layer_norm.py` (likewise), `programming_examples/llms/verify/verify_runner.py` with the part of mlir-air's
CLI the model Makefiles use, `programming_examples/llms/bench/sweep_prefill.py` (mlir-air's prefill sweep CLI
and lines over a model directory's `make profile-prefill CTX=L`, npu_kernels.mlir_air.twin.sweep_prefill),
`programming_examples/llms/bench/sweep_decode_runtime.py` (the runtime-context decode sweep over `make
profile-decode CONTEXTS=...`, npu_kernels.mlir_air.twin.sweep_decode_runtime), `toolchain.json` (the toolchain the
twin stands for, in the keys mlir-air's nightly records: llvm_aie_version, npu_kernels.mlir_air.toolchain_floor),
`programming_examples/llms/verify/prompts/{instruct,base}.txt` (npu-ledger's
own prompt sets, one per line, written here - mlir-air's prompts are never copied), a README saying the
latency figures are modelled, and a git repository with one commit (the "mlir-air commit" the tool records).

Every script calls back into npu-ledger with the interpreter recorded in the generated files
(`python -m npu_kernels.mlir_air.twin.harness KIND ...`), computed by the emulated executor.
Fault switch: `twin-faults.txt` in DIR (one harness KIND per line, optionally `KIND: compiler error text`)
or env NPU_LEDGER_TWIN_FAULTS makes that harness fail to compile (see `npu_kernels.mlir_air.twin.harness`).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from npu_kernels.mlir_air.checkout import MARKER, ROOT, is_twin  # noqa: F401 (is_twin: part of the twin's API)
from npu_kernels.mlir_air.toolchain_floor import TWIN_PEANO, write_twin_toolchain
from npu_kernels.model.prompts import BASE_PROMPTS, INSTRUCT_PROMPTS
from npu_kernels.numerics.kernels import stand_in_kinds_in_listing_order, stand_ins
from npu_kernels.settings import stand_in_python

# (directory, harness KIND, Makefile variables with their mlir-air defaults, run recipe's flags, extra targets): each
# kernel's `twin` stand-ins (npu_kernels.numerics.kernels.stand_ins; the Makefiles cited in the kernel's module, at
# e972f29)
HARNESS_DIRS: list[tuple[str, str, str, str, str]] = [
    (t.directory, kind, t.variables, t.flags, t.extra_targets) for kind, (_, t) in stand_ins().items() if t.makefile]
PEANO_ONLY = tuple(kind for kind, (_, t) in stand_ins().items() if t.peano_only)


def interpreter_line(root: Path) -> str:
    """The command every twin script runs: this interpreter, npu-ledger on PYTHONPATH, the twin root named."""
    return (f"PYTHONPATH={shlex.quote(str(ROOT))} NPU_LEDGER_TWIN_ROOT={shlex.quote(str(root))} "
            f"{shlex.quote(stand_in_python())} -m npu_kernels.mlir_air.twin.harness")


def _makefile(rel: str, kind: str, variables: str, flags: str, extra: str, twin: str) -> str:
    build = "BUILD_DIR := build_peano\n" if kind in PEANO_ONLY else \
        "ifdef PEANO_INSTALL_DIR\nBUILD_DIR := build_peano\nelse\nBUILD_DIR := build_chess\nendif\n"
    return (f"# npu-ledger twin of mlir-air programming_examples/{rel}/Makefile: same variables, same flags;\n"
            f"# computed by npu-ledger's emulated executor, latency from the NPU2 performance model (modelled).\n"
            f"srcdir := $(shell dirname $(realpath $(firstword $(MAKEFILE_LIST))))\n"
            f"TWIN := {twin}\n{build}{variables}\n"
            f".PHONY: all run profile clean\nall: run\n\n"
            f"run:\n\tmkdir -p $(BUILD_DIR) && cd $(BUILD_DIR) && $(TWIN) {kind} {flags}\n\n"
            f"{extra}\nclean:\n\trm -rf $(srcdir)/build_peano $(srcdir)/build_chess\n")


README = """# npu-ledger twin of an mlir-air checkout

Written by `ledger twin`. Shaped like Xilinx/mlir-air: the harness directories npu-ledger's harness table
uses, `programming_examples/llms/verify/verify_runner.py`, and model directories written by `ledger scaffold NAME
--stand-in emulated` (a hardware model directory cannot run here: `ledger scaffold` refuses one). Every Makefile takes mlir-air's variables and forwards them as mlir-air's flags; every script prints what
mlir-air prints. What differs:

* the numbers are computed by npu-ledger's **emulated** NPU2 executor, not by an NPU;
* every latency / throughput / TTFT / tokens-per-second figure is **modelled** (npu-ledger's NPU2
  performance model, `npu_kernels.perf`), printed in mlir-air's own line format so its parsers read it;
* the prompts under `programming_examples/llms/verify/prompts/` are npu-ledger's own prompt sets;
* the diagnosis report's rows carry an extra `npu_ledger` key (the whole-tensor cosine); the verify report
  holds mlir-air's keys only (npu-ledger's teacher-forced walk is each model directory's `make verify-walk`).

Fault switch: put a harness kind (KINDS) on a line of `twin-faults.txt` here (optionally `KIND: error text`), or in env
NPU_LEDGER_TWIN_FAULTS, and that harness fails to compile. A line `KIND: hang` makes that harness hang until it is
killed at its timeout. A line `profile-prefill@L: CAUSE` (or
`profile-decode@C: CAUSE`) makes a model directory's prefill at padded length L (decode at context C) fail with
that cause (no_registry_shape, bd_exhaustion, method_tile_mismatch, stitcher_mixed_tile_m, device_fail,
xrt_incomplete, host_oom, wrong_seq_len: engines built at another length), printed as mlir-air's sweeps read it.

Toolchain: `toolchain.json` here says which Peano (llvm_aie_version) the twin stands for; `ledger twin DIR
--peano VERSION` sets it, and `ledger doctor` refuses one below the contract's floor.
""".replace("KINDS", ", ".join(stand_in_kinds_in_listing_order()))


def _verify_runner_script() -> str:
    return ("#!/usr/bin/env python3\n"
            "# npu-ledger twin of mlir-air programming_examples/llms/verify/verify_runner.py (its CLI, report schema\n"
            "# and [verify] lines); the work is npu-ledger's npu_kernels.mlir_air.twin.verify_runner.\n"
            "import os, sys\n"
            f"ROOT = {str(ROOT)!r}\nPY = {stand_in_python()!r}\n"
            "env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get('PYTHONPATH')) if p),\n"
            "           NPU_LEDGER_VERIFY_DIR=os.path.dirname(os.path.abspath(__file__)))\n"
            "os.execve(PY, [PY, '-m', 'npu_kernels.mlir_air.twin.verify_runner', *sys.argv[1:]], env)\n")


def _bench_script(name: str, module: str) -> str:
    return ("#!/usr/bin/env python3\n"
            f"# npu-ledger twin of mlir-air programming_examples/llms/bench/{name}.py (its CLI, lines and --out\n"
            f"# record); the work is npu-ledger's {module}.\n"
            "import os, sys\n"
            f"ROOT = {str(ROOT)!r}\nPY = {stand_in_python()!r}\n"
            "env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get('PYTHONPATH')) if p))\n"
            f"os.execve(PY, [PY, '-m', {module!r}, *sys.argv[1:]], env)\n")


def _script(kind: str, root: Path) -> str:
    return ("#!/usr/bin/env python3\n"
            f"# npu-ledger twin of an mlir-air harness script ({kind}); runs npu_kernels.mlir_air.twin.harness.\n"
            "import os, sys\n"
            f"ROOT = {str(ROOT)!r}\nPY = {stand_in_python()!r}\n"
            f"env = dict(os.environ, PYTHONPATH=ROOT, NPU_LEDGER_TWIN_ROOT={str(root)!r})\n"
            f"os.execve(PY, [PY, '-m', 'npu_kernels.mlir_air.twin.harness', {kind!r}, *sys.argv[1:]], env)\n")


def write_twin(directory: str | Path, peano: str = TWIN_PEANO) -> Path:
    """Write the twin into `directory` (created; an existing twin is rewritten, anything else refused); `peano` is
    the llvm-aie version its toolchain record says (npu_kernels.mlir_air.toolchain_floor.TWIN_TOOLCHAIN)."""

    root = Path(directory).expanduser().resolve()
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise FileExistsError(f"{root} exists and is not an npu-ledger twin: give an empty or new directory")
    pe = root / "programming_examples"
    twin = interpreter_line(root)
    for rel, kind, variables, flags, extra in HARNESS_DIRS:
        d = pe / rel
        d.mkdir(parents=True, exist_ok=True)
        (d / "Makefile").write_text(_makefile(rel, kind, variables, flags, extra, twin))
    for kind, (_, t) in stand_ins().items():  # the scripts the harness table runs directly (a stand-in's `script`)
        if t.script:
            script = pe / t.directory / t.script
            script.parent.mkdir(parents=True, exist_ok=True)  # a stand-in without a Makefile has no directory yet
            script.write_text(_script(kind, root))
            script.chmod(0o755)
    verify = pe / "llms" / "verify"
    (verify / "prompts").mkdir(parents=True, exist_ok=True)
    runner = verify / "verify_runner.py"
    runner.write_text(_verify_runner_script())
    runner.chmod(0o755)
    for name, prompts in (("instruct", INSTRUCT_PROMPTS), ("base", BASE_PROMPTS)):
        body = "\n".join(p.replace("\n", " ") for p in prompts)
        (verify / "prompts" / f"{name}.txt").write_text(f"# npu-ledger's own {name} prompts (one per line)\n{body}\n")
    (verify / ".gitignore").write_text("reports/\n__pycache__/\n")
    bench = pe / "llms" / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    for name in ("sweep_prefill", "sweep_decode_runtime"):
        script = bench / f"{name}.py"
        script.write_text(_bench_script(name, f"npu_kernels.mlir_air.twin.{name}"))
        script.chmod(0o755)
    write_twin_toolchain(root, peano)
    (root / "README.md").write_text(README)
    (root / MARKER).write_text("npu-ledger twin\n")
    (root / ".gitignore").write_text("build_peano/\nbuild_chess/\n__pycache__/\n")
    _git_commit(root, "npu-ledger twin of an mlir-air checkout")
    return root


def _git_commit(root: Path, message: str) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True)

    if not (root / ".git").exists():
        git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=npu-ledger", "-c", "user.email=twin@npu-ledger.invalid", "commit", "-q",
        "--allow-empty", "-m", message)
