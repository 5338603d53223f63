"""What the mlir-air executor reads back from a run besides its transcript: the report JSON a model run
wrote (`find_report`, `read_model_run`) and the figures of a timing-only harness run (`read_latency_run`).

Pure functions of text and files; the parsers they call are one module per format (`transcript`, `profile`,
`verify_report`, `diagnosis_report`). Imported by `npu_kernels.mlir_air.executor`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from npu_kernels.mlir_air.output import TranscriptError, failure_tail, sha256_text
from npu_kernels.mlir_air.profile import parse_profile_output
from npu_kernels.mlir_air.transcript import parse_harness_transcript

REPORT_TARGETS = ("verify", "verify_full", "diagnosis")  # the model targets that write a report JSON


def find_report(target: str, transcript: str, model_dir: str, report_dirs: list[str], started: float) -> str | None:
    """The report JSON a `make verify` / `verify-full` / `diagnosis` run wrote: the last `[verify] JSON:` file
    the transcript names (relative to the model folder, its `build*` folders or `report_dirs`), else the
    newest matching file in `report_dirs` written since `started`; None for other targets or none found."""
    if target not in REPORT_TARGETS:
        return None
    prefix = "diagnosis_" if target == "diagnosis" else "verify_topk_token_"
    named = [
        line.split("JSON:", 1)[1].strip() for line in transcript.splitlines() if line.startswith("[verify] JSON:")
    ]
    for name in reversed(named):
        for base in [model_dir, *sorted(str(p) for p in Path(model_dir).glob("build*")), *report_dirs]:
            path = Path(name) if os.path.isabs(name) else Path(base) / name
            if path.is_file() and path.name.startswith(prefix):
                return str(path)
    fresh = [
        p
        for d in report_dirs
        for p in Path(d).glob(f"{prefix}*.json")
        if p.is_file() and p.stat().st_mtime >= started - 1.0
    ]
    return str(max(fresh, key=lambda p: p.stat().st_mtime)) if fresh else None


def read_model_run(command: str, rc: int, transcript: str, report_path: str | None,
                   parse: Callable[[str, Any], Any]) -> tuple[dict[str, Any], Any]:
    """(the report JSON, `parse(transcript, report)`) of a model run; a broken transcript explains itself
    before a missing report does. Raises `TranscriptError` naming the command and its exit status; for a run that
    exited non-zero, with what it printed last (`failure_tail`: its traceback's last lines) instead of the format
    it failed to match."""
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
        if rc != 0:  # a run that failed before it printed a verdict: what it printed last says why, not the format
            raise TranscriptError(f"`{command}` failed (exit status {rc}) before its verdict: {failure_tail(transcript)}",
                                  transcript) from e
        raise TranscriptError(f"`{command}` (exit status {rc}): {e}", transcript) from e


def read_latency_run(latency_format: str, rc: int,
                     text: str) -> tuple[tuple[float | None, float | None], dict[str, Any]]:
    """((latency_us, gflops), what the provenance keeps of it) of a timing-only run that exited with `rc`.

    `latency_format` "profile" is a `make profile` target (npu_kernels.mlir_air.profile: min / max / bandwidth
    are kept too); otherwise the run printed an XRTRunner transcript whose `Latency (us):` line is read (its
    `[precision]` figures are not the checked row's: buffer reuse). A failed timing run leaves the latency
    absent (None) and says why (`error`); it never changes the verdict of the checked run."""
    record: dict[str, Any] = {"returncode": rc, "output_sha256": sha256_text(text)}
    try:
        if rc != 0:
            raise TranscriptError(f"exit status {rc}")
        if latency_format == "profile":
            prof = parse_profile_output(text)
            record.update(min_us=prof.min_us, max_us=prof.max_us, bandwidth_gbps=prof.bandwidth_gbps)
            return (prof.latency_us, prof.gflops), record
        timed = parse_harness_transcript(text)
        if timed.latency_us is None:
            raise TranscriptError("no `Latency (us):` line")
        return (timed.latency_us, timed.gflops), record
    except TranscriptError as e:
        record["error"] = str(e).split("\n")[0]
        return (None, None), record
