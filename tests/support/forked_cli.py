"""``objcli ARGS`` in a process of its own, forked from a process that has already imported objcli.

The suite starts about 500 objcli processes; each spent 0.3 s of CPU importing NumPy, PyArrow, Click
and objcli before doing its work, a third of the suite's CPU. Here one server per test process
imports them once and forks a child for each command: the child is a process of its own as before
(its own pid, environment, folder, standard streams and exit status; atexit handlers and non-daemon
threads finished as an interpreter's exit finishes them), only its imports are already done.

The server is single-threaded apart from what its imports start (OpenBLAS's threads, which fork
safely), so forking it is safe where forking the test process (execnet's threads, a Dask cluster's)
would not be. A command whose environment changes what Python imports (``PYTHONPATH``, other
``PYTHON*`` variables) runs as a fresh interpreter instead, as does anything but ``cwd``, ``input``
and ``env``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# What a transform, verify, merge or reshard imports on its way (they are imported again, for
# nothing, in a fresh interpreter): the server imports them before its first fork.
PRELOADED = (
    "numpy",
    "pyarrow",
    "pyarrow.ipc",
    "pyarrow.parquet",
    "msgspec",
    "sentencepiece",
    "objcli.cli",
    "objcli.transform",
    "objcli.objectives",
    "objcli.formats",
    "objcli.commands.verify",
    "s3fs",  # an output or input in a bucket (0.4 s of imports: aiobotocore, botocore)
    "awkward",  # gigatoken's output type, imported by its first encode
)


def _serve() -> None:
    """The server: one JSON request a line on standard input, (pid, then status) lines back."""
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional one (sentencepiece in a core-only venv): imported on use
            pass
    control = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)  # never returns
        control.write(json.dumps({"pid": pid}) + "\n")
        control.flush()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        control.write(json.dumps({"returncode": code}) + "\n")
        control.flush()


def _child(request: dict) -> None:
    """The command, run as ``python -m objcli`` runs it, then the interpreter's exit steps."""
    import atexit
    import io
    import runpy
    import traceback

    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, (path, mode) in enumerate(request["streams"]):
            opened = os.open(path, mode)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        sys.argv = [request["main"], *request["args"]]
        code = 0
        runpy.run_module("objcli", run_name="__main__", alter_sys=True)
    except SystemExit as done:
        code = _exit_code(done.code)
    except BaseException:  # as the interpreter does: the traceback, status 1
        traceback.print_exc()
        code = 1
    finally:
        try:
            threading._shutdown()  # non-daemon threads joined, as at an interpreter's exit
            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        except BaseException:
            code = code or 1
        os._exit(code)


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


class _Server:
    def __init__(self):
        self.lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self.env_at_start: dict | None = None

    def start(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            support = str(Path(__file__).resolve().parent)
            self.env_at_start = dict(os.environ)
            serve = f"import sys; sys.path.insert(0, {support!r}); import forked_cli; forked_cli._serve()"
            self.process = subprocess.Popen(
                [sys.executable, "-c", serve],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
        return self.process

    def run(self, args: list[str], env: dict, cwd: str, stdin: str | None, timeout: float):
        with self.lock, tempfile.TemporaryDirectory(prefix="objcli-cli-") as folder:
            out, err, given = (os.path.join(folder, name) for name in ("stdout", "stderr", "stdin"))
            if stdin is not None:
                Path(given).write_text(stdin, encoding="utf-8")
            created = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            streams = [(given if stdin is not None else os.devnull, os.O_RDONLY), (out, created), (err, created)]
            server = self.start()
            main = str(Path(__import__("objcli").__file__).with_name("__main__.py"))
            request = {"args": args, "env": env, "cwd": cwd, "streams": streams, "main": main}
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            pid = json.loads(server.stdout.readline())["pid"]
            returncode = self._wait(server, pid, args, timeout)
            command = [sys.executable, "-m", "objcli", *args]
            return subprocess.CompletedProcess(command, returncode, _text(out), _text(err))

    def _wait(self, server: subprocess.Popen, pid: int, args: list[str], timeout: float) -> int:
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(server.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():  # the command hangs: killed, and the server with it (a fresh one next time)
            for victim in (pid, server.pid):
                try:
                    os.kill(victim, 9)
                except ProcessLookupError:
                    pass
            self.process = None
            raise subprocess.TimeoutExpired([sys.executable, "-m", "objcli", *args], timeout)
        return json.loads(answer[0])["returncode"]

    def forks_alike(self, env: dict) -> bool:
        """Whether a forked child sees what a fresh interpreter with ``env`` would import."""
        start = self.env_at_start if self.env_at_start is not None else dict(os.environ)
        keys = {k for k in {*env, *start} if k.startswith("PYTHON")}
        return all(env.get(k) == start.get(k) for k in keys)


def _text(path: str) -> str:
    """A stream's bytes as ``subprocess.run(text=True)`` gives them (universal newlines)."""
    import io

    with open(path, "rb") as f:
        return io.TextIOWrapper(io.BytesIO(f.read()), encoding="utf-8").read()


SERVER = _Server()


def run_objcli(args: list[str], env: dict, timeout: float, cwd=None, input=None, **other):  # noqa: A002 - as subprocess.run names it
    """As ``subprocess.run([python, -m, objcli, *args], capture_output=True, text=True, ...)``."""
    if other or not SERVER.forks_alike(env):
        return subprocess.run(
            [sys.executable, "-m", "objcli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            cwd=cwd,
            input=input,
            **other,
        )
    return SERVER.run(args, env, str(cwd or os.getcwd()), input, timeout)
