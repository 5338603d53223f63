"""`HarnessRunner`: the `KernelRunner` (npu_kernels.backends.runner_base) of mlir-air's harnesses on an NPU2 machine,
through `npu_kernels.mlir_air.executor.MlirAirExecutor.run_harness`.

A run that printed a verdict gives the row what the harness printed (the figures of mlir-air's `[precision]`
line, latency, tile, herd, method / tier), checked for physical plausibility (npu_kernels.perf.evidence) before it is
evidence; its provenance holds the command, the transcript's sha256, the probed toolchain and the NPU lock. A run
that measured nothing is a FAIL row with `not_measured` saying which way it ended: `lock-timeout` (the NPU lock
was not free), `timeout` (killed at its limit on each of DEVICE_RUN_TRIES fresh-process tries; on the Phase 1 gate's
runner, made with `inconclusive_up`, `HarnessInconclusive` goes up instead and the deploy handler records the attempt
as inconclusive, not as a failure: npu_kernels.inconclusive), `traceback` (the harness raised, e.g. a shape assertion),
`compile-only`, `compile-error` (a non-zero exit without a verdict) or `unparseable`; with the command, the
exit status, the transcript's sha256 and its last TAIL_LINES lines.
"""

from __future__ import annotations

import math
import platform
from typing import Any

from npu_kernels.backends.runner_base import KernelRow, KernelVerification
from npu_kernels.mlir_air.executor import MlirAirExecutor
from npu_kernels.mlir_air.lock import HarnessInconclusive, HarnessTimeout, NpuLockTimeout
from npu_kernels.mlir_air.output import TranscriptError, sha256_text
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.run import INPUT_MODES, KernelResult
from npu_kernels.numerics.tiles import plan_tile
from npu_kernels.perf.evidence import check_measurement
from npu_kernels.numerics.kernels import kernel_tolerance, piece
from npu_kernels.thresholds import KERNEL_REMEASURE_HW_BAND
from npu_kernels.provenance import run_provenance
from npu_kernels.toolchain import current_toolchain, with_npu_ledger

__all__ = ["TAIL_LINES", "HarnessRunner"]

TAIL_LINES = 20  # the last lines of a failed harness run kept in the event (the full text is hashed)

# how a run that measured nothing ended -> what its row's note says
_NOT_MEASURED = {"lock-timeout": "not run: the NPU lock was not free", "timeout": "killed at its timeout",
                 "traceback": "the harness raised", "compile-only": "only compiled",
                 "compile-error": "failed to build", "unparseable": "printed no verdict"}


class HarnessRunner:
    """A leaf kernel through mlir-air's own harness (npu_kernels/mlir_air/harnesses.toml), under the NPU lock."""

    name = "mlir-air"
    source = "harness"
    takes_npu_lock = True  # the executor holds the lock around the harness alone (npu_kernels.mlir_air.lock)

    def __init__(self, target: str = "npu2", *, lock_path: str | None = None, inconclusive_up: bool = False) -> None:
        self.target, self.lock_path, self.inconclusive_up = target, lock_path, inconclusive_up
        self._executor: MlirAirExecutor | None = None

    def executor(self) -> MlirAirExecutor:
        """The harness executor, made on first use (so a harness table that cannot be read is an error of the row
        that needed it, HarnessConfigError, as every later row's until it can be)."""
        if self._executor is None:
            self._executor = MlirAirExecutor(self.target, lock_path=self.lock_path)
        return self._executor

    def toolchain(self, row: KernelRow) -> dict[str, Any]:
        return current_toolchain(self.name)

    def verify(self, row: KernelRow, *, attempt: int, when: str, host: str) -> KernelVerification:
        """The harness's printed figures (checked by npu_kernels.perf.evidence.check_measurement), or a FAIL row
        saying why nothing was measured; `host` is the harness's own (the executor records it)."""
        ex = self.executor()
        try:
            run = ex.run_harness(row.kernel, row.shape, row.tile, row.contract)
        except HarnessInconclusive as e:  # no verdict on any fresh-process try
            if self.inconclusive_up:  # the Phase 1 gate: not a row, the attempt is inconclusive
                raise
            return self._not_measured(row, when, attempt, e)  # elsewhere a FAIL row of kind "timeout", as before
        except (TranscriptError, HarnessTimeout, NpuLockTimeout) as e:
            return self._not_measured(row, when, attempt, e)
        fields = run.kernel_verified_kwargs(self.target)
        result = run.result
        printed = ({"latency_text": result.latency_text, "gflops_text": result.gflops_text}
                   if (fields.get("latency_us"), fields.get("gflops")) == (result.latency_us, result.gflops) else {})
        check_measurement(row.kernel, row.shape, fields["contract"], **printed,
                          **{k: v for k, v in fields.items() if k not in ("kernel", "shape", "contract", "method", "tier")})
        fields["provenance"] = {**fields["provenance"], "attempt": attempt,
                                "toolchain": with_npu_ledger(fields["provenance"].get("toolchain"), self.name)}
        # decided here, from what the executor probed where the harness ran (device, tools) and what the command ran
        # in and named (`ran`: a stand-in checkout, model directory or script), never from MLIR_AIR_DIR alone
        fields["provenance_class"] = run_provenance(fields["provenance"])
        fields.update(**row.labels(), **row.plan_labels())
        return KernelVerification(fields, run.transcript)

    def _not_measured(self, row: KernelRow, when: str, attempt: int, e: Exception) -> KernelVerification:
        """A harness run that produced no measurement, as a FAIL row: what ran, how it ended, the transcript's
        sha256 and its last lines; error figures absent. The contract's tolerances are the ones it was held to."""
        transcript = getattr(e, "transcript", None) or ""
        command = getattr(e, "command", None) or ""
        returncode = getattr(e, "returncode", None)
        message = str(e).split("\n")[0]
        if isinstance(e, NpuLockTimeout):
            kind = "lock-timeout"
        elif isinstance(e, HarnessTimeout):
            kind = "timeout"
        elif "Python exception" in message:
            kind = "traceback"
        elif "only compiled" in message:
            kind = "compile-only"
        elif returncode not in (None, 0):
            kind = "compile-error"
        else:
            kind = "unparseable"
        contract = row.contract or get_spec(row.kernel).default_contract
        rtol, atol = kernel_tolerance(row.kernel, contract)
        lines = [ln for ln in transcript.splitlines() if ln.strip()]
        provenance = {"command": command, "returncode": returncode, "host": platform.node() or "unknown",
                      "attempt": attempt, "failure": kind, "tail": lines[-TAIL_LINES:],
                      "toolchain": with_npu_ledger(self.toolchain(row), self.name), "device": None}
        if transcript:
            provenance["transcript_sha256"] = sha256_text(transcript)
        plan = row.plan
        return KernelVerification({
            "kernel": row.kernel, "shape": dict(row.shape), "contract": contract, "executor": self.name,
            "target": self.target, "verdict": "FAIL", "rtol": rtol, "atol": atol, "tile": dict(row.tile or {}),
            "herd": list(plan.herd) if plan else None, "tiles_in_flight": plan.tiles_in_flight if plan else None,
            **row.plan_labels(), "source": self.source, **row.labels(),
            "provenance": provenance, "measured_at": when, "not_measured": kind,
            "provenance_class": run_provenance(provenance),
            "note": "; ".join(x for x in (f"not measured ({kind}): {_NOT_MEASURED[kind]}: {message}", row.note) if x),
        }, transcript)

    def measure(self, row: KernelRow, *, seed: int = 0, inputs: str = "project") -> KernelResult:
        """The harness's printed figures as a KernelResult (`ledger kernel run --executor mlir-air`): the harness
        draws its own inputs, so `seed` and `inputs` choose nothing here."""
        ex = self.executor()
        if inputs not in INPUT_MODES:
            raise ValueError(f"unknown inputs {inputs!r}; expected one of {', '.join(INPUT_MODES)}")
        spec = get_spec(row.kernel)
        s = spec.normalize_shape(row.shape)
        c = spec.contract(row.contract)
        target = ex.target
        plan = plan_tile(row.kernel, s, target, row.tile, force=row.force_tile)
        run = ex.run_harness(spec.name, s, tile=dict(plan.tile), contract=c.name)
        f = {**run.result.kernel_verified_fields(), "latency_us": run.latency_us, "gflops": run.gflops}
        method, tier = run.method_tier() if piece(spec.name, "method_tier") else ("", c.tier)
        herd = run.herd() or list(plan.herd)
        nan = float("nan")
        return KernelResult(
            kernel=spec.name,
            shape=s,
            contract=c.name,
            executor=ex.name,
            target=target,
            verdict=f["verdict"],
            mean_rel_L1=f.get("mean_rel_L1") if f.get("mean_rel_L1") is not None else nan,
            max_abs=f.get("max_abs") if f.get("max_abs") is not None else nan,
            max_rel=f.get("max_rel") if f.get("max_rel") is not None else nan,
            rtol=f.get("rtol") if f.get("rtol") is not None else c.rtol,
            atol=f.get("atol") if f.get("atol") is not None else c.atol,
            mismatches=f.get("mismatches") if f.get("mismatches") is not None else (0 if f["verdict"] == "PASS" else -1),
            n_elements=f.get("n_elements") or 0,
            nan_count=0 if not (isinstance(f.get("mean_rel_L1"), float) and math.isnan(f["mean_rel_L1"])) else 1,
            seconds=run.seconds,
            gflops=f.get("gflops"),
            tile=dict(run.tile),
            herd=herd,
            tiles_in_flight=herd[0] * herd[1],
            tiles_target=plan.tiles_target,
            tile_justification=plan.justification,
            warnings=list(plan.warnings),
            latency_us=f.get("latency_us"),
            method=method,
            tier=tier,
            provenance_class=run_provenance({**run.provenance,
                                             "toolchain": with_npu_ledger(run.provenance.get("toolchain"), self.name)}),
        )

    def remeasure_problems(self, recorded: Any, remeasured: Any) -> list[str]:
        """On hardware a re-run's mean_rel_L1 must sit within KERNEL_REMEASURE_HW_BAND x the kernel's rtol of the
        recorded one (a device run is not bit-reproducible)."""
        old, new = recorded, remeasured
        band = KERNEL_REMEASURE_HW_BAND * old.rtol
        if old.mean_rel_L1 is None or new.mean_rel_L1 is None or abs(new.mean_rel_L1 - old.mean_rel_L1) > band:
            return [f"mean_rel_L1 {old.mean_rel_L1} recorded, {new.mean_rel_L1} re-measured (band {band:g})"]
        return []
