"""The suite's stand-in launcher (tests/stand_in_server.py) behaves as `python` does for the stand-in's programs:
argv, sys.path, working directory, environment, streams, exit status and signal, and a killed launcher takes its
program with it (a harness timeout kills make's process group, which holds the launcher, not the forked child)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.stand_in_server import ENV


def _run(*args: str, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run([os.environ[ENV], *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


def test_a_script_sees_its_argv_path_directory_environment_and_stdin_and_exits_with_its_status(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import os, sys\nprint(sys.argv, sys.path[0] == os.path.dirname(__file__), os.getcwd(),\n"
                      "      os.environ['PROBE'], sys.stdin.read())\nsys.exit(3)\n")
    proc = subprocess.run([os.environ[ENV], str(script), "a", "b c"], cwd=tmp_path, capture_output=True, text=True,
                          input="fed", env={**os.environ, "PROBE": "here"}, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == f"{[str(script), 'a', 'b c']} True {tmp_path} here fed\n"


def test_a_module_runs_as_main_afresh_with_the_working_directory_first_on_its_path(tmp_path):
    (tmp_path / "mod_here.py").write_text("import sys\nprint(__name__, sys.argv[1:], sys.path[0])\n")
    proc = _run("-m", "mod_here", "x", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, f"__main__ ['x'] {tmp_path}\n"), proc.stderr
    # a preloaded module still runs its __main__ block (it is executed afresh, not taken from the server's imports)
    proc = _run("-m", "npu_kernels.mlir_air.twin.harness", "no-such-kind", cwd=tmp_path)
    assert proc.returncode != 0 and "unknown harness kind 'no-such-kind'" in proc.stderr


def test_an_uncaught_exception_and_a_message_exit_as_a_fresh_interpreter_would(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("raise ValueError('boom')\n")
    proc = _run(str(script), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("Traceback") and "ValueError: boom" in proc.stderr
    script.write_text("raise SystemExit('one line')\n")
    proc = _run(str(script), cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (1, "one line\n")
    script.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert _run(str(script), cwd=tmp_path).returncode == -signal.SIGTERM


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")  # killed and not yet reaped counts as gone


def test_a_killed_launcher_takes_its_program_and_what_that_started_with_it(tmp_path):
    pid_file = tmp_path / "pid"
    beat = tmp_path / "beat.py"  # writes its pid (whole, by a rename), then waits to be killed
    beat.write_text(f"import os, time\nopen({str(pid_file)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
                    f"os.rename({str(pid_file)!r} + '.tmp', {str(pid_file)!r})\nwhile True:\n    time.sleep(0.05)\n")
    script = tmp_path / "hang.py"
    script.write_text(f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(beat)!r}])\n"
                      "while True:\n    time.sleep(0.05)\n")
    launcher = subprocess.Popen([os.environ[ENV], str(script)], cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 120  # only a guard against a hang: nothing is judged by how long it took
    while not pid_file.exists():
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    assert _alive(grandchild)
    os.killpg(launcher.pid, signal.SIGKILL)  # what npu_kernels.mlir_air.lock.run_command does at a timeout
    launcher.wait()
    while _alive(grandchild):  # the server kills the program's session once it sees the launcher's socket close
        assert time.monotonic() < deadline, "the stand-in's grandchild outlived its killed launcher"
        time.sleep(0.05)


def test_a_program_given_a_lifeline_dies_with_the_process_that_started_its_launcher(tmp_path):
    """handlers.lifeline's promise through the launcher: the program sees its parent (the server) in the lifeline
    variable, arms it and runs; when the process that started the launcher dies, the launcher dies with it and the
    server kills the program."""
    pid_file = tmp_path / "pid"
    prog = tmp_path / "evaluator.py"  # what the evaluator does first (handlers.cli's evaluate: die_with_parent)
    prog.write_text("import os, time\nfrom handlers.lifeline import die_with_parent\ndie_with_parent()\n"
                    f"open({str(pid_file)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
                    f"os.rename({str(pid_file)!r} + '.tmp', {str(pid_file)!r})\nwhile True:\n    time.sleep(0.05)\n")
    starter = tmp_path / "starter.py"  # handlers.gates.evaluation's side: child_env names this process
    starter.write_text("import os, subprocess, sys, time\nfrom handlers.lifeline import child_env\n"
                       f"subprocess.Popen([os.environ[{ENV!r}], {str(prog)!r}], env=child_env())\n"
                       "while True:\n    time.sleep(0.05)\n")
    root = str(Path(__file__).resolve().parents[2])
    parent = subprocess.Popen([sys.executable, str(starter)], env={**os.environ, "PYTHONPATH": root})
    deadline = time.monotonic() + 120  # only a guard against a hang
    while not pid_file.exists():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    program = int(pid_file.read_text())
    assert _alive(program)  # its lifeline accepted the server as its parent
    parent.kill()
    parent.wait()
    while _alive(program):
        assert time.monotonic() < deadline, "the program outlived the process that started its launcher"
        time.sleep(0.05)


def test_a_program_with_a_lifeline_starts_stand_in_programs_of_its_own(tmp_path):
    """The evaluator runs the twin's make targets, whose launchers inherit its lifeline variable: a variable naming
    another process than a launcher's parent is not that launcher's lifeline (at 7040be5+1 they exited 1)."""
    (tmp_path / "inner.py").write_text("print('inner ran')\n")
    outer = tmp_path / "outer.py"
    outer.write_text("import os, subprocess, sys\nfrom handlers.lifeline import die_with_parent\ndie_with_parent()\n"
                     f"p = subprocess.run(['sh', '-c', os.environ[{ENV!r}] + ' ' + {str(tmp_path / 'inner.py')!r}],\n"
                     "                   capture_output=True, text=True)\nprint(p.returncode, p.stdout.strip())\n")
    starter = tmp_path / "starter.py"
    starter.write_text("import os, subprocess, sys\nfrom handlers.lifeline import child_env\n"
                       f"p = subprocess.run([os.environ[{ENV!r}], {str(outer)!r}], env=child_env(), capture_output=True,"
                       " text=True)\nprint(p.returncode, p.stdout.strip(), p.stderr.strip())\n")
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, str(starter)], env={**os.environ, "PYTHONPATH": root}, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout == "0 0 inner ran \n", proc.stdout + proc.stderr


def test_a_forked_program_writes_its_profile_where_the_variable_names_a_folder(tmp_path):
    """tests/preloaded.py `run_and_exit` under PROFILE_ENV: the child's cProfile stats and argv, and its exit status
    unchanged."""
    import pstats

    from tests.preloaded import PROFILE_ENV, run_and_exit

    pid = os.fork()
    if pid == 0:  # the child: as a fork server's child would run a program
        os.environ[PROFILE_ENV] = str(tmp_path)
        sys.argv = ["prog.py", "x"]
        run_and_exit(lambda: sys.exit(sum(i * i for i in range(20000)) % 7))
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == sum(i * i for i in range(20000)) % 7
    assert (tmp_path / f"{pid}.argv").read_text() == "prog.py x"
    stats = pstats.Stats(str(tmp_path / f"{pid}.prof"))
    assert any(name == "<genexpr>" for _, _, name in stats.stats)
