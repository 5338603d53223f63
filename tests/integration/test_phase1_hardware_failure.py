"""Phase 1 on mlir-air survives a harness that fails: a stand-in harness (a real process per row) that fails to
build one kernel mid-Phase-1 leaves FAIL rows for that kernel, triaged, keeps every other row, and the phase
fails naming the kernel; re-advancing after the fix re-runs only the rows that failed."""

import shlex
import sys
from pathlib import Path

from handlers.uow import DeploymentUnit
from npu_kernels.numerics.catalog import get_spec
from npu_kernels.numerics.kernels import kernel_tolerance
from ledger import open_ledger
from tests.e2e.cli import ledger as cli
from tests.integration.test_phase1_evidence import _at_phase1

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
FAKE = FIXTURES / "fake_xrt.py"
# placeholders per kernel: the row's output size is computed by the stand-in from the shape it is given
ELEMENTS = {"gemm": "{M}*{N}", "gemv": "{M}", "rmsnorm": "{M}*{N}", "rope": "{rows}*{head_dim}",
            "flash_attention": "{heads_q}*{lq}*{dv}", "eltwise_add": "{N}", "silu_mul": "{N}"}


def _table(tmp_path: Path, broken: Path, log: Path) -> Path:
    lines = ["[settings]", "timeout_s = 60", "lock_timeout_s = 5"]
    for kernel, count in ELEMENTS.items():
        contract = get_spec(kernel).default_contract
        rtol, atol = kernel_tolerance(kernel, contract)
        args = [sys.executable, str(FAKE), "--rtol", repr(rtol), "--atol", repr(atol), "--latency", "1000000",
                "--log", str(log)]
        cmd = " ".join(shlex.quote(a) for a in args)
        # the element count is an arithmetic expression of the shape, evaluated by the shell
        name = {"gemm": "{M}x{K}x{N}", "gemv": "{M}x{K}"}.get(kernel, count)  # unique per row
        cmd += f' --elements "$(( {count} ))" --name "{kernel} {name}"'
        if kernel == "gemv":
            cmd += (f" --broken-if {shlex.quote(str(broken))} --broken-text "
                    f"{shlex.quote(str(FIXTURES / 'triage' / 'gemv-bd-repeat-count.log'))} --broken-exit 2")
        lines += [f"[harness.{kernel}]", f"command = {cmd!r}"]
        if kernel == "gemm":  # the plan runs K < 1024 GEMM rows on the low-precision tier (its own entry)
            rtol, atol = kernel_tolerance("gemm", "bf16-out-low")
            low_args = [sys.executable, str(FAKE), "--rtol", repr(rtol), "--atol", repr(atol), "--latency", "1000000",
                        "--log", str(log)]
            low = " ".join(shlex.quote(a) for a in low_args) + f' --elements "$(( {count} ))" --name "{kernel} {name}"'
            lines += ['[harness."gemm@bf16-out-low"]', f"command = {low!r}"]
    path = tmp_path / "harnesses.toml"
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return path


def test_a_harness_that_fails_to_build_mid_phase_1_fails_that_kernel_only_and_the_fix_reruns_only_it(
        tmp_path, monkeypatch):
    broken, log = tmp_path / "gemv-is-broken", tmp_path / "runs.log"
    broken.write_text("until fixed")
    monkeypatch.setenv("NPU_LEDGER_HARNESSES", str(_table(tmp_path, broken, log)))
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "npu.lock"))
    url = f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}"
    _at_phase1(url, "m", "mlir-air", str(tmp_path))

    first = cli(tmp_path, "advance", "m", "--until", "1")
    out = first.stdout + first.stderr
    assert "phase 1 FAILED (attempt 1)" in out, out
    state = DeploymentUnit(open_ledger(url), "m").state
    attempt = state.failed_attempts[1][0]
    rows = [ev.event for ev in attempt.evidence if type(ev.event).__name__ == "KernelVerified"]
    gemv = [r for r in rows if r.kernel == "gemv"]
    others = [r for r in rows if r.kernel != "gemv"]
    n_gemv = len(gemv)
    assert n_gemv >= 5 and all(r.verdict == "FAIL" and r.not_measured == "compile-error" for r in gemv)
    assert all(r.provenance["returncode"] == 2 and len(r.provenance["transcript_sha256"]) == 64 for r in gemv)
    assert all("Repeat count exceeds [0:255]" in "\n".join(r.provenance["tail"]) for r in gemv)
    assert others and all(r.verdict == "PASS" for r in others)  # every other row was measured and kept
    assert {r.kernel for r in others} == set(ELEMENTS) - {"gemv"}
    assert "failing kernel(s): gemv (" in state.last_verdict, state.last_verdict[:3000]
    triaged = [e for e in open_ledger(url).read_stream("deployment:m") if e.type == "FailureTriaged"]
    assert triaged and triaged[-1].payload["matches"][0]["rule_id"] == "gemv-bd-repeat-count"
    ran_first = log.read_text().splitlines()
    assert len(ran_first) == len(rows)  # one run per row: a build error is not retried

    broken.unlink()  # the fix
    second = cli(tmp_path, "advance", "m", "--until", "1")
    assert "phase 1 PASSED (attempt 2)" in second.stdout + second.stderr, second.stdout + second.stderr
    ran_second = log.read_text().splitlines()[len(ran_first):]
    assert len(ran_second) == n_gemv and all(r.startswith("gemv") for r in ran_second)  # only what failed
    passed = DeploymentUnit(open_ledger(url), "m").state.passed[1]
    carried = [ev.event for ev in passed.evidence if getattr(ev.event, "carried_from_seq", None)]
    assert len(carried) == len(others) and all("carried, not re-run" in e.note for e in carried)
    assert "carried from the failed attempt, not re-run" in passed.summary


def test_a_traceback_is_a_fail_row_and_a_later_harness_that_never_ends_stops_the_rows_without_hiding_it(
        tmp_path, monkeypatch):
    """A shape assertion (Python traceback, exit 1) leaves a FAIL row with `not_measured` naming the outcome; a later
    row whose harness hangs on each of its fresh-process tries (killed at the harness timeout) gives no verdict, so
    no row after it runs, and the phase fails on the traceback: a run without a verdict never hides a failure."""
    log = tmp_path / "runs.log"
    table = _table(tmp_path, tmp_path / "never", log).read_text()
    fa = [sys.executable, str(FIXTURES / "fake_harness.py"), str(FIXTURES / "triage" / "flash-attention-shape-assert.log"),
          "--exit", "1"]
    hang = [sys.executable, str(FIXTURES / "fake_harness.py"), str(FIXTURES / "rmsnorm_pass.txt"), "--sleep", "30"]
    table = table.replace("[harness.flash_attention]", "[harness.flash_attention_unused]")
    table = table.replace("[harness.silu_mul]", "[harness.silu_mul_unused]")
    table += (f"[harness.flash_attention]\ncommand = {' '.join(shlex.quote(a) for a in fa)!r}\n"
              f"[harness.silu_mul]\ncommand = {' '.join(shlex.quote(a) for a in hang)!r}\ntimeout_s = 1\n")
    path = tmp_path / "harnesses.toml"
    path.write_text(table)
    monkeypatch.setenv("NPU_LEDGER_HARNESSES", str(path))
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "npu.lock"))
    url = f"sqlite:///{tmp_path / '.ledger' / 'ledger.db'}"
    _at_phase1(url, "m", "mlir-air", str(tmp_path))
    proc = cli(tmp_path, "advance", "m", "--until", "1")
    assert "phase 1 FAILED (attempt 1)" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    state = DeploymentUnit(open_ledger(url), "m").state
    rows = [ev.event for ev in state.failed_attempts[1][0].evidence if type(ev.event).__name__ == "KernelVerified"]
    kinds = {r.kernel: r.not_measured for r in rows if r.not_measured}
    assert kinds == {"flash_attention": "traceback"} and "silu_mul" not in {r.kernel for r in rows}
    fa_row = next(r for r in rows if r.kernel == "flash_attention")
    assert fa_row.provenance["returncode"] == 1 and "num_heads_per_unroll" in fa_row.note
    assert all(r.verdict == "PASS" for r in rows if r.kernel not in kinds)
    assert "failing kernel(s): flash_attention" in state.last_verdict
    assert "silu_mul" in state.last_verdict and "not run to a verdict, the rows after it not run" in state.last_verdict
    assert "gave no verdict on each of 3 tries" in state.last_verdict and state.inconclusive.get(1, 0) == 0
    triaged = [e for e in open_ledger(url).read_stream("deployment:m") if e.type == "FailureTriaged"][-1]
    assert "flash-attention-shape-assert" in [m["rule_id"] for m in triaged.payload["matches"]]
