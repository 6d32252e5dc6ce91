"""Dask schedulers and workers started as processes, as on a cluster (for the tests that need one)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """In a child before it runs (``preexec_fn``): the kernel sends it SIGTERM when the process that
    started it dies, however it dies (a ``make test`` killed by a timeout, a worker SIGKILLed), so no
    scheduler or worker outlives the test that started it."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class DaskProcesses:
    """``dask scheduler`` and ``dask worker`` as separate processes, as on a cluster."""

    def __init__(self, folder: Path, workers: int = 2, env: dict | None = None):
        self.folder = folder
        self.file = folder / "scheduler.json"
        self.processes = []
        self._start(
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--dashboard-address",
            "127.0.0.1:0",
            "--scheduler-file",
            self.file,
        )
        deadline = time.monotonic() + 60
        while not self.file.exists():
            assert time.monotonic() < deadline, (folder / "scheduler.log").read_text()
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]
        self._start(
            "worker",
            "--scheduler-file",
            self.file,
            "--host",
            "127.0.0.1",
            "--no-dashboard",
            "--nthreads",
            "1",
            "--nworkers",
            str(workers),
            env=env,
        )
        self._wait_for(workers)

    def _start(self, role, *args, env=None):
        log = open(self.folder / f"{role}.log", "w")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            [str(BIN / "dask"), role, *map(str, args)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=self.folder,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self.processes.append((process, log))

    def _wait_for(self, workers: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=60)

    def stop(self) -> None:
        for process, log in reversed(self.processes):
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            log.close()
