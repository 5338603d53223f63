"""`ledger perf calibrate`: the NPU2 model fitted to the user's own machine, and the calibration `predict` uses.

* `hardware_rows(events, device)` reads the ledger's NPU2-measured profile figures: every `PerformanceMeasured`
  whose recorded facts make it `npu2-measured` (npu_kernels.provenance.perf_row_provenance: a device and a probed
  toolchain on a checkout that is not a stand-in; the `provenance_class` claim is not believed), with its
  deployment's `ConfigResolved`: Phase 4's prefill time, Phase 5's ms/token (each under the switches it measured),
  Phase 6's TTFT and ms/token. Modelled, rehearsal, emulator and unattested rows are never fitted, and neither is
  an implausible one: a record whose figures fail the audit's own check (handlers.evaluator.replay.perf_problems: a
  median that is not its samples', counts that disagree) or a figure outside physics for its config
  (npu_kernels.perf.calibration.figure_problem) is left out, named with why (`left_out`, recorded on the fit).
* `calibrate(ledger, name, device)` fits them (npu_kernels.perf.calibration.fit_calibration) and appends one
  `PerformanceCalibrated` (stream `perf:calibration`) holding the fit and its data; `NoHardwareRows` when the
  ledger has none: the model then stays on mlir-air's published machine, and says so.
* `calibration_for(events, name)` is the fit `ledger predict` reports with: the one named, else the latest.

Imported nightly lines (`ledger perf import-history`) name a model directory, not a config, so they cannot be
modelled and are not fitted.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from npu_kernels.model.config import ModelConfig
from handlers.evaluator.replay import perf_problems
from npu_kernels.perf.calibration import PUBLISHED, CalibrationError, CalibrationRow, figure_problem, fit_calibration
from npu_kernels.perf.figures import build_seq, decode_ctx, path_switches
from npu_kernels.provenance import NPU2_MEASURED, perf_row_provenance
from ledger.events import NewEvent, PerformanceCalibrated
from ledger.record import RecordedEvent
from registry.text import escaped

CALIBRATION_STREAM = "perf:calibration"
METHOD = ("NNLS on relative error of five group factors (npu, bo_write, bo_read, xrt, host) over the published "
          "machine's components; error bars 3 x jackknife SE (constants), 2 x leave-one-out RMS (figures)")


class NoHardwareRows(CalibrationError):
    """The ledger holds no NPU2-measured profile figure (of the device asked for)."""


def _config(payload: dict[str, Any]) -> ModelConfig:
    return ModelConfig(**{k: v for k, v in payload.items() if k in ModelConfig.__dataclass_fields__})


def _device(payload: dict[str, Any]) -> str:
    prof = payload.get("profile") or {}
    facts = prof.get("provenance") or (prof.get("npu2") or {}).get("provenance") or {}
    return str(facts.get("device") or "")


def _rows_of(e: RecordedEvent, cfg: ModelConfig) -> list[CalibrationRow]:
    """The figures one NPU2-measured PerformanceMeasured holds, each with what ran."""
    p, prof = e.payload, e.payload.get("profile") or {}
    label = f"{e.stream_id} seq {e.seq} phase {p.get('phase')}"
    pipeline = p.get("pipeline") or {}
    # the switches in force: the backend's options hold them under "switches" (npu_kernels.backends.mlir_air.options)
    pipeline = pipeline.get("switches") if isinstance(pipeline.get("switches"), dict) else pipeline
    n = int(p.get("n_prompt_tokens") or 0)
    out = []
    if p.get("ttft_s"):  # Phase 6 (and re-measurements of it): TTFT and the decode step
        sw = path_switches(pipeline, "prefill")
        out.append(CalibrationRow(cfg, n or build_seq(cfg), decode_ctx(cfg), sw, "ttft_s", float(p["ttft_s"]), label))
        if p.get("ms_per_token"):
            ctx = int((prof.get("npu2") or {}).get("ctx") or decode_ctx(cfg))
            out.append(CalibrationRow(cfg, n or build_seq(cfg), ctx, path_switches(pipeline, "decode"),
                                      "ms_per_token", float(p["ms_per_token"]), label))
    elif p.get("prefill_s"):  # Phase 4: the prefill under the switch set it measured
        sw = prof.get("switches") or path_switches(pipeline, "prefill")
        out.append(CalibrationRow(cfg, n or build_seq(cfg), decode_ctx(cfg), sw, "prefill_s", float(p["prefill_s"]),
                                  label))
    elif p.get("ms_per_token"):  # Phase 5: one decode step
        sw = prof.get("switches") or path_switches(pipeline, "decode")
        out.append(CalibrationRow(cfg, build_seq(cfg), n or decode_ctx(cfg), sw, "ms_per_token",
                                  float(p["ms_per_token"]), label))
    return out


def _problems(e: RecordedEvent, config: dict[str, Any], rows: list[CalibrationRow]) -> list[str]:
    """Why the figures of one NPU2-measured record may not be fitted ([]: they may)."""
    try:
        found = perf_problems(e.payload, config)
    except (TypeError, ValueError, KeyError) as err:  # a payload appended behind the recorder's back
        found = [f"its figures cannot be read ({type(err).__name__})"]
    return found + [why for why in map(figure_problem, rows) if why]


def hardware_rows(events: Iterable[RecordedEvent], device: str | None = None,
                  left_out: list[dict[str, Any]] | None = None) -> tuple[list[CalibrationRow], list[str]]:
    """(rows, devices): the NPU2-measured figures of the ledger (of `device` only, when given), oldest first; each
    record whose figures are implausible (`_problems`) is left out and, when `left_out` is given, appended to it
    as {label, seq, why}."""
    configs: dict[str, tuple[dict[str, Any], ModelConfig]] = {}
    rows: list[CalibrationRow] = []
    devices: list[str] = []
    for e in events:
        if e.type == "ConfigResolved":
            configs[e.stream_id] = (e.payload, _config(e.payload))
        elif e.type == "PerformanceMeasured" and e.stream_id in configs:
            if perf_row_provenance(e.payload) != NPU2_MEASURED:
                continue
            dev = _device(e.payload)
            if device is not None and dev != device:
                continue
            try:
                found = _rows_of(e, configs[e.stream_id][1])
            except (TypeError, ValueError) as err:
                found, why = [], [f"its figures cannot be read ({type(err).__name__})"]
            else:
                why = _problems(e, configs[e.stream_id][0], found)
            if why:
                if left_out is not None:
                    left_out.append({"label": f"{e.stream_id} seq {e.seq} phase {e.payload.get('phase')}",
                                     "seq": e.seq, "why": "; ".join(why)})
                continue
            rows += found
            if found and dev not in devices:
                devices.append(dev)
    return rows, devices


def calibrate(ledger, name: str | None = None, device: str | None = None) -> dict[str, Any]:
    """Fit the ledger's NPU2-measured figures, append the PerformanceCalibrated, return what was recorded (with its
    seq). NoHardwareRows / CalibrationError (nothing appended) when there is nothing, or too little, to fit."""
    if name is not None and (not name.isprintable() or not name.strip() or len(name) > 120):
        raise CalibrationError(f"the calibration's name {escaped(name)} is not a printable name of 1-120 characters")
    events = ledger.read_all()
    left_out: list[dict[str, Any]] = []
    rows, devices = hardware_rows(events, device, left_out)
    if not rows:
        which = f" of device {device!r}" if device is not None else ""
        apart = (f" ({len(left_out)} left out as implausible, first {left_out[0]['label']}: {left_out[0]['why']})"
                 if left_out else "")
        raise NoHardwareRows(f"no NPU2-measured profile figures{which} in the ledger{apart}: nothing to fit; "
                             f"`ledger predict` uses {PUBLISHED}")
    fit = fit_calibration(rows)
    held = [e for e in events if e.stream_id == CALIBRATION_STREAM]
    event = PerformanceCalibrated(
        name=name or f"calibration-{len(held) + 1}", devices=devices, scales=fit.scales, scale_errors=fit.scale_errors,
        constants=fit.constants, fixed=fit.fixed, error_bars=fit.error_bars, rows=fit.rows, method=METHOD,
        left_out=left_out)
    if any(e.payload.get("name") == event.name for e in held):
        raise CalibrationError(f"a calibration named {event.name!r} is already recorded; choose another --name")
    version = ledger.stream_version(CALIBRATION_STREAM)
    seqs = ledger.append(CALIBRATION_STREAM, version, [NewEvent(event=event)])
    seq = seqs[-1] if isinstance(seqs, Sequence) and seqs else seqs
    return {"seq": seq, **event.model_dump()}


def calibration_for(events: Iterable[RecordedEvent], name: str | None = None) -> dict[str, Any] | None:
    """The PerformanceCalibrated payload named `name` (KeyError when there is none), else the latest (None: none)."""
    found = [e for e in events if e.type == "PerformanceCalibrated"]
    if name is not None:
        hit = [e for e in found if e.payload.get("name") == name]
        if not hit:
            raise KeyError(f"no calibration named {name!r} in the ledger"
                           + (f" (recorded: {', '.join(e.payload.get('name', '') for e in found)})" if found else ""))
        found = hit
    return {"seq": found[-1].seq, **found[-1].payload} if found else None
