"""The mlir-air executor: runs mlir-air's own harnesses on an NPU2 machine and parses what they print.

It does not run leaf kernels on arrays (its array methods raise `NotImplementedError`); it runs whole
harnesses. `run_harness(kernel, shape, tile, contract)` looks the (kernel, contract) up in a harness table
(npu_kernels/mlir_air/harnesses.toml, overlaid by a user TOML given by path or by env `NPU_LEDGER_HARNESSES`),
fills the command's placeholders, takes the NPU lock (`flock` on /tmp/mlir-air-npu.lock, the lock
mlir-air's workflow uses), runs the command as a subprocess with a timeout, and parses the transcript with
`npu_kernels.mlir_air.transcript`. The result carries its provenance: the command, the transcript's sha256, the host, the
toolchain versions (mlir-air commit, aie-opt / air-opt / xrt-smi versions, each `None` when absent) and
the device name when pyxrt is importable. `run_model_verify` / `run_model_diagnosis` do the same for
`make verify` / `make diagnosis` in an mlir-air LLM directory, reading the report JSON the run wrote.

Errors, each naming the command: `HarnessConfigError` (no entry, missing placeholder, MLIR_AIR_DIR unset),
`NpuLockTimeout`, `HarnessTimeout` (the process group is killed; the partial transcript is kept for
triage; a kernel harness or a model target that gives no verdict is first re-run in a fresh process up to
lock.DEVICE_RUN_TRIES times, those tries recorded as `inconclusive_tries` in its provenance, and raises
`HarnessInconclusive` when none gave one), and `TranscriptError` from the parsers (a transcript that is garbage, truncated, contradictory, or
a PASS printed by a process that exited non-zero).

What a run yields is `npu_kernels.mlir_air.runs` (HarnessRun, ModelRun); what it reads back besides the transcript
(a model run's report JSON, a timing-only run's figures) is `npu_kernels.mlir_air.run_reports`. Chosen by
`npu_kernels.backends` (the Phase 1 kernel runners, the mlir-air backend) and the workers' job; never by a gate.
"""

from __future__ import annotations

import os
import shlex
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from npu_kernels.mlir_air.checkout import where_it_ran
from npu_kernels.mlir_air.diagnosis_report import parse_diagnosis_output
from npu_kernels.mlir_air.lock import (
    DEFAULT_LOCK_PATH,
    HarnessTimeout,
    NpuLockTimeout,
    npu_lock,
    probe_device,
    probe_toolchain,
    run_command,
    run_retried,
)
from npu_kernels.mlir_air.output import TranscriptError, sha256_text
from npu_kernels.mlir_air.run_reports import REPORT_TARGETS, find_report, read_latency_run, read_model_run
from npu_kernels.mlir_air.runs import HarnessRun, ModelRun
from npu_kernels.mlir_air.table import (
    ENV_MLIR_AIR,
    HarnessConfigError,
    HarnessSpec,
    load_harness_table,
    make_value,
    render_command,
    render_value,
)
from npu_kernels.mlir_air.transcript import parse_harness_transcript
from npu_kernels.mlir_air.verify_report import parse_verify_output
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.executors.base import KERNEL_NAMES, Executor
from npu_kernels.numerics.spec import UnknownKernel
from npu_kernels.settings import env_get

log = structlog.get_logger(__name__)
ENV_LOCK = "LEDGER_NPU_LOCK"


class MlirAirExecutor(Executor):
    """Drives mlir-air harnesses under the NPU lock; see the module docstring."""

    name = "mlir-air"

    def __init__(
        self,
        target: str = "npu2",
        *,
        harness_table: str | os.PathLike | None = None,
        mlir_air_dir: str | None = None,
        lock_path: str | None = None,
        lock_timeout_s: float | None = None,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(target)
        self.table = load_harness_table(harness_table)
        self.mlir_air_dir = mlir_air_dir if mlir_air_dir is not None else env_get(ENV_MLIR_AIR) or None
        # env LEDGER_NPU_LOCK overrides the default /tmp/mlir-air-npu.lock (tests, a second NPU)
        self.lock_path = lock_path or env_get(ENV_LOCK) or DEFAULT_LOCK_PATH
        self.lock_timeout_s = lock_timeout_s if lock_timeout_s is not None else self.table.lock_timeout_s
        self.timeout_s = timeout_s
        self._toolchain: dict[str, str | None] | None = None
        self._device: str | None = None

    def describe(self) -> dict:
        return {"executor": self.name, "target": self.target, "harness_tables": list(self.table.sources)}

    # provenance ---------------------------------------------------------------------------------------

    def _provenance(self, command: str, transcript: str, returncode: int, lock_wait_s: float,
                    cwd: str | None = None) -> dict[str, Any]:
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
            # where the command ran and what it named, each checked for a stand-in (npu_kernels.mlir_air.checkout):
            # what npu_kernels.provenance decides the class from, whatever MLIR_AIR_DIR names
            "ran": where_it_ran(command, cwd),
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
        command = self._render(spec, spec.command, shape, tile)
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
        # a harness run without a verdict (killed at its timeout, or mlir-air's exit 2 INCONCLUSIVE) is re-run in a
        # fresh process (lock.run_retried, DEVICE_RUN_TRIES), as a model target is; none on any try: HarnessInconclusive
        try:
            with npu_lock(self.lock_path, self.lock_timeout_s) as waited:
                t0 = time.monotonic()
                returncode, transcript, retried = run_retried(command, limit, cwd=spec.cwd)
                seconds = time.monotonic() - t0
        except NpuLockTimeout as e:
            e.command = command  # type: ignore[attr-defined]
            raise
        try:
            result = parse_harness_transcript(transcript)
        except TranscriptError as e:
            err = TranscriptError(f"`{command}` (exit status {returncode}): {e}", transcript)
            err.command, err.returncode = command, returncode  # type: ignore[attr-defined]
            raise err from e
        if result.verdict == "PASS" and returncode != 0:
            err = TranscriptError(
                f"`{command}` printed PASS! but exited with status {returncode}: the run is not a pass.", transcript
            )
            err.command, err.returncode = command, returncode  # type: ignore[attr-defined]
            raise err
        log.info("mlir_air.harness.done", kernel=kernel, verdict=result.verdict, seconds=round(seconds, 1))
        provenance = self._provenance(command, transcript, returncode, waited, spec.cwd)
        if retried:  # the tries before the one that ended, each without a verdict (absent: the first try ended)
            provenance["inconclusive_tries"] = retried
        latency = (result.latency_us, result.gflops)
        if spec.latency_command and result.verdict == "PASS":
            # its own `ran` facts: npu_kernels.provenance.run_provenance reads both (the figures shown are its)
            latency, provenance["latency_run"] = self._latency_run(spec, kernel, shape, tile, limit)
        return HarnessRun(
            kernel=kernel,
            contract=contract or (spec.contracts[0] if spec.contracts else _default_contract(kernel)),
            shape=dict(shape),
            tile=used_tile,
            command=command,
            returncode=returncode,
            transcript=transcript,
            result=result,
            provenance=provenance,
            seconds=seconds,
            measured_at=measured_at,
            latency_us=latency[0],
            gflops=latency[1],
        )

    def latency_command(self, kernel: str, shape: dict[str, Any], tile: dict[str, Any] | None = None,
                        contract: str | None = None) -> str | None:
        """The rendered timing-only command of (kernel, contract), or None when its checked run times itself."""
        spec = self.table.lookup(kernel, contract)
        if not spec.latency_command:
            return None
        return self._render(spec, spec.latency_command, shape, tile or {})

    def _render(self, spec: HarnessSpec, template: str, shape: dict[str, Any], tile: dict[str, Any]) -> str:
        """`template` filled with the entry's defaults, `shape` and `tile`, and its `{switches}` /
        `{latency_switches}`: the [switches] texts whose variable is true and the [flags] texts with a value."""
        variables: dict[str, Any] = {**self._base_vars(template), **spec.defaults, **shape, **tile}
        lowered = {str(k).lower(): v for k, v in variables.items()}
        on = [text for var, text in spec.switches.items() if _switch_on(var, lowered)]
        on += _value_flags(spec.flags, lowered)
        variables["switches"] = " ".join(on)
        variables["latency_switches"] = " ".join(on + _value_flags(spec.latency_flags, lowered))
        return render_command(template, variables, spec.aliases)

    def _latency_run(self, spec: HarnessSpec, kernel, shape, tile, limit) -> tuple[tuple, dict[str, Any]]:
        """Run the timing-only command: ((latency_us, gflops), its provenance), read by run_reports.read_latency_run.
        A failed timing run leaves the latency absent (None) and says why; it never changes the checked verdict."""
        command = self.latency_command(kernel, shape, tile)
        assert command is not None
        record: dict[str, Any] = {"command": command, "format": spec.latency_format,
                                  "ran": where_it_ran(command, spec.cwd)}
        try:
            with npu_lock(self.lock_path, self.lock_timeout_s):
                rc, text = run_command(command, limit, cwd=spec.cwd)
        except (NpuLockTimeout, HarnessTimeout) as e:
            record["error"] = str(e)
            return (None, None), record
        figures, read = read_latency_run(spec.latency_format, rc, text)
        record.update(read)
        return figures, record

    # models -------------------------------------------------------------------------------------------

    def _run_model(self, target: str, model_dir: str | os.PathLike, make_vars: dict[str, Any] | None, timeout_s):
        template = self.table.model.get(target)
        if not isinstance(template, str):
            raise HarnessConfigError(f"the harness table has no [model] {target} command.")
        model_dir = str(Path(model_dir).resolve())
        variables = {**self._base_vars(template), "model_dir": model_dir}
        command = render_command(template, variables)
        for key, value in (make_vars or {}).items():
            command += f" {key}={shlex.quote(make_value(value))}"  # `$` doubled: make expands none of it
        limit = timeout_s or self.timeout_s or float(self.table.model.get("timeout_s", self.table.timeout_s))
        started = time.time()
        # a device run without a verdict (timed out, or mlir-air's exit 2 INCONCLUSIVE) is re-run in a fresh process
        # (lock.run_retried, DEVICE_RUN_TRIES); none on any try: HarnessInconclusive, recorded as an inconclusive attempt
        if self.recipe_takes_lock(command):  # holding it too would deadlock the recipe's own flock
            returncode, transcript, retried = run_retried(command, limit)
            waited = 0.0
        else:
            with npu_lock(self.lock_path, self.lock_timeout_s) as waited:
                returncode, transcript, retried = run_retried(command, limit)
        report_path = self._find_report(target, transcript, model_dir, variables, started)
        prov = self._provenance(command, transcript, returncode, waited)
        if retried:  # the tries before the one that ended, each without a verdict (absent: the first try ended)
            prov["inconclusive_tries"] = retried
        if self.recipe_takes_lock(command):
            prov["lock_held_by"] = "recipe"
        return command, returncode, transcript, report_path, prov

    def recipe_takes_lock(self, command: str) -> bool:
        """Whether a `make ...` command's recipe takes the NPU lock itself: `make -n` prints a flock on it."""
        if not command.startswith("make "):
            return False
        cached = getattr(self, "_lock_recipes", None)
        if cached is None:
            cached = self._lock_recipes = {}
        if command not in cached:
            try:
                rc, text = run_command("make -n " + command[len("make "):], 60)
            except HarnessTimeout:
                rc, text = 1, ""
            cached[command] = rc == 0 and any("flock" in line and self.lock_path in line for line in text.splitlines())
        return cached[command]

    def run_model_target(self, target: str, model_dir: str | os.PathLike, *, make_vars: dict[str, Any] | None = None,
                         timeout_s: float | None = None) -> tuple[str, int, str, dict[str, Any]]:
        """`make run` / `make profile` (no report file): (command, exit status, transcript, provenance)."""
        command, rc, transcript, _, prov = self._run_model(target, model_dir, make_vars, timeout_s)
        return command, rc, transcript, prov

    def _find_report(self, target: str, transcript: str, model_dir: str, variables: dict, started: float) -> str | None:
        if target not in REPORT_TARGETS:
            return None
        dirs = [render_command(d, variables, quote=False) for d in self.table.model.get("report_dirs", [])]
        return find_report(target, transcript, model_dir, dirs, started)

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
        report, result = read_model_run(command, rc, transcript, path, parse_verify_output)
        if result.verdict == "PASS" and rc != 0:
            raise TranscriptError(f"`{command}` printed [verify] PASS but exited with status {rc}.", transcript)
        return ModelRun(target, command, rc, transcript, str(path), report, result, prov)

    def run_model_diagnosis(
        self, model_dir: str | os.PathLike, *, make_vars: dict[str, Any] | None = None, timeout_s: float | None = None
    ) -> ModelRun:
        """`make diagnosis` in an mlir-air LLM directory: per-layer rows as `LayerDiagnosed` fields."""
        command, rc, transcript, path, prov = self._run_model("diagnosis", model_dir, make_vars, timeout_s)
        report, result = read_model_run(command, rc, transcript, path, parse_diagnosis_output)
        if rc != 0:
            raise TranscriptError(f"`{command}` printed [verify] PASS but exited with status {rc}.", transcript)
        return ModelRun("diagnosis", command, rc, transcript, str(path), report, result, prov)


def _default_contract(kernel: str) -> str:
    """The catalog's contract name for a kernel (so a row never records '' or a bare 'bf16')."""
    try:
        return get_spec(kernel).default_contract
    except UnknownKernel:
        return ""


def _value_flags(flags: dict[str, str], lowered: dict[str, Any]) -> list[str]:
    """The [flags] texts whose variable has a value (not None/False), each `{}` filled with it."""
    out = []
    for var, text in flags.items():
        value = lowered.get(var.lower())
        if value is None or value is False:
            continue
        out.append(text.replace("{}", render_value(value)))
    return out


def _switch_on(var: str, lowered: dict[str, Any]) -> bool:
    """A [switches] key is on when its variable is true, or, spelled `name=value` (conv1d's `pad=zero`), when the
    variable holds that value."""
    name, eq, value = var.lower().partition("=")
    return lowered.get(name) == value if eq else lowered.get(name) is True


def _leaf(kernel: str):
    def method(self, *args, **kwargs):
        raise NotImplementedError("the mlir-air executor runs whole harnesses; use run_harness")

    method.__name__ = kernel
    method.__doc__ = f"Not available: `{kernel}` on arrays; the mlir-air executor runs whole harnesses (run_harness)."
    return method


for _kernel in KERNEL_NAMES:
    setattr(MlirAirExecutor, _kernel, _leaf(_kernel))
