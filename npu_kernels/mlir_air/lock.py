"""The NPU lock, harness subprocesses and toolchain/device probes of the mlir-air path.

`npu_lock` is `flock(2)` on /tmp/mlir-air-npu.lock, the lock mlir-air's Makefiles take; `run_command` runs a
harness in its own process group and kills the group on timeout, keeping the partial transcript. `run_retried`
re-runs a command that gave no verdict (timed out, or said INCONCLUSIVE as mlir-air's scripts do) in a fresh process,
up to DEVICE_RUN_TRIES times, and raises `HarnessInconclusive` when none gave one (npu_kernels.inconclusive:
mlir-air's Gemma4 gate does the same).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from typing import Iterator

import structlog

from npu_kernels.inconclusive import Inconclusive
from npu_kernels.mlir_air.checkout import is_twin
from npu_kernels.mlir_air.contract import CONTRACT_VERSION
from npu_kernels.mlir_air.table import HarnessError
from npu_kernels.mlir_air.toolchain_floor import toolchain_versions

DEFAULT_LOCK_PATH = "/tmp/mlir-air-npu.lock"
# fresh processes a device run gets when it times out: mlir-air's SCORE_ATTEMPTS (gemma4_e2b_q4nx/Makefile@15135e8,
# `define score_layer`). A TDR is "a few percent of NPU2 dispatches" there, so three timeouts in a row is no longer
# chance; the taint "is not cleared inside the process", hence a new process each time, never an in-process retry.
DEVICE_RUN_TRIES = 3

log = structlog.get_logger("npu_ledger.mlir_air")


class NpuLockTimeout(HarnessError):
    """Raised when the NPU lock is still held by another process after the lock timeout."""


class HarnessTimeout(HarnessError):
    """Raised when a harness command runs past its timeout; `transcript` holds what it printed so far."""

    def __init__(self, message: str, command: str, transcript: str) -> None:
        super().__init__(message)
        self.command = command
        self.transcript = transcript


class HarnessInconclusive(HarnessTimeout, Inconclusive):
    """Raised when none of `tries` fresh runs of a command gave a verdict: no verdict either way (a HarnessTimeout
    for the callers that only know a timeout; an `Inconclusive` for the deploy handler, which records it as such)."""

    def __init__(self, message: str, command: str, transcript: str, tries: int) -> None:
        HarnessTimeout.__init__(self, message, command, transcript)
        self.reason, self.tries, self.evidence = message, tries, None


@contextmanager
def npu_lock(path: str = DEFAULT_LOCK_PATH, timeout_s: float = 1800.0, poll_s: float = 0.05) -> Iterator[float]:
    """Hold an exclusive `flock` on `path` (created if missing); yields the seconds spent waiting.

    Compatible with `flock -x /tmp/mlir-air-npu.lock ...`: both use flock(2). The descriptor is not
    inherited by child processes, and closing it releases the lock."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        fd = os.open(path, os.O_RDONLY)  # someone else's lock file: flock works on a read-only descriptor
    t0 = time.monotonic()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - t0 >= timeout_s:
                    raise NpuLockTimeout(
                        f"could not take the NPU lock {path} within {timeout_s:g} s: another process holds it "
                        "(an NPU run under `flock` on the same file)."
                    ) from None
                time.sleep(poll_s)
        yield time.monotonic() - t0
    finally:
        os.close(fd)


def run_command(command: str, timeout_s: float, cwd: str | None = None) -> tuple[int, str]:
    """Run `command` with /bin/sh in its own process group; return (exit status, stdout+stderr text).
    On timeout the whole group is killed and `HarnessTimeout` carries the partial output."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        text = out.decode("utf-8", errors="replace")
        raise HarnessTimeout(f"`{command}` timed out after {timeout_s:g} s and was killed.", command, text) from None
    return proc.returncode, out.decode("utf-8", errors="replace")


# What mlir-air's own scripts print when a run gave no verdict (the same third outcome, said by the run itself):
# validate_layer_npu.py's `main` prints "INCONCLUSIVE: layer N needed a retry ..." and exits 2 ("re-run me"), and
# the Makefile's `score_layer` (gemma4_e2b_q4nx/Makefile@15135e8) prints "FAIL: still INCONCLUSIVE after N attempts"
# and exits 1 once its own fresh-process retries are spent.
SAYS_INCONCLUSIVE = re.compile(r"^INCONCLUSIVE: ", re.M)
GAVE_UP_INCONCLUSIVE = re.compile(r"still INCONCLUSIVE after (\d+) attempts")


def run_retried(command: str, timeout_s: float, cwd: str | None = None,
                tries: int = DEVICE_RUN_TRIES) -> tuple[int, str, int]:
    """`run_command`, re-run in a fresh process (its own process group, as each run is) while it gives no verdict,
    up to `tries` runs: (exit status, transcript, how many earlier tries gave none). No verdict is a run killed at
    its timeout, or one that says so itself as mlir-air's scripts do (exit status 2 with an `INCONCLUSIVE:` line).
    Any other ending, whatever its exit status, ends the retries: a failure is a signal, and retrying it would hide
    it (mlir-air's Makefile on its exit 1). Every try without a verdict, or a run whose own retries gave up
    ("still INCONCLUSIVE after N attempts", never retried again here): `HarnessInconclusive` with the last
    transcript."""
    why = ""
    for n in range(1, tries + 1):
        try:
            rc, text = run_command(command, timeout_s, cwd)
        except HarnessTimeout as e:
            text, why = e.transcript, f"timed out after {timeout_s:g} s"
            log.warning("device run timed out", command=command, attempt=n, tries=tries, timeout_s=timeout_s)
            continue
        gave_up = GAVE_UP_INCONCLUSIVE.search(text)
        if gave_up and rc != 0:
            raise HarnessInconclusive(
                f"`{command}` exited with status {rc} still INCONCLUSIVE after {gave_up.group(1)} attempts of its own "
                "(mlir-air's score_layer: a TDR on every try): no verdict either way (inconclusive, not a failure)",
                command, text, int(gave_up.group(1)))
        if rc == 2 and SAYS_INCONCLUSIVE.search(text):
            why = "exited 2 saying INCONCLUSIVE"
            log.warning("device run inconclusive", command=command, attempt=n, tries=tries)
            continue
        return rc, text, n - 1
    raise HarnessInconclusive(f"`{command}` gave no verdict on each of {tries} tries, every one in a fresh process "
                              f"(the last {why}): no verdict either way (inconclusive, not a failure)",
                              command, text, tries)


def first_output_line(argv: list[str], timeout_s: float = 10.0) -> str | None:
    """The first non-blank line a tool prints (stdout, then stderr), or None when it is missing, fails or
    times out: how a tool's version is probed."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    for line in (r.stdout + r.stderr).splitlines():
        if line.strip():
            return line.strip()
    return None


def probe_toolchain(mlir_air_dir: str | None) -> dict[str, str | None]:
    """Best-effort toolchain versions; a tool that is missing or fails is recorded as None (absent)."""
    return {
        "mlir_air_commit": first_output_line(["git", "-C", mlir_air_dir, "rev-parse", "HEAD"]) if mlir_air_dir else None,
        "mlir_air_contract": str(CONTRACT_VERSION),  # the formats the tool reads the checkout by (contract.toml)
        "aie_opt": first_output_line(["aie-opt", "--version"]),
        "air_opt": first_output_line(["air-opt", "--version"]),
        "xrt_smi": first_output_line(["xrt-smi", "--version"]),
        # a `ledger twin` checkout says so (its marker file): every figure run there is a stand-in rehearsal
        "standin": "ledger twin" if is_twin(mlir_air_dir) else None,
        # the versions mlir-air's nightly records (llvm_aie_version = Peano, mlir_aie_hash), checked against the
        # contract's floor (npu_kernels.mlir_air.toolchain_floor)
        **toolchain_versions(mlir_air_dir),
    }


def probe_device() -> str | None:
    """The NPU's name from pyxrt (device 0), or None when pyxrt is missing or the query fails."""
    try:
        import pyxrt  # type: ignore[import-not-found]
    except Exception:
        return None
    try:
        return str(pyxrt.device(0).get_info(pyxrt.xrt_info_device.name))
    except Exception:
        return None
