"""A verify runner that writes only what mlir-air's report schema holds: the hidden case of the twin e2e.

A real mlir-air checkout's `programming_examples/llms/verify/verify_runner.py` writes reports with exactly
the keys below and nothing else; a gate that needs evidence outside them cannot pass on real hardware. This
runner holds the stand-in to that: it runs the stand-in's verify runner (npu_kernels.mlir_air.twin.verify_runner,
the same CLI and numbers) into a scratch directory, keeps of every JSON report exactly the schema's keys (a
key the schema has and the report lacks is an error: the stand-in no longer writes mlir-air's format), writes
the reports where mlir-air writes them (`--report-dir`, default `<verify dir>/reports`, verify_runner.py:218)
and prints the stand-in's lines with those paths.

mlir-air's report schema at e972f29 (programming_examples/llms/verify/), written down here from the files:
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from npu_kernels.settings import stand_in_python

# report.py:69-75 (Report.dump_json)
REPORT = ("config", "prompts", "per_layer", "topk_checks", "summary")
# verify_runner.py:278-287 (every mode) and :373-374 (verify mode)
CONFIG = ("mode", "runner", "model", "model_name", "npu_attn", "prompt")
CONFIG_VERIFY = ("prompts_file", "max_prompts")
# report.py:45-52 (Report.summary)
SUMMARY = ("n_layer_records", "topk_passed", "topk_failed")
# report.py:67 ("pair" + TopKCheckRecord.to_dict()), comparators.py:165-188 (TopKCheckRecord's fields)
TOPK_ROW = ("pair", "prompt_idx", "prompt_text", "n_steps", "k", "divergence_step", "test_chosen_at_div",
            "ref_chosen_at_div", "test_topk_at_div", "ref_topk_at_div", "status", "fail_reason",
            "test_chosen_rank_in_ref", "ref_chosen_rank_in_test", "test_chosen_text_at_div", "ref_chosen_text_at_div",
            "agreed_prefix_text")
# report.py:71 (ComparisonRecord.to_dict()), comparators.py:73-83 (its fields), :43-51 and :54-70 (the dicts)
LAYER_ROW = ("name", "pair", "layer", "cosine", "errors")
COSINE = ("min", "p5", "median", "mean")
ERRORS = ("max_abs", "mean_abs", "max_rel", "mean_rel")


def _keep(obj: dict, keys: tuple[str, ...], where: str) -> dict:
    missing = [k for k in keys if k not in obj]
    if missing:
        raise KeyError(f"{where} lacks {missing}: the stand-in's report is not mlir-air's format")
    return {k: obj[k] for k in keys}


def project(report: dict) -> dict:
    """The report with mlir-air's keys only."""
    out = _keep(report, REPORT, "the report")
    verify = out["config"].get("mode") == "verify"
    out["config"] = _keep(out["config"], CONFIG + (CONFIG_VERIFY if verify else ()), "config")
    out["summary"] = _keep(out["summary"], SUMMARY, "summary")
    if out["topk_checks"] is not None:
        out["topk_checks"] = [_keep(r, TOPK_ROW, "a topk_checks row") for r in out["topk_checks"]]
    out["per_layer"] = [{**_keep(r, LAYER_ROW, "a per_layer row"), "cosine": _keep(r["cosine"], COSINE, "cosine"),
                         "errors": _keep(r["errors"], ERRORS, "errors")} for r in out["per_layer"]]
    return out


def schema_keys() -> dict[str, set[str]]:
    """Every key a schema-only report may hold, by place (for the test's own check of what was written)."""
    return {"report": set(REPORT), "config": set(CONFIG + CONFIG_VERIFY), "summary": set(SUMMARY),
            "topk_row": set(TOPK_ROW), "layer_row": set(LAYER_ROW)}


def _report_dir(argv: list[str], verify_dir: Path) -> tuple[Path, list[str]]:
    rest, out, i = [], verify_dir / "reports", 0
    while i < len(argv):
        a = argv[i]
        if a == "--report-dir":
            out, i = Path(argv[i + 1]), i + 2
            continue
        if a.startswith("--report-dir="):
            out = Path(a.split("=", 1)[1])
        else:
            rest.append(a)
        i += 1
    return out, rest


def main(argv: list[str] | None = None) -> int:
    verify_dir = Path(os.environ["NPU_LEDGER_VERIFY_DIR"])
    report_dir, rest = _report_dir(list(sys.argv[1:] if argv is None else argv), verify_dir)
    with tempfile.TemporaryDirectory(prefix="schema-only-verify-") as scratch:
        proc = subprocess.run([stand_in_python(), "-m", "npu_kernels.mlir_air.twin.verify_runner", *rest,
                               "--report-dir", scratch], capture_output=True, text=True)
        report_dir.mkdir(parents=True, exist_ok=True)
        for f in sorted(Path(scratch).iterdir()):
            if f.suffix == ".json":
                (report_dir / f.name).write_text(json.dumps(project(json.loads(f.read_text())), indent=2))
            else:
                shutil.copyfile(f, report_dir / f.name)
        sys.stdout.write(proc.stdout.replace(scratch, str(report_dir)))
        sys.stderr.write(proc.stderr.replace(scratch, str(report_dir)))
    return proc.returncode


def install(twin: Path) -> None:
    """Make this the twin checkout's `programming_examples/llms/verify/verify_runner.py`."""
    root = Path(__file__).resolve().parents[2]
    runner = twin / "programming_examples" / "llms" / "verify" / "verify_runner.py"
    runner.write_text("#!/usr/bin/env python3\n"
                      "# schema-only verify runner (tests/e2e/schema_only_verify.py): mlir-air's report keys only\n"
                      "import os, sys\n"
                      f"ROOT = {str(root)!r}\nPY = {stand_in_python()!r}\n"
                      "env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''),\n"
                      "           NPU_LEDGER_VERIFY_DIR=os.path.dirname(os.path.abspath(__file__)))\n"
                      "os.execve(PY, [PY, '-m', 'tests.e2e.schema_only_verify', *sys.argv[1:]], env)\n")
    runner.chmod(0o755)


if __name__ == "__main__":
    sys.exit(main())
