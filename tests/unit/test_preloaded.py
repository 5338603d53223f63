"""The fork server the end-to-end tests run `ledger` through (tests/preloaded.py) gives each command a process of
its own: its own pid, working directory, environment, exit status and output, nothing left of the command before."""

import os
import subprocess

import pytest

from tests.preloaded import run_ledger


def _env(**extra):
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra}


def test_a_command_exits_as_it_would_in_a_fresh_interpreter_with_the_same_output(tmp_path):
    from tests.e2e.cli import ledger

    args = ("status", "nobody", "--json")
    forked, fresh = ledger(tmp_path / "ws", *args), ledger(tmp_path / "ws", *args, fresh=True)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.returncode != 0 and forked.stderr.startswith("error: ")


def test_each_command_gets_its_own_environment_and_nothing_of_the_one_before(tmp_path, tiny_llama):
    first, second = tmp_path / "first", tmp_path / "second"
    # the workspace comes from LEDGER_HOME, the command's own environment
    done = run_ledger(["init", str(tiny_llama), "--name", "tiny"], _env(LEDGER_HOME=str(first)), timeout=300)
    assert done.returncode == 0, done.stderr
    here = run_ledger(["status", "--json"], _env(LEDGER_HOME=str(first)), timeout=300)
    there = run_ledger(["status", "--json"], _env(LEDGER_HOME=str(second)), timeout=300)
    assert here.returncode == 0 and there.returncode == 0, here.stderr + there.stderr
    assert "tiny" in here.stdout and "tiny" not in there.stdout


def test_a_command_past_its_timeout_is_killed_and_the_next_one_runs(tmp_path, tiny_llama):
    env = _env(LEDGER_HOME=str(tmp_path / "ws"))
    assert run_ledger(["init", str(tiny_llama), "--name", "tiny"], env, timeout=300).returncode == 0
    with pytest.raises(subprocess.TimeoutExpired):
        run_ledger(["advance", "tiny"], env, timeout=0.5)  # Phase 0 alone loads the model: seconds
    after = run_ledger(["status", "tiny", "--json"], env, timeout=300)
    assert after.returncode == 0 and '"tiny"' in after.stdout
