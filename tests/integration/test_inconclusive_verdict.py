"""Issue 46 item 4: a gate whose device run times out is re-run in a fresh process up to DEVICE_RUN_TRIES (3, as
mlir-air's Gemma4 `score_layer`), and when every try timed out the attempt is recorded as inconclusive: a
PhaseInconclusive, distinct from PhaseFailed in the events, `ledger status` (and --json), `ledger history` and
triage; never a pass, never one of the gate's two failures; INCONCLUSIVE_IN_A_ROW in a row raise a blocker.

Timeouts are driven by the command: a make recipe that sleeps far past a small limit, killed with its process group;
the tests count tries (a line per try in a file, the try's own pid), never time anything."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from handlers.gates.table import GATES
from ledger import open_ledger
from npu_kernels.inconclusive import Inconclusive
from npu_kernels.mlir_air.executor import MlirAirExecutor
from npu_kernels.mlir_air.lock import DEVICE_RUN_TRIES, HarnessInconclusive, HarnessTimeout, run_retried
from statemachine.fold import fold
from statemachine.phases import Phase
from statemachine.state import INCONCLUSIVE_IN_A_ROW
from tests.e2e.cli import in_process

LIMIT_S = 3.0  # each try's limit; the hanging recipe sleeps 600 s, so only the kill ends it
# `make profile` in a model directory: one line per try (its pid), then it hangs while fewer than HANG tries came
# before it, and ends with a line otherwise
MAKEFILE = """profile:
\t@n=$$(cat tries.txt 2>/dev/null | wc -l); echo "try $$$$" >> tries.txt; \\
\tif [ $$n -lt $(HANG) ]; then sleep 600; fi; echo "ended on try $$((n+1))"
"""


def _model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "mlir-air" / "programming_examples" / "llms" / "m"
    d.mkdir(parents=True)
    (d / "Makefile").write_text(MAKEFILE)
    return d


def _executor(tmp_path: Path) -> MlirAirExecutor:
    return MlirAirExecutor(mlir_air_dir=str(tmp_path / "mlir-air"), lock_path=str(tmp_path / "npu.lock"),
                           timeout_s=LIMIT_S)


def _tries(d: Path) -> list[str]:
    return (d / "tries.txt").read_text().splitlines()


def test_a_run_that_times_out_every_time_is_retried_in_fresh_processes_then_inconclusive(tmp_path):
    d = _model_dir(tmp_path)
    with pytest.raises(HarnessInconclusive) as e:
        _executor(tmp_path).run_model_target("profile", d, make_vars={"HANG": 99})
    assert DEVICE_RUN_TRIES == 3 and e.value.tries == 3
    tries = _tries(d)
    assert len(tries) == 3 and len(set(tries)) == 3  # three tries, each its own process
    assert isinstance(e.value, Inconclusive) and isinstance(e.value, HarnessTimeout)  # old callers see a timeout
    assert "gave no verdict on each of 3 tries" in e.value.reason and "the last timed out after 3 s" in e.value.reason


def test_a_timeout_then_an_ended_run_is_its_result_with_the_inconclusive_tries_recorded(tmp_path):
    d = _model_dir(tmp_path)
    command, rc, text, prov = _executor(tmp_path).run_model_target("profile", d, make_vars={"HANG": 1})
    assert rc == 0 and "ended on try 2" in text
    assert prov["inconclusive_tries"] == 1 and len(_tries(d)) == 2
    # a run that ends on its first try records nothing about retries (evidence recorded before stays the same)
    (d / "tries.txt").unlink()
    _, rc, _, prov = _executor(tmp_path).run_model_target("profile", d, make_vars={"HANG": 0})
    assert rc == 0 and "inconclusive_tries" not in prov and len(_tries(d)) == 1


def test_a_run_that_says_inconclusive_as_mlir_airs_layer_gate_does_is_re_run_in_a_fresh_process(tmp_path):
    # validate_layer_npu.py's exit 2 "INCONCLUSIVE: ..." on the first try, a PASS on the second
    script = ('n=$(cat n.txt 2>/dev/null | wc -l); echo x >> n.txt; if [ "$n" -lt 1 ]; then '
              'echo "INCONCLUSIVE: layer 4 needed a retry"; exit 2; fi; echo "PASS: layer 4"')
    rc, text, retried = run_retried(script, LIMIT_S, cwd=str(tmp_path))
    assert (rc, retried) == (0, 1) and "PASS: layer 4" in text
    # a run whose own fresh-process retries gave up (the Makefile's score_layer) is not retried again here
    with pytest.raises(HarnessInconclusive) as e:
        run_retried("echo y >> m.txt; echo 'FAIL: still INCONCLUSIVE after 3 attempts; the NPU2 TDR did not clear'; "
                    "exit 1", LIMIT_S, cwd=str(tmp_path))
    assert e.value.tries == 3 and (tmp_path / "m.txt").read_text() == "y\n"
    # exit 2 without the INCONCLUSIVE line is an ordinary failure: its status, no retry
    rc, _, retried = run_retried("echo z >> k.txt; exit 2", LIMIT_S, cwd=str(tmp_path))
    assert (rc, retried) == (2, 0) and (tmp_path / "k.txt").read_text() == "z\n"


def test_a_run_that_fails_is_not_retried(tmp_path):
    rc, text, timed_out = run_retried("echo once >> n.txt; exit 1", LIMIT_S, cwd=str(tmp_path))
    assert (rc, timed_out) == (1, 0) and (tmp_path / "n.txt").read_text() == "once\n"


@pytest.fixture
def deployment(tmp_path, tiny_llama, monkeypatch):
    """`tiny` at Phase 0, whose gate runs the hanging `make profile` (HANG: how many tries hang) through the real
    executor: the test's stand-in for a gate's device run."""
    ws = tmp_path / "ws"
    proc = in_process(ws, "init", str(tiny_llama), "--name", "tiny")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    d = _model_dir(tmp_path)
    hang = {"n": 99}

    def device_gate(run):
        _executor(tmp_path).run_model_target("profile", d, make_vars={"HANG": hang["n"]})
        raise AssertionError("the device run was expected to time out on every try")

    monkeypatch.setitem(GATES, Phase.REFERENCE, device_gate)
    return ws, d, hang


def _stream(ws: Path):
    led = open_ledger(f"sqlite:///{ws / '.ledger' / 'ledger.db'}")
    return led.read_stream("deployment:tiny")


def test_an_inconclusive_attempt_is_recorded_apart_from_a_failure_and_twice_in_a_row_raises_a_blocker(deployment):
    ws, d, _ = deployment
    proc = in_process(ws, "advance", "tiny")
    assert proc.returncode == 1
    assert "phase 0 INCONCLUSIVE (attempt 1, 3 tries)" in proc.stderr and "FAILED" not in proc.stderr
    events = _stream(ws)
    types = [e.type for e in events]
    assert "PhaseFailed" not in types and types[-3:] == ["PhaseStarted", "PhaseInconclusive", "FailureTriaged"]
    inconclusive = events[-2]
    assert inconclusive.payload["tries"] == 3 and len(_tries(d)) == 3
    triage = events[-1].payload
    assert triage["subject_type"] == "PhaseInconclusive" and triage["subject_seq"] == inconclusive.seq
    assert triage["matches"][0]["rule_id"] == "device-run-inconclusive"
    state = fold(events)
    assert state.status.value == "phase0" and state.failures.get(Phase.REFERENCE, 0) == 0  # not a failure
    assert Phase.REFERENCE not in state.passed and state.attempt_number(0) == 2  # closed, not passed
    status = json.loads(in_process(ws, "status", "tiny", "--json").stdout)
    assert status["status"] == "phase0" and "INCONCLUSIVE" in status["last_verdict"]
    assert {k: status["inconclusive"][k] for k in ("phase", "attempt", "tries", "in_a_row", "limit")} == {
        "phase": 0, "attempt": 1, "tries": 3, "in_a_row": 1, "limit": INCONCLUSIVE_IN_A_ROW}
    assert "INCONCLUSIVE (seq" in in_process(ws, "status", "tiny").stdout
    history = in_process(ws, "history", "tiny").stdout
    assert "PHASE 0 INCONCLUSIVE (attempt 1, 3 tries" in history and f"triage of seq {inconclusive.seq} (inconclusive)" \
        in history
    pages = "".join(p.read_text() for p in (ws / "llms").rglob("*.md"))  # the model docs, rebuilt after advance
    assert "0: Build CPU Reference — ❔ inconclusive (attempt 1" in pages
    # the second in a row: a blocker for a human (six device runs without a verdict), still no failure counted
    (d / "tries.txt").unlink()
    proc = in_process(ws, "advance", "tiny")
    assert proc.returncode == 1 and "blocker raised" in proc.stderr
    state = fold(_stream(ws))
    assert state.status.value == "needs_human_review" and state.failures.get(Phase.REFERENCE, 0) == 0
    assert "inconclusive on 2 attempts in a row (the last after 3 device runs without a verdict)" in \
        state.blockers[-1].reason
    assert json.loads(in_process(ws, "status", "tiny", "--json").stdout)["inconclusive"]["in_a_row"] == 2


def test_a_phase_figure_that_ended_on_a_retry_records_its_inconclusive_tries_in_its_provenance(tmp_path, tiny_llama,
                                                                                              monkeypatch):
    """The mlir-air backend's `make profile` (Phases 4-6): a first try that hangs, a second that prints mlir-air's
    profile lines; the figure is the second try's and its provenance says one try gave no verdict."""
    from npu_kernels.backends.mlir_air import MlirAirBackend
    from npu_kernels.model.architecture import load_raw_config, resolve

    d = _model_dir(tmp_path)
    (d / "Makefile").write_text(MAKEFILE.replace('echo "ended on try $$((n+1))"',
                                                 'echo "Time to first token (TTFT): 0.5 s"; echo "Tokens/second: 20.0"'))
    table = tmp_path / "table.toml"
    table.write_text(f"[model]\nprofile = \"make -C {{model_dir}} profile HANG=1\"\ntimeout_s = {LIMIT_S}\n")
    monkeypatch.setenv("NPU_LEDGER_HARNESSES", str(table))
    monkeypatch.setenv("LEDGER_NPU_LOCK", str(tmp_path / "npu.lock"))
    backend = MlirAirBackend(tiny_llama, resolve(load_raw_config(tiny_llama)), "m", mlir_air_dir=str(tmp_path / "mlir-air"))
    m = backend.measure_prefill(None)
    assert m.median_s == pytest.approx(0.5) and len(_tries(d)) == 2
    assert m.detail["provenance"]["inconclusive_tries"] == 1


# --- Phase 1: a kernel harness run on the twin that times out (issue 46 item 4, the Phase 1 half) ----------------

HARNESS_LIMIT_S = 1.0  # each harness try's limit (the harness table's timeout_s); a hanging twin harness sleeps 3600 s


def _twin_env(root: Path, monkeypatch, faults: str) -> Path:
    """A twin whose harnesses named in `faults` hang (npu_kernels.mlir_air.twin.harness: `KIND: hang [N]`), and a
    harness table overlay giving every harness run HARNESS_LIMIT_S."""
    from npu_kernels.mlir_air.twin import write_twin

    twin = write_twin(root / "mlir-air")
    table = root / "timeouts.toml"
    table.write_text(f"[settings]\ntimeout_s = {HARNESS_LIMIT_S}\n")
    for name, value in (("MLIR_AIR_DIR", twin), ("LEDGER_NPU_LOCK", root / "npu.lock"),
                        ("NPU_LEDGER_HARNESSES", table), ("NPU_LEDGER_TWIN_FAULTS", faults)):
        monkeypatch.setenv(name, str(value))
    return twin


def test_a_phase_1_harness_that_times_out_on_every_try_makes_the_attempt_inconclusive_not_a_failure(
        tmp_path, tiny_llama, monkeypatch):
    """Every twin harness hangs; each try is killed at the table's timeout_s (on a loaded machine before the harness
    reaches its sleep, maybe: a run past its limit either way). The tries are counted from the executor's warning
    lines on stderr (lock.run_retried), one per fresh process; nothing is timed."""
    from npu_kernels.mlir_air.twin.harness import KINDS

    _twin_env(tmp_path, monkeypatch, ",".join(f"{k}: hang" for k in KINDS))
    ws = tmp_path / "ws"
    for args in (("init", str(tiny_llama), "--name", "tiny", "--executor", "mlir-air"), ("advance", "tiny", "--until", "0")):
        proc = in_process(ws, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = in_process(ws, "advance", "tiny", "--until", "1")
    assert proc.returncode == 1
    assert "phase 1 INCONCLUSIVE (attempt 1, 3 tries)" in proc.stderr and "FAILED" not in proc.stderr
    # the executor's warning per try killed at its limit (lock.run_retried), each the same twin harness command
    timed_out = re.findall(r"device run timed out\s+attempt=(\d) command='(make -C \S+) [^']*' timeout_s=(\S+)",
                           proc.stderr)
    assert [a for a, _, _ in timed_out] == ["1", "2", "3"] and {t for _, _, t in timed_out} == {f"{HARNESS_LIMIT_S}"}
    assert len({c for _, c, _ in timed_out}) == 1 and "programming_examples/matrix_multiplication" in timed_out[0][1]
    events = _stream(ws)
    types = [e.type for e in events]
    assert types[-3:] == ["PhaseStarted", "PhaseInconclusive", "FailureTriaged"]
    assert "PhaseFailed" not in types and "KernelVerified" not in types  # no row, no failure
    reason = events[-2].payload["reasons"][0]
    assert reason.startswith("inconclusive: Phase 1 row 1/") and "gave no verdict on each of 3 tries" in reason
    assert f"timed out after {HARNESS_LIMIT_S:g} s" in reason and events[-2].payload["tries"] == 3
    assert events[-1].payload["matches"][0]["rule_id"] == "device-run-inconclusive"
    state = fold(events)
    assert state.status.value == "phase1" and state.failures.get(Phase.KERNELS, 0) == 0
    status = json.loads(in_process(ws, "status", "tiny", "--json").stdout)
    assert (status["inconclusive"]["phase"], status["inconclusive"]["tries"]) == (1, 3)
    # the runner the evaluator's re-measurement and `reverify` make (no inconclusive_up): the same hang is a FAIL
    # row saying it timed out on every try (evidence of that re-measurement, as before), never an exception
    from npu_kernels.backends.kernel_runners import make_runner
    from npu_kernels.numerics.catalog import CATALOG
    from npu_kernels.numerics.row import KernelRow

    row = KernelRow("eltwise_add", dict(CATALOG["eltwise_add"].small_shape))
    fields = make_runner("mlir-air").verify(row, attempt=1, when="2026-12-04T00:00:00Z", host="h").fields
    assert fields["verdict"] == "FAIL" and fields["not_measured"] == "timeout"


def test_a_harness_run_killed_at_its_timeout_then_ended_is_its_result_with_the_try_recorded(tmp_path, monkeypatch):
    """A stand-in harness (the harness table's command for eltwise_add) that sleeps past the table's timeout_s on its
    first try and prints the twin's transcript of the same row on the next: the row's run is the second try's, and
    its provenance says one try gave no verdict. A first try that ends records nothing about retries."""
    from npu_kernels.mlir_air.twin.harness import main as twin_harness
    from npu_kernels.numerics.catalog import CATALOG

    n = CATALOG["eltwise_add"].small_shape["N"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # the twin's harness in this process: its transcript of the row
        assert twin_harness(["eltwise_add", "--shape", str(n), "--tile", "2048", "--perf-iters", "20"]) == 0
    (tmp_path / "transcript.txt").write_text(printed.getvalue())
    (tmp_path / "harness.sh").write_text(
        'n=$(cat tries.txt 2>/dev/null | wc -l); echo "try $$" >> tries.txt\n'
        f'if [ "$n" -lt "$HANG" ]; then sleep 600; fi; cat transcript.txt\n')
    table = tmp_path / "table.toml"
    table.write_text(f'[settings]\ntimeout_s = {HARNESS_LIMIT_S}\n[harness.eltwise_add]\ncommand = "sh harness.sh"\n'
                     f'cwd = "{tmp_path}"\n')
    ex = MlirAirExecutor(harness_table=table, mlir_air_dir=str(tmp_path), lock_path=str(tmp_path / "npu.lock"))
    monkeypatch.setenv("HANG", "1")
    run = ex.run_harness("eltwise_add", {"N": n})
    assert run.result.verdict == "PASS" and run.returncode == 0 and run.transcript == printed.getvalue()
    assert run.provenance["inconclusive_tries"] == 1
    tries = (tmp_path / "tries.txt").read_text().splitlines()
    assert len(tries) == 2 and len(set(tries)) == 2  # two processes
    monkeypatch.setenv("HANG", "0")
    (tmp_path / "tries.txt").unlink()
    run = ex.run_harness("eltwise_add", {"N": n})
    assert run.result.verdict == "PASS" and "inconclusive_tries" not in run.provenance
    assert len((tmp_path / "tries.txt").read_text().splitlines()) == 1


def test_an_inconclusive_phase_1_row_is_triaged_on_its_own_evidence_too(deployment, monkeypatch):
    """A Phase 1 row's harness that never ended carries the row (kernel, shape, tile, runtime_hang) to the triage of
    the inconclusive attempt: a seq-first flash attention at head_dim 128 / lkp 64 is the known dk_chunks hang, ranked
    above the generic no-verdict rule (the gate is the test's stand-in for gate 1 raising on its FA row)."""
    ws, _, _ = deployment
    row = {"kind": "kernel", "kernel": "flash_attention", "shape": {"lq": 512, "lk": 512, "dk": 128, "dv": 128,
           "heads_q": 2, "heads_kv": 2}, "tile": {"lkp": 64, "layout": "seq-first"}, "runtime_hang": True,
           "transcript": "attn_npu2: launching\n"}

    def hung_row(run):
        raise Inconclusive("Phase 1 row 4/17 flash_attention: `make run` gave no verdict on each of 3 tries, every one "
                           "in a fresh process (the last timed out after 1 s)", 3, row)

    monkeypatch.setitem(GATES, Phase.REFERENCE, hung_row)
    assert in_process(ws, "advance", "tiny").returncode == 1
    events = _stream(ws)
    assert [e.type for e in events][-2:] == ["PhaseInconclusive", "FailureTriaged"]
    assert [m["rule_id"] for m in events[-1].payload["matches"]] == ["fa-seqfirst-dk-chunks-hang",
                                                                    "device-run-inconclusive"]
