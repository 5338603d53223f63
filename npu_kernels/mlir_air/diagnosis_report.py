"""Parser for `make diagnosis` of an mlir-air LLM directory: per-layer `ffn_out` rows (cosine
min/p5/median/mean, max_abs, mean_abs) of the diagnosis report, mapped onto `LayerDiagnosed` fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from npu_kernels.mlir_air.output import TranscriptError
from npu_kernels.mlir_air.verify_report import one_verdict, summary_int, verify_lines


@dataclass(frozen=True)
class DiagnosisResult:
    summary: dict[str, Any]
    layers: tuple[dict[str, Any], ...]
    report_json_path: str | None = None

def _finite_or_nan(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TranscriptError(f"{what} is not a number: {value!r}.")
    return float(value)


def parse_diagnosis_report(
    report_json: dict[str, Any], *, executor: str = "mlir-air", prompt_index: int = 0, probe: str = "ffn_out"
) -> list[dict[str, Any]]:
    """Map the `per_layer` rows of a `diagnosis_<stamp>.json` report onto `LayerDiagnosed` fields, by layer.

    Only rows of the block-output probe (`ffn_out`) count. A row without a layer, cosine aggregates outside
    [-1, 1] (NaN is kept: it is evidence), a layer listed twice, or a report with no such row raises."""
    if not isinstance(report_json, dict):
        raise TranscriptError("the diagnosis report is not a JSON object.")
    config = report_json.get("config") if isinstance(report_json.get("config"), dict) else {}
    if config.get("mode") not in (None, "diagnosis"):
        raise TranscriptError(f"the report's mode is {config.get('mode')!r}, not 'diagnosis'.")
    rows = report_json.get("per_layer")
    if not isinstance(rows, list):
        raise TranscriptError("the report has no per_layer list: it is not a diagnosis report.")
    out: dict[int, dict[str, Any]] = {}
    for row in rows:
        if not isinstance(row, dict) or row.get("name") != probe:
            continue
        layer = row.get("layer")
        if not isinstance(layer, int) or isinstance(layer, bool) or layer < 0:
            raise TranscriptError(f"a per_layer row has no valid layer index: {row!r}.")
        cos, err = row.get("cosine"), row.get("errors")
        if not isinstance(cos, dict) or not isinstance(err, dict):
            raise TranscriptError(f"layer {layer}: the row lacks its cosine/errors tables.")
        try:
            fields = {
                "layer": layer,
                "executor": executor,
                "cos_min": _finite_or_nan(cos["min"], f"layer {layer} cosine min"),
                "cos_p5": _finite_or_nan(cos["p5"], f"layer {layer} cosine p5"),
                "cos_median": _finite_or_nan(cos["median"], f"layer {layer} cosine median"),
                "cos_mean": _finite_or_nan(cos["mean"], f"layer {layer} cosine mean"),
                "max_abs": _finite_or_nan(err["max_abs"], f"layer {layer} max_abs"),
                "mean_abs": _finite_or_nan(err["mean_abs"], f"layer {layer} mean_abs"),
                "prompt_index": prompt_index,
            }
        except KeyError as e:
            raise TranscriptError(f"layer {layer}: the row lacks {e.args[0]!r}.") from e
        for key in ("cos_min", "cos_p5", "cos_median", "cos_mean"):
            v = fields[key]
            if not math.isnan(v) and not -1.0001 <= v <= 1.0001:
                raise TranscriptError(f"layer {layer}: {key} = {v} is not a cosine.")
        if layer in out:
            raise TranscriptError(f"layer {layer} appears twice in the diagnosis report.")
        out[layer] = fields
    if not out:
        raise TranscriptError(f"the diagnosis report holds no {probe!r} rows.")
    return [out[layer] for layer in sorted(out)]


def parse_diagnosis_output(
    text: str, report_json: dict[str, Any] | None, *, executor: str = "mlir-air", prompt_index: int = 0
) -> DiagnosisResult:
    """Parse `make diagnosis` output plus its report: the run must end in `[verify] PASS` (diagnosis never
    fails on numbers, so a FAIL or a missing verdict means the run broke) and the Summary's
    `n_layer_records` must equal the report's per_layer row count. `report_json=None` checks the
    transcript alone and returns no layers."""
    lines, summary, verdicts, report_path = verify_lines(text)
    verdict = one_verdict(verdicts, summary, lines, text)
    assert summary is not None
    n_records = summary_int(summary, "n_layer_records", text)
    if verdict != "PASS":
        raise TranscriptError("the diagnosis run printed '[verify] FAIL'; diagnosis has no failing verdict.", text)
    if report_json is None:
        return DiagnosisResult(summary=dict(summary), layers=(), report_json_path=report_path)
    layers = parse_diagnosis_report(report_json, executor=executor, prompt_index=prompt_index)
    rows = report_json.get("per_layer") or []
    if n_records != len(rows):
        raise TranscriptError(
            f"the Summary counts {n_records} layer records but the report holds {len(rows)}: "
            "the report is from another run."
        )
    return DiagnosisResult(summary=dict(summary), layers=tuple(layers), report_json_path=report_path)
