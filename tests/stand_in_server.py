"""Run the stand-in's programs (the twin's harness, verify, walk and bench scripts, a stand-in model directory's
make targets) and the independent evaluator's fresh process in processes forked from an interpreter that has
already imported what they import.

Each such program is a fresh `python` started by make, and spent about 0.4 s of its 1 s importing numpy, the
tokenizer and npu-ledger's twin modules (`python -X importtime -m npu_kernels.mlir_air.twin.verify_runner`,
2026-12-07); a twin deployment starts about 85 of them. The suite points `NPU_LEDGER_STAND_IN_PYTHON`
(npu_kernels.settings.stand_in_python) at `launcher`, a small script written for the run: it sends its argv,
working directory, environment and its standard streams (the descriptors themselves, SCM_RIGHTS) to this
worker's server over a unix socket, and exits with the status the server reports for the forked child. The child
is a process of its own: its own pid and session, the launcher's streams, directory and environment, `sys.argv`
and `sys.path` as `python [-m MODULE | SCRIPT] ARGS` would have them, and the exit status or signal of a fresh
interpreter. A launcher that is killed (a harness timeout kills make's process group) closes its socket; the
server then kills the child's session, so a hung stand-in dies as it did.

The evaluator (handlers.gates.evaluation, `NPU_LEDGER_EVALUATOR_PYTHON`) costs 5-9 s of CPU per run, about 4 of them
importing torch, transformers and the tool, and the suite starts about 55. Its lifeline (handlers.lifeline: it must
die with the process that started it) is kept: the launcher, the real child of that process, arms the same
PR_SET_PDEATHSIG, and the forked evaluator is told that its parent is the server (whose kill of it follows the
launcher's death). A program whose import-time environment (IMPORT_TIME: thread counts, offline switches) differs
from the server's is run in a fresh interpreter instead (exec from the forked child).

What differs from a fresh interpreter, and why no test depends on it: modules were imported under the server's
environment (the suite's), not the program's. The stand-in reads its environment at call time
(npu_kernels.settings); the libraries that read theirs at import (Hugging Face's offline switches, the BLAS thread
counts) get the suite's values, which are the values every program of the suite is given. The module a program
runs with `-m` is executed afresh (it is dropped from the server's imports before the run, as `python -m` would
run it), so its own top-level code and `__main__` block run as they would.
"""

from __future__ import annotations

import array
import json
import os
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.preloaded import TRANSFORMERS_LAZY, fresh_streams, preload, run_and_exit

ROOT = Path(__file__).resolve().parent.parent
ENV = "NPU_LEDGER_STAND_IN_PYTHON"
EVALUATOR_ENV = "NPU_LEDGER_EVALUATOR_PYTHON"
SOCKET_ENV = "NPU_LEDGER_STAND_IN_SOCKET"
LIFELINE_ENV = "NPU_LEDGER_PARENT_PID"  # handlers.lifeline: the evaluator dies with the process that started it
# what libraries read from the environment when they are imported (the BLAS/OpenMP thread counts, Hugging Face's
# offline switches): a program given other values than the server's runs in a fresh interpreter instead
IMPORT_TIME = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
PRELOAD = ("numpy", "tokenizers", "torch", "transformers", *TRANSFORMERS_LAZY, "handlers.cli.main",
           "npu_kernels.model.hf_reference",
           "npu_kernels.mlir_air.twin", "npu_kernels.mlir_air.twin.stand_in",
           "npu_kernels.mlir_air.twin.harness", "npu_kernels.mlir_air.twin.verify_runner",
           "npu_kernels.mlir_air.twin.decode_gate", "npu_kernels.mlir_air.walk", "npu_kernels.backends.in_process",
           "npu_kernels.model.compare", "npu_kernels.model.prompts")

# what the launcher runs: stdlib only, no site (it is started for every program, so it must start fast)
LAUNCHER = '''import array, json, os, signal, socket, struct, sys
parent = os.environ.get({lifeline_env!r}, "")
if parent.isdigit() and os.getppid() == int(parent):  # a caller that asked its child to die with it
    import ctypes  # (handlers.lifeline): this launcher does, and the server kills the program when its socket closes;
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG   (a variable inherited from further up
    if os.getppid() != int(parent):  # names another process: not this launcher's lifeline)
        os._exit(1)  # the parent died while this was being armed
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ[{socket_env!r}])
body = json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ), "ppid": os.getppid()}}).encode()
s.sendmsg([struct.pack("!I", len(body)) + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
reply = b""
while True:
    chunk = s.recv(64)
    if not chunk:
        break
    reply += chunk
if not reply:
    sys.stderr.write("the stand-in server went away\\n")
    os._exit(70)
code = int(reply)
if code < 0:  # the child died of a signal: so does its launcher, as a fresh interpreter's caller would see it
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code)
'''


# --- the server (its own interpreter) ------------------------------------------------------------------------------


def serve(path: str) -> None:
    """Import PRELOAD, listen on `path`, say `ready`; for each connection fork a child running the request, and
    write its exit status (negative: the signal) back when it ends. Exits when stdin closes."""
    caught = preload(PRELOAD)
    if caught:  # a fresh interpreter would print these on every program's stderr: the server must not hide them
        print("warned: " + "; ".join(str(w.message) for w in caught)[:2000], flush=True)
        return
    base_path = [p for p in sys.path[1:] if p not in _pythonpath(os.environ)]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    children: dict[int, socket.socket] = {}  # pid -> its launcher's connection
    stdin = sys.stdin.fileno()
    while True:
        conns = list(children.values())
        readable, _, _ = select.select([stdin, listener, *conns], [], [], 0.02 if children else None)
        if stdin in readable and not os.read(stdin, 1 << 12):
            break
        if listener in readable:
            conn, _ = listener.accept()
            request, fds = _receive(conn)
            if request is None:
                conn.close()
            else:
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    for other in (conn, *children.values()):  # a launcher reads until its socket closes:
                        other.close()  # only the server may hold the other end
                    _child(request, fds, base_path)  # never returns
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
        for pid, conn in list(children.items()):
            if conn in readable:  # the launcher went away (killed at a timeout): its child goes too
                _kill(pid)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                try:
                    conn.sendall(str(code).encode())
                except OSError:
                    pass
                conn.close()
                del children[pid]
    for pid in children:
        _kill(pid)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the child leads its own session: whatever it started goes with it
    except (ProcessLookupError, PermissionError):
        pass


def _receive(conn: socket.socket) -> tuple[dict | None, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if len(data) < 4:
        return None, list(fds)
    size = struct.unpack("!I", data[:4])[0]
    body = data[4:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            return None, list(fds)
        body += chunk
    return json.loads(body), list(fds)


def _pythonpath(env: dict) -> list[str]:
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def _child(request: dict, fds: list[int], base_path: list[str]) -> None:
    """In the forked child: become `python ARGV` (session, streams, directory, environment, argv, path), run it,
    exit with its status as a fresh interpreter would (tests.preloaded.run_and_exit). Never returns."""
    run_and_exit(lambda: _become(request, fds, base_path))


def _become(request: dict, fds: list[int], base_path: list[str]) -> None:
    os.setsid()
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    env = dict(request["env"])
    if env.get(LIFELINE_ENV) == str(request.get("ppid")):  # its launcher dies with that parent (and the server
        env[LIFELINE_ENV] = str(os.getppid())  # kills this program then); this program's parent is the server
    if any(env.get(k) != os.environ.get(k) for k in IMPORT_TIME):
        os.execve(sys.executable, [sys.executable, *request["argv"]], env)  # what the libraries read at import
    os.environ.clear()
    os.environ.update(env)
    fresh_streams()
    argv = list(request["argv"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if argv[:1] == ["-m"] and len(argv) > 1:
        module, args = argv[1], argv[2:]
        sys.path[:] = [os.getcwd(), *_pythonpath(os.environ), *base_path]
        sys.modules.pop(module, None)  # run afresh as __main__, as `python -m` does
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    elif argv and not argv[0].startswith("-"):
        script = argv[0]
        sys.path[:] = [os.path.dirname(os.path.abspath(script)), *_pythonpath(os.environ), *base_path]
        sys.argv = argv
        runpy.run_path(script, run_name="__main__")
    else:
        raise SystemExit(f"the stand-in launcher runs `-m MODULE ARGS` or `SCRIPT ARGS`, not {argv[:1]}")


# --- the test process's side ---------------------------------------------------------------------------------------


class Server:
    """This test process's stand-in server and the launcher pointing at it (`env`: what to put in the
    environment)."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="si-")  # short: a unix socket's path has at most 107 bytes
        self.socket = os.path.join(self.folder, "s")
        self.launcher = os.path.join(self.folder, "python")
        launcher = LAUNCHER.format(socket_env=SOCKET_ENV, lifeline_env=LIFELINE_ENV)
        Path(self.launcher).write_text(f"#!{sys.executable} -SE\n" + launcher)
        os.chmod(self.launcher, 0o755)
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"from tests.stand_in_server import serve; serve({self.socket!r})"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
        ready = self.process.stdout.readline()
        if ready != b"ready\n":
            raise RuntimeError(f"the stand-in server did not start (it said {ready!r})")

    @property
    def env(self) -> dict[str, str]:
        return {ENV: self.launcher, EVALUATOR_ENV: self.launcher, SOCKET_ENV: self.socket}

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        for name in ("s", "python"):
            try:
                os.unlink(os.path.join(self.folder, name))
            except FileNotFoundError:
                pass
        os.rmdir(self.folder)
