"""`ledger predict` (CLI and MCP): one producer of the prediction, within the model's limits, with the calibration.

`predict_result(app, target, ...) -> (Prediction, JSON)`:
* the prefill length and decode context default to the deployment's build (`npu_kernels.perf.figures.build_seq` /
  `decode_ctx`: 2048 and 128, cut to the model's context window); one asked past the window
  (`npu_kernels.model.config.position_limit`) is refused in one line (`ValueError`): the model has no such positions;
* the figures on the user's machine: the ledger's latest `PerformanceCalibrated` (`ledger perf calibrate`), or the
  one `calibration` names, applied to the prediction with its error bars (npu_kernels.perf.calibration.calibrated);
  `calibration` "published", a ledger with none, or a workspace without a ledger: mlir-air's published machine,
  said in the result. The modelled figures of the published machine are always there beside it. A calibration
  whose constants put the figures beyond physics (npu_kernels.perf.calibration.physics_problems: one appended
  behind the recorder's back, or recorded before the check) is not applied: the result names it and says why.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from handlers import results
from handlers.calibrate import calibration_for
from handlers.queries import predict_config
from npu_kernels.model.config import ModelConfig, position_limit
from npu_kernels.perf.calibration import PUBLISHED, CalibrationError, calibrated
from npu_kernels.perf.figures import build_seq, decode_ctx
from npu_kernels.perf.q4nx import matching_anchor, predict_weights
from npu_kernels.perf.readme import matching_readme_row, readme_lines

PUBLISHED_NAME = "published"  # `--calibration published`: mlir-air's published machine, whatever the ledger holds


def within_window(config: ModelConfig, value: int | None, default: int, what: str) -> int:
    """`value` (None: `default`), refused (ValueError, one line) when past the model's positions."""
    if value is None:
        return default
    limit = position_limit(config)
    if limit is not None and value > limit:
        raise ValueError(f"{what} {value} is past the model's {limit} positions (its context window, "
                         "max_position_embeddings, or its RoPE tables): nothing is built or timed there")
    return value


def _events(app):
    """The ledger's events, read-only; none for a SQLite workspace that has no ledger (nothing is created)."""
    if app.db_url.startswith("sqlite") and not (app.workspace / ".ledger").is_dir():
        return []
    app.read_only = True
    return app.ledger.read_all()


def calibration_json(app, prediction, config: ModelConfig, weights: str,
                     name: str | None = None) -> dict[str, Any]:
    """What `predict` reports of the machine: the calibration used and its figures with error bars, or why none."""
    cal = None if name == PUBLISHED_NAME else calibration_for(_events(app), name)
    if cal is None:
        return {"name": None, "machine": PUBLISHED,
                "note": ("asked for" if name == PUBLISHED_NAME else "no calibration in the ledger (`ledger perf "
                         "calibrate` fits the NPU2-measured runs it holds)") + f": {PUBLISHED}"}
    head = {"name": cal["name"], "seq": cal["seq"], "devices": cal.get("devices", []), "rows": len(cal.get("rows", [])),
            "constants": cal.get("constants", {}), "error_bars": cal.get("error_bars", {})}
    if weights != "bf16":
        return {**head, "machine": PUBLISHED, "note": f"fitted to bf16 runs: not applied to {weights} weights"}
    try:
        figs = calibrated(prediction, cal.get("scales") or {}, cal.get("error_bars") or {}, config, prediction.switches)
    except CalibrationError as e:  # never a figure outside physics: the published machine's, and why
        return {**head, "machine": PUBLISHED, "note": f"not applied, {e}"}
    return {**head, "machine": "calibrated", **figs,
            "error_bar": "2 x the leave-one-out RMS of the fitted rows' relative residuals (npu_kernels.perf.calibration)"}


def predict_result(app, target: str, *, seq: int | None = None, ctx: int | None = None, switches=None,
                   weights: str = "bf16", host_bytes: int | None = None, calibration: str | None = None):
    """(Prediction, the `predict --json` object); TargetError / ValueError / KeyError as one line each."""
    config = predict_config(app, target)
    seq = within_window(config, seq, build_seq(config), "--seq")
    ctx = within_window(config, ctx, decode_ctx(config), "--ctx")
    p = predict_weights(config, weights, seq=seq, switches=switches, ctx=ctx, host_bytes=host_bytes)
    anchor = matching_anchor(config) if weights == "q4nx-device" else None  # the 4-bit README's own figures
    if weights == "bf16":  # mlir-air's published bf16 figure beside ours (docs/design.md, imported:mlir-air-readme)
        anchor = matching_readme_row(config)
        p = replace(p, notes=[*p.notes, *readme_lines(config, p.ttft_s, p.decode_tokens_per_s, p.seq)])
    cal = calibration_json(app, p, config, weights, calibration)
    return p, results.predict_json(p, weights, anchor, calibration=cal)


def calibration_lines(cal: dict[str, Any]) -> list[str]:
    """The calibration as `predict` prints it under the modelled table."""
    if cal.get("machine") != "calibrated":
        who = f"calibration {cal['name']}: " if cal.get("name") else "calibration: none; "
        return [who + cal["note"]]
    devices = ", ".join(d for d in cal["devices"] if d) or "device unnamed"
    return [f"calibration {cal['name']} (ledger seq {cal['seq']}; {devices}; {cal['rows']} measured figures): "
            f"TTFT {cal['ttft_s'] * 1e3:.1f} ± {cal['ttft_error_s'] * 1e3:.1f} ms, "
            f"{cal['ms_per_token']:.2f} ± {cal['ms_per_token_error']:.2f} ms/token "
            f"({cal['decode_tokens_per_s']:.2f} tok/s)",
            f"  error bars: {cal['error_bar']}"]
