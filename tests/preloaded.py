"""Run a `ledger` command in a process of its own, forked from an interpreter that has already imported the tool.

A `ledger` command in a fresh interpreter spends 5-8 s of CPU importing torch, transformers and the product before
it reads its first argument (`python -X importtime -m handlers.cli`, 2026-12-03), and the suite runs several
hundred of them. `run_ledger` asks a fork server instead: one interpreter per test process (`serve`, started on
the first command) that imports `PRELOAD` once and then, single-threaded, forks one child per command. The child
is a process of its own, as a person's `ledger` is: its own pid, environment, working directory, stdout and stderr
(files the test reads back), exit status, and whatever processes it starts (the evaluator's fresh process, the
twin's make targets). It runs what `python -m handlers.cli` runs, `handlers.cli.main.cli`, with the same arguments.

What differs from a fresh interpreter, and why no test here depends on it:
- modules were imported under the server's environment (the test process's), not the command's. The tool reads its
  environment at call time (`npu_kernels.settings`, nothing at import); libraries that read it at import (Hugging
  Face's offline switches, the BLAS/OpenMP thread counts) get the suite's values, set by tests/conftest.py before
  any import, which are the values every command of the suite is given;
- nothing of one command reaches the next: every child is forked from the server, which only imported.

A test that must see a fresh interpreter (a crash, a signal, a lifeline, a resource limit, a read-only mount)
starts a real one (`tests.e2e.cli.spawn`, `ledger(..., fresh=True)`, or `subprocess` itself).
"""

from __future__ import annotations

import gc
import json
import locale
import os
import select
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from pathlib import Path

# transformers imports lazily: `import transformers` leaves out what loading a model needs (modeling_utils alone pulls
# in torch.distributed.tensor, torch._dynamo and sympy: ~1.5 s of CPU in each forked program that loads the tiny
# reference, 2026-12-07), so the servers import it once, with the modeling module of each family the suite builds
TRANSFORMERS_LAZY = ("transformers.modeling_utils", "transformers.generation.utils",
                     "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto",
                     *(f"transformers.models.{family}.modeling_{family}"
                       for family in ("llama", "qwen2", "qwen3", "phi3", "gemma3", "lfm2")))
PRELOAD = ("torch", "transformers", *TRANSFORMERS_LAZY, "handlers.cli.main", "npu_kernels.model.hf_reference")
ROOT = Path(__file__).resolve().parent.parent
CLI_MAIN = ROOT / "handlers" / "cli" / "__main__.py"


# --- the server (its own interpreter) ------------------------------------------------------------------------------


def preload(names) -> list:
    """Import `names` and build what transformers builds on its first model load in a process, so that every child
    forked afterwards inherits it; returns the warnings that raised (the interpreter's own filters: what a fresh
    interpreter would print). The first `from_pretrained` of a process compiles the regexes of every model type's
    checkpoint renamings (transformers.conversion_mapping, kept in a module global): 0.67 s of CPU, 2026-12-07, paid
    by each forked program and evaluator that loaded the tiny reference."""
    import importlib

    with warnings.catch_warnings(record=True) as caught:
        for name in names:
            importlib.import_module(name)
        if "transformers" in names:
            from transformers import conversion_mapping

            warm = getattr(conversion_mapping, "get_checkpoint_conversion_mapping", None)
            if warm is not None:  # (a later transformers may keep it elsewhere: then only speed is lost)
                warm("llama")
    # what is imported now is never collected: moved out of the collector's generations, so that a child's collection
    # (a forked program's `gc.collect()`, or an automatic one) neither walks these objects nor writes to their pages,
    # which the fork shares (Python's gc.freeze documentation: call it before fork())
    gc.freeze()
    return caught


def serve() -> None:
    """Import PRELOAD (refusing to serve if that warned: each command's stderr would lack what a fresh interpreter
    prints), say `ready`, then read one request per line on stdin, fork a child for each and write
    `{"id", "pid"}` when it starts and `{"id", "code"}` when it ends. Exits when stdin closes."""
    if sys.path and sys.path[0] in ("", "."):
        sys.path[0] = str(ROOT)  # `-c` put the working directory there, and each child changes it
    caught = preload(PRELOAD)
    out = sys.stdout
    if caught:  # a fresh interpreter would print these on every command's stderr: the server must not hide them
        out.write("warned: " + "; ".join(f"{w.category.__name__}: {w.message}" for w in caught)[:2000] + "\n")
        out.flush()
        return
    out.write("ready\n")
    out.flush()
    running: dict[int, int] = {}  # pid -> request id
    pending = b""
    stdin = sys.stdin.fileno()
    while True:
        readable, _, _ = select.select([stdin], [], [], 0.02 if running else None)
        if readable:
            chunk = os.read(stdin, 1 << 16)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(request)  # never returns
                running[pid] = request["id"]
                out.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
                out.flush()
        for pid in list(running):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                out.write(json.dumps({"id": running.pop(pid), "code": os.waitstatus_to_exitcode(status)}) + "\n")
                out.flush()


def _child(request: dict) -> None:
    """In the forked child: become the command's process (working directory, environment, stdin from /dev/null,
    stdout and stderr to the test's files), run the CLI, exit with its status. Never returns."""

    def run() -> None:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request["out"]), (2, request["err"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        fresh_streams()
        sys.argv = [str(CLI_MAIN), *request["args"]]
        from handlers.cli.main import cli

        cli.main(args=request["args"], prog_name="ledger")

    run_and_exit(run)


def fresh_streams() -> None:
    """sys.stdin, stdout and stderr on descriptors 0-2 as a fresh interpreter writing to a pipe or file opens them:
    stdout block-buffered, stderr line-buffered with escapes."""
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", errors="strict", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)


# `PROFILE_ENV=DIR make test`: every program the fork servers run (each `ledger` command, the twin's and a stand-in
# model directory's programs, the evaluator) writes DIR/<pid>.prof (cProfile, on process time) and DIR/<pid>.argv,
# the servers having inherited the variable from the test run. How the forked programs' costs were found, 2026-12-07
# (`pstats.Stats(*files)` adds them up; group them by their argv).
PROFILE_ENV = "NPU_LEDGER_TEST_PROFILE"


def run_and_exit(run) -> None:
    """In a forked child: `run()`, then exit (os._exit, the streams flushed) with the status a fresh interpreter
    would: 0, a SystemExit's code (its message on stderr and 1 when it is not a number), 1 and the traceback on
    stderr for an uncaught exception. Never returns. Profiled where PROFILE_ENV names a folder."""
    code = 1
    profile_dir = os.environ.get(PROFILE_ENV)
    profiler = None
    if profile_dir:
        import cProfile
        import time

        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
    try:
        run()
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to a fresh interpreter
        traceback.print_exc()
    finally:
        if profiler is not None:
            profiler.disable()
            try:
                profiler.dump_stats(os.path.join(profile_dir, f"{os.getpid()}.prof"))
                Path(profile_dir, f"{os.getpid()}.argv").write_text(" ".join(sys.argv))
            except OSError:
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


# --- the test process's side ---------------------------------------------------------------------------------------


class _Server:
    """This test process's fork server: one reader thread hands each reply to the command waiting for it."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", "from tests.preloaded import serve; serve()"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
        ready = self.process.stdout.readline()
        if ready != b"ready\n":
            raise RuntimeError(f"the ledger fork server did not start (it said {ready!r})")
        self.lock = threading.Lock()
        self.next_id = 0
        self.replies: dict[int, dict] = {}
        self.arrived = threading.Condition()
        threading.Thread(target=self._read, name="ledger-fork-server", daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            reply = json.loads(line)
            with self.arrived:
                self.replies.setdefault(reply["id"], {}).update(reply)
                self.arrived.notify_all()
        with self.arrived:
            self.replies[-1] = {"gone": True}
            self.arrived.notify_all()

    def _wait(self, request_id: int, key: str, timeout: float | None) -> dict | None:
        with self.arrived:
            ok = self.arrived.wait_for(lambda: key in self.replies.get(request_id, {}) or -1 in self.replies,
                                       timeout)
            if -1 in self.replies and key not in self.replies.get(request_id, {}):
                raise RuntimeError("the ledger fork server exited")
            return self.replies[request_id] if ok else None

    def run(self, request: dict, timeout: float) -> int | None:
        """The child's exit status, or None if it ran past `timeout` (it is killed then)."""
        with self.lock:
            self.next_id += 1
            request = {**request, "id": self.next_id}
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
        pid = self._wait(request["id"], "pid", None)["pid"]
        reply = self._wait(request["id"], "code", timeout)
        if reply is None:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            self._wait(request["id"], "code", None)
        with self.arrived:
            done = self.replies.pop(request["id"])
        return None if reply is None else done["code"]


_servers: dict[int, _Server] = {}
_start = threading.Lock()


def _server() -> _Server:
    """This process's server (a forked test process, if any, starts its own)."""
    with _start:
        server = _servers.get(os.getpid())
        if server is None or server.process.poll() is not None:
            server = _servers[os.getpid()] = _Server()
        return server


def run_ledger(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`python -m handlers.cli *args` with `env` in the current directory, in a child of the fork server: the
    result has the shape `subprocess.run(..., capture_output=True, text=True)` returns; past `timeout` the child
    is killed and `subprocess.TimeoutExpired` raised, as subprocess.run does."""
    with tempfile.TemporaryDirectory(prefix="ledger-out-") as folder:
        out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
        request = {"args": list(args), "cwd": os.getcwd(), "env": dict(env), "out": out, "err": err}
        code = _server().run(request, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(["ledger", *args], timeout, _read(out), _read(err))
        return subprocess.CompletedProcess(["ledger", *args], code, _read(out), _read(err))


def _read(path: str) -> str:
    """The file as `subprocess.run(..., text=True)` gives a pipe's bytes: the locale's encoding, strict, universal
    newlines (so a test sees exactly what it saw of a fresh interpreter's output)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return ""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")
