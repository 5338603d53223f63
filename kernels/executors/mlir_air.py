"""The mlir-air executor: runs mlir-air's own harnesses on an NPU2 machine and parses what they print.

It does not run leaf kernels on arrays (its array methods raise `NotImplementedError`); it runs whole
harnesses. `run_harness(kernel, shape, tile, contract)` looks the (kernel, contract) up in a harness table
(kernels/mlir_air_harnesses.toml, overlaid by a user TOML given by path or by env `NPU_LEDGER_HARNESSES`),
fills the command's placeholders, takes the NPU lock (`flock` on /tmp/mlir-air-npu.lock, the lock
mlir-air's workflow uses), runs the command as a subprocess with a timeout, and parses the transcript with
`kernels.harness`. The result carries its provenance: the command, the transcript's sha256, the host, the
toolchain versions (mlir-air commit, aie-opt / air-opt / xrt-smi versions, each `None` when absent) and
the device name when pyxrt is importable. `run_model_verify` / `run_model_diagnosis` do the same for
`make verify` / `make diagnosis` in an mlir-air LLM directory, reading the report JSON the run wrote.

Errors, each naming the command: `HarnessConfigError` (no entry, missing placeholder, MLIR_AIR_DIR unset),
`NpuLockTimeout`, `HarnessTimeout` (the process group is killed; the partial transcript is kept for
triage), and `TranscriptError` from the parsers (a transcript that is garbage, truncated, contradictory, or
a PASS printed by a process that exited non-zero).
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import string
import subprocess
import time
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import structlog

from kernels.executors.base import KERNEL_NAMES, Executor
from kernels.harness import (
    DiagnosisResult,
    HarnessResult,
    TranscriptError,
    VerifyResult,
    parse_diagnosis_output,
    parse_harness_transcript,
    parse_verify_output,
    sha256_text,
)

log = structlog.get_logger(__name__)

DEFAULT_TABLE = Path(__file__).resolve().parent.parent / "mlir_air_harnesses.toml"
ENV_TABLE = "NPU_LEDGER_HARNESSES"
ENV_MLIR_AIR = "MLIR_AIR_DIR"
DEFAULT_LOCK_PATH = "/tmp/mlir-air-npu.lock"


class HarnessError(RuntimeError):
    """Base of the mlir-air executor's errors."""


class HarnessConfigError(HarnessError):
    """Raised when the harness table cannot produce a command: no entry for a (kernel, contract), a
    placeholder with no value, MLIR_AIR_DIR unset, or a malformed TOML table."""


class NpuLockTimeout(HarnessError):
    """Raised when the NPU lock is still held by another process after the lock timeout."""


class HarnessTimeout(HarnessError):
    """Raised when a harness command runs past its timeout; `transcript` holds what it printed so far."""

    def __init__(self, message: str, command: str, transcript: str) -> None:
        super().__init__(message)
        self.command = command
        self.transcript = transcript


# --- the harness table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HarnessSpec:
    key: str
    command: str
    contracts: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)
    switches: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tile_keys: tuple[str, ...] = ()
    timeout_s: float | None = None
    cwd: str | None = None


@dataclass(frozen=True)
class HarnessTable:
    harnesses: dict[str, HarnessSpec]
    model: dict[str, Any]
    timeout_s: float
    lock_timeout_s: float
    sources: tuple[str, ...]

    def lookup(self, kernel: str, contract: str | None) -> HarnessSpec:
        """The entry for (kernel, contract): `kernel@contract` first, then `kernel` if it lists the contract
        (or lists none, or no contract is asked for). Raises `HarnessConfigError` naming what exists."""
        if contract and f"{kernel}@{contract}" in self.harnesses:
            return self.harnesses[f"{kernel}@{contract}"]
        spec = self.harnesses.get(kernel)
        if spec is not None and (not contract or not spec.contracts or contract in spec.contracts):
            return spec
        known = ", ".join(sorted(self.harnesses)) or "none"
        wanted = f"{kernel}@{contract}" if contract else kernel
        raise HarnessConfigError(
            f"no mlir-air harness for {wanted!r} (entries: {known}); add [harness.{json.dumps(wanted)}] to a "
            f"harness TOML passed to MlirAirExecutor or named by ${ENV_TABLE}."
        )


def _merge_tables(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for section in ("settings", "model"):
        if section in over:
            out[section] = {**out.get(section, {}), **over[section]}
    harness = {k: dict(v) for k, v in out.get("harness", {}).items()}
    for key, entry in over.get("harness", {}).items():
        merged = {**harness.get(key, {}), **entry}
        for sub in ("defaults", "switches", "aliases"):
            if sub in entry or sub in harness.get(key, {}):
                merged[sub] = {**harness.get(key, {}).get(sub, {}), **entry.get(sub, {})}
        harness[key] = merged
    out["harness"] = harness
    return out


def load_harness_table(path: str | os.PathLike | None = None) -> HarnessTable:
    """The default table overlaid by `path`, or else by the file named in env `NPU_LEDGER_HARNESSES`."""
    sources = [str(DEFAULT_TABLE)]
    data = _read_toml(DEFAULT_TABLE)
    user = path if path is not None else os.environ.get(ENV_TABLE) or None
    if user is not None:
        data = _merge_tables(data, _read_toml(Path(user)))
        sources.append(str(user))
    harnesses: dict[str, HarnessSpec] = {}
    for key, entry in data.get("harness", {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str) or not entry["command"].strip():
            raise HarnessConfigError(f"harness entry {key!r} needs a non-empty `command` string.")
        harnesses[key] = HarnessSpec(
            key=key,
            command=entry["command"],
            contracts=tuple(entry.get("contracts", ())),
            defaults=dict(entry.get("defaults", {})),
            switches={k: str(v) for k, v in entry.get("switches", {}).items()},
            aliases={k: tuple(v) for k, v in entry.get("aliases", {}).items()},
            tile_keys=tuple(entry.get("tile_keys", ())),
            timeout_s=entry.get("timeout_s"),
            cwd=entry.get("cwd"),
        )
    settings = data.get("settings", {})
    return HarnessTable(
        harnesses=harnesses,
        model=dict(data.get("model", {})),
        timeout_s=float(settings.get("timeout_s", 3600)),
        lock_timeout_s=float(settings.get("lock_timeout_s", 1800)),
        sources=tuple(sources),
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise HarnessConfigError(f"cannot read harness table {path}: {e.strerror or e}.") from e
    except tomllib.TOMLDecodeError as e:
        raise HarnessConfigError(f"harness table {path} is not valid TOML: {e}.") from e


def _render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return " ".join(_render_value(v) for v in value)
    return str(value)


def render_command(
    template: str, variables: dict[str, Any], aliases: dict[str, tuple[str, ...]] | None = None, *, quote: bool = True
) -> str:
    """Fill `{name}` placeholders case-insensitively from `variables` (trying `aliases` in order), each
    value shell-quoted unless `quote=False`. A placeholder with no value raises `HarnessConfigError`
    listing the known names."""
    lowered = {str(k).lower(): v for k, v in variables.items()}
    alias_map = {k.lower(): [a.lower() for a in v] for k, v in (aliases or {}).items()}
    out: list[str] = []
    for literal, name, spec, conv in string.Formatter().parse(template):
        out.append(literal)
        if name is None:
            continue
        if spec or conv:
            raise HarnessConfigError(f"placeholder {{{name}}} in {template!r} may not carry a format spec.")
        for candidate in [name.lower(), *alias_map.get(name.lower(), [])]:
            if candidate in lowered:
                value = _render_value(lowered[candidate])
                out.append(shlex.quote(value) if quote else value)
                break
        else:
            known = ", ".join(sorted(lowered)) or "none"
            raise HarnessConfigError(f"no value for placeholder {{{name}}} in {template!r} (known: {known}).")
    return "".join(out)


# --- the NPU lock, subprocess, provenance --------------------------------------------------------------


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


def _first_line(argv: list[str], timeout_s: float = 10.0) -> str | None:
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
        "mlir_air_commit": _first_line(["git", "-C", mlir_air_dir, "rev-parse", "HEAD"]) if mlir_air_dir else None,
        "aie_opt": _first_line(["aie-opt", "--version"]),
        "air_opt": _first_line(["air-opt", "--version"]),
        "xrt_smi": _first_line(["xrt-smi", "--version"]),
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


# --- results -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HarnessRun:
    """One harness run: what ran, what it printed, the parsed result, and where it ran."""

    kernel: str
    contract: str
    shape: dict[str, Any]
    tile: dict[str, Any]
    command: str
    returncode: int
    transcript: str
    result: HarnessResult
    provenance: dict[str, Any]
    seconds: float
    measured_at: str

    def herd(self) -> list[int] | None:
        t = {k.lower(): v for k, v in self.tile.items()}
        for a, b in (("herd_m", "herd_n"), ("herd_x", "herd_y")):
            if isinstance(t.get(a), int):
                return [t[a], t[b] if isinstance(t.get(b), int) else 1]
        shape = t.get("herd_shape")
        if isinstance(shape, str) and all(p.isdigit() for p in shape.split()):
            dims = [int(p) for p in shape.split()]
            return dims if len(dims) == 2 else dims + [1]
        return None

    def kernel_verified_kwargs(self, target: str = "npu2") -> dict[str, Any]:
        """Everything a `KernelVerified` event needs from this run (source = harness)."""
        herd = self.herd()
        return {
            "kernel": self.kernel,
            "shape": dict(self.shape),
            "contract": self.contract,
            "executor": "mlir-air",
            "target": target,
            **self.result.kernel_verified_fields(),
            "tile": dict(self.tile),
            "herd": herd,
            "tiles_in_flight": herd[0] * herd[1] if herd else None,
            "seconds": self.seconds,
            "source": "harness",
            "provenance": dict(self.provenance),
            "measured_at": self.measured_at,
        }


@dataclass(frozen=True)
class ModelRun:
    """One `make verify` / `make diagnosis` run of an mlir-air LLM directory."""

    target: str
    command: str
    returncode: int
    transcript: str
    report_path: str
    report_json: dict[str, Any]
    result: VerifyResult | DiagnosisResult
    provenance: dict[str, Any]


# --- the executor --------------------------------------------------------------------------------------


class MlirAirExecutor(Executor):
    """Drives mlir-air harnesses under the NPU lock; see the module docstring."""

    name = "mlir-air"

    def __init__(
        self,
        target: str = "npu2",
        *,
        harness_table: str | os.PathLike | None = None,
        mlir_air_dir: str | None = None,
        lock_path: str = DEFAULT_LOCK_PATH,
        lock_timeout_s: float | None = None,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(target)
        self.table = load_harness_table(harness_table)
        self.mlir_air_dir = mlir_air_dir if mlir_air_dir is not None else os.environ.get(ENV_MLIR_AIR) or None
        self.lock_path = lock_path
        self.lock_timeout_s = lock_timeout_s if lock_timeout_s is not None else self.table.lock_timeout_s
        self.timeout_s = timeout_s
        self._toolchain: dict[str, str | None] | None = None
        self._device: str | None = None

    def describe(self) -> dict:
        return {"executor": self.name, "target": self.target, "harness_tables": list(self.table.sources)}

    # provenance ---------------------------------------------------------------------------------------

    def _provenance(self, command: str, transcript: str, returncode: int, lock_wait_s: float) -> dict[str, Any]:
        if self._toolchain is None:
            self._toolchain = probe_toolchain(self.mlir_air_dir)
            self._device = probe_device()
        return {
            "command": command,
            "output_sha256": sha256_text(transcript),
            "returncode": returncode,
            "host": socket.gethostname(),
            "toolchain": dict(self._toolchain),
            "device": self._device,
            "lock_path": self.lock_path,
            "lock_wait_s": round(lock_wait_s, 3),
        }

    def _base_vars(self, template: str) -> dict[str, Any]:
        if "{mlir_air}" in template.lower():
            if not self.mlir_air_dir:
                raise HarnessConfigError(
                    f"the command {template!r} needs {{mlir_air}}: set {ENV_MLIR_AIR} to an mlir-air checkout."
                )
        return {"mlir_air": self.mlir_air_dir} if self.mlir_air_dir else {}

    # kernels ------------------------------------------------------------------------------------------

    def harness_command(
        self, kernel: str, shape: dict[str, Any], tile: dict[str, Any] | None = None, contract: str | None = None
    ) -> tuple[HarnessSpec, str, dict[str, Any]]:
        """The table entry, the filled command, and the tile actually used (entry defaults + `tile`)."""
        spec = self.table.lookup(kernel, contract)
        tile = dict(tile or {})
        variables: dict[str, Any] = {**self._base_vars(spec.command), **spec.defaults, **shape, **tile}
        lowered = {str(k).lower(): v for k, v in variables.items()}
        on = [text for var, text in spec.switches.items() if lowered.get(var.lower()) is True]
        variables["switches"] = " ".join(on)
        command = render_command(spec.command, variables, spec.aliases)
        used_tile = {k: v for k, v in spec.defaults.items() if k in spec.tile_keys}
        used_tile.update(tile)
        return spec, command, used_tile

    def run_harness(
        self,
        kernel: str,
        shape: dict[str, Any],
        tile: dict[str, Any] | None = None,
        contract: str | None = None,
        *,
        timeout_s: float | None = None,
    ) -> HarnessRun:
        """Run the harness of (kernel, contract) at `shape` / `tile` under the NPU lock and parse it.

        A `TranscriptError` from the parser is re-raised with the command named (and the transcript kept
        on the exception for triage). A PASS printed by a command that exited non-zero is a TranscriptError."""
        spec, command, used_tile = self.harness_command(kernel, shape, tile, contract)
        limit = timeout_s or self.timeout_s or spec.timeout_s or self.table.timeout_s
        measured_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        log.info("mlir_air.harness.start", kernel=kernel, contract=contract, command=command)
        with npu_lock(self.lock_path, self.lock_timeout_s) as waited:
            t0 = time.monotonic()
            returncode, transcript = run_command(command, limit, cwd=spec.cwd)
            seconds = time.monotonic() - t0
        try:
            result = parse_harness_transcript(transcript)
        except TranscriptError as e:
            raise TranscriptError(f"`{command}` (exit status {returncode}): {e}", transcript) from e
        if result.verdict == "PASS" and returncode != 0:
            raise TranscriptError(
                f"`{command}` printed PASS! but exited with status {returncode}: the run is not a pass.", transcript
            )
        log.info("mlir_air.harness.done", kernel=kernel, verdict=result.verdict, seconds=round(seconds, 1))
        return HarnessRun(
            kernel=kernel,
            contract=contract or (spec.contracts[0] if spec.contracts else ""),
            shape=dict(shape),
            tile=used_tile,
            command=command,
            returncode=returncode,
            transcript=transcript,
            result=result,
            provenance=self._provenance(command, transcript, returncode, waited),
            seconds=seconds,
            measured_at=measured_at,
        )

    # models -------------------------------------------------------------------------------------------

    def _run_model(self, target: str, model_dir: str | os.PathLike, make_vars: dict[str, Any] | None, timeout_s):
        template = self.table.model.get(target)
        if not isinstance(template, str):
            raise HarnessConfigError(f"the harness table has no [model] {target} command.")
        model_dir = str(Path(model_dir).resolve())
        variables = {**self._base_vars(template), "model_dir": model_dir}
        command = render_command(template, variables)
        for key, value in (make_vars or {}).items():
            command += f" {key}={shlex.quote(_render_value(value))}"
        limit = timeout_s or self.timeout_s or float(self.table.model.get("timeout_s", self.table.timeout_s))
        started = time.time()
        with npu_lock(self.lock_path, self.lock_timeout_s) as waited:
            returncode, transcript = run_command(command, limit)
        report_path = self._find_report(target, transcript, model_dir, variables, started)
        return command, returncode, transcript, report_path, self._provenance(command, transcript, returncode, waited)

    @staticmethod
    def _parse_model_run(command: str, rc: int, transcript: str, report_path: str | None, parse):
        """Parse a model run; a broken transcript explains itself before a missing report does."""
        try:
            if report_path is None:
                parse(transcript, None)
                raise TranscriptError("the run wrote no report JSON that it can be tied to.", transcript)
            try:
                report = json.loads(Path(report_path).read_text())
            except (OSError, json.JSONDecodeError) as e:
                raise TranscriptError(f"cannot read its report {report_path}: {e}.", transcript) from e
            return report, parse(transcript, report)
        except TranscriptError as e:
            raise TranscriptError(f"`{command}` (exit status {rc}): {e}", transcript) from e

    def _find_report(self, target: str, transcript: str, model_dir: str, variables: dict, started: float) -> str | None:
        prefix = "diagnosis_" if target == "diagnosis" else "verify_topk_token_"
        named = [
            line.split("JSON:", 1)[1].strip() for line in transcript.splitlines() if line.startswith("[verify] JSON:")
        ]
        dirs = [render_command(d, variables, quote=False) for d in self.table.model.get("report_dirs", [])]
        for name in reversed(named):
            for base in [model_dir, *sorted(str(p) for p in Path(model_dir).glob("build*")), *dirs]:
                path = Path(name) if os.path.isabs(name) else Path(base) / name
                if path.is_file() and path.name.startswith(prefix):
                    return str(path)
        fresh = [
            p
            for d in dirs
            for p in Path(d).glob(f"{prefix}*.json")
            if p.is_file() and p.stat().st_mtime >= started - 1.0
        ]
        return str(max(fresh, key=lambda p: p.stat().st_mtime)) if fresh else None

    def run_model_verify(
        self,
        model_dir: str | os.PathLike,
        full: bool = False,
        *,
        make_vars: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> ModelRun:
        """`make verify` (or `verify-full`) in an mlir-air LLM directory, parsed with its report JSON."""
        target = "verify_full" if full else "verify"
        command, rc, transcript, path, prov = self._run_model(target, model_dir, make_vars, timeout_s)
        report, result = self._parse_model_run(command, rc, transcript, path, parse_verify_output)
        if result.verdict == "PASS" and rc != 0:
            raise TranscriptError(f"`{command}` printed [verify] PASS but exited with status {rc}.", transcript)
        return ModelRun(target, command, rc, transcript, str(path), report, result, prov)

    def run_model_diagnosis(
        self, model_dir: str | os.PathLike, *, make_vars: dict[str, Any] | None = None, timeout_s: float | None = None
    ) -> ModelRun:
        """`make diagnosis` in an mlir-air LLM directory: per-layer rows as `LayerDiagnosed` fields."""
        command, rc, transcript, path, prov = self._run_model("diagnosis", model_dir, make_vars, timeout_s)
        report, result = self._parse_model_run(command, rc, transcript, path, parse_diagnosis_output)
        if rc != 0:
            raise TranscriptError(f"`{command}` printed [verify] PASS but exited with status {rc}.", transcript)
        return ModelRun("diagnosis", command, rc, transcript, str(path), report, result, prov)


def _leaf(kernel: str):
    def method(self, *args, **kwargs):
        raise NotImplementedError("the mlir-air executor runs whole harnesses; use run_harness")

    method.__name__ = kernel
    method.__doc__ = f"Not available: `{kernel}` on arrays; the mlir-air executor runs whole harnesses (run_harness)."
    return method


for _kernel in KERNEL_NAMES:
    setattr(MlirAirExecutor, _kernel, _leaf(_kernel))
