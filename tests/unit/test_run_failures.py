"""A failed make target is reported with what it printed last (issue #48 item 2): `failure_tail` quotes the last
lines of its last Python traceback, bounded and escaped, and `read_model_run` puts them in the error of a run that
exited non-zero before its verdict, where it used to say only which format the text failed to match."""

from __future__ import annotations

import pytest

from npu_kernels.mlir_air.output import TAIL_LINES, TAIL_WIDTH, TranscriptError, failure_tail
from npu_kernels.mlir_air.run_reports import read_model_run
from npu_kernels.mlir_air.verify_report import parse_verify_output

# what `make diagnosis` printed at dd99c44 for a hardware scaffold (the twin's runner, Python 3.11)
FAILED_DIAGNOSIS = """\
make: Entering directory '/ck/programming_examples/llms/tiny'
cd build_peano && PYTHONPATH=/npu-ledger python3 /ck/programming_examples/llms/tiny/../verify/verify_runner.py --runner=tiny.verify_adapter --prompts single
[verify] adapter=tiny.verify_adapter, model=/models/tiny, hf_ref=/models/tiny, mode=diagnosis, lite=False
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/npu-ledger/npu_kernels/mlir_air/twin/verify_runner.py", line 163, in main
    adapter.build_config(), Path(a.report_dir) if a.report_dir else here / "reports",
    ^^^^^^^^^^^^^^^^^^^^^^
  File "/ck/programming_examples/llms/tiny/verify_adapter.py", line 19, in build_config
    from tiny_inference import build_config as build
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ModuleNotFoundError: No module named 'tiny_inference'
make: *** [Makefile:101: diagnosis] Error 1
make: Leaving directory '/ck/programming_examples/llms/tiny'
"""


def test_the_tail_is_the_tracebacks_innermost_frame_and_exception_without_carets_or_makes_lines():
    assert failure_tail(FAILED_DIAGNOSIS) == (
        'adapter.build_config(), Path(a.report_dir) if a.report_dir else here / "reports", | '
        'File "/ck/programming_examples/llms/tiny/verify_adapter.py", line 19, in build_config | '
        "from tiny_inference import build_config as build | ModuleNotFoundError: No module named 'tiny_inference'")


def test_the_last_traceback_is_quoted_bounded_and_escaped():
    long = "x" * 1000
    text = ("Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: first\n"
            f"Traceback (most recent call last):\n  File \"b.py\", line 2\n    {long}\n"
            "RuntimeError: \x1b]0;owned\x07 the device \u202eis gone\nmake: *** [Makefile:1: verify] Error 1\n")
    tail = failure_tail(text)
    parts = tail.split(" | ")
    assert "first" not in tail and len(parts) == 3 <= TAIL_LINES and all(len(p) <= TAIL_WIDTH for p in parts)
    assert parts[1] == "x" * (TAIL_WIDTH - 3) + "..."
    assert parts[2] == "RuntimeError: \\x1b]0;owned\\x07 the device \\u202eis gone" and tail.isprintable()


def test_without_a_traceback_the_tail_is_the_line_that_says_what_failed():
    text = ("make: Entering directory '/m'\ntiny_inference.py is the scaffold's skeleton, not written yet\n"
            "make: *** [Makefile:9: verify] Error 1\nmake: Leaving directory '/m'\n")
    assert failure_tail(text) == "tiny_inference.py is the scaffold's skeleton, not written yet"
    assert failure_tail("") == ""


def test_a_run_that_failed_before_its_verdict_is_reported_by_its_tail_not_by_the_format():
    with pytest.raises(TranscriptError) as e:
        read_model_run("make -C /m diagnosis", 2, FAILED_DIAGNOSIS, None, parse_verify_output)
    assert str(e.value) == ("`make -C /m diagnosis` failed (exit status 2) before its verdict: " + failure_tail(FAILED_DIAGNOSIS))
    with pytest.raises(TranscriptError, match="matches none of the mlir-air verify formats"):  # exit 0: the format
        read_model_run("make -C /m diagnosis", 0, FAILED_DIAGNOSIS, None, parse_verify_output)
