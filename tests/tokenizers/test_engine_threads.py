"""``--pool auto`` asks whether the engine runs threads of its own inside a call, measured (the
process's CPU time over the call's wall time) and kept per engine version: an engine that keeps two
cores busy on a one-thread call gets a worker process each; one that does not, threads."""

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import prerelease_env
from paths import SAMPLE_DATA

from objcli.executors import pools
from objcli.tokenizers import engine_threads

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _Engine:
    """Spins for a few milliseconds a call, alone or with a second spinning thread (its own)."""

    version = "1"

    def __init__(self, name: str, helpers: int):
        self.name, self.helpers, self.calls = name, helpers, 0

    def encode_batch(self, texts, num_threads):
        self.calls += 1
        stop = time.perf_counter() + 0.02
        helpers = [threading.Thread(target=_spin_native, args=(stop,)) for _ in range(self.helpers)]
        for helper in helpers:
            helper.start()
        _spin_native(stop)
        for helper in helpers:
            helper.join()
        return np.zeros(0, np.int32), np.zeros(len(texts) + 1, np.int64)


def _spin_native(until: float) -> None:
    """Busy without the GIL (NumPy releases it on large sorts)."""
    values = np.random.default_rng(0).random(200_000)
    while time.perf_counter() < until:
        np.sort(values, kind="stable")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.slow  # a timing: two cores must be free for the 0.15 s it measures
@pytest.mark.skipif(CORES < 2, reason="one core: no engine can keep two busy")
def test_an_engine_with_threads_of_its_own_is_told_apart_and_kept(cache):
    busy, alone = _Engine("busy", helpers=1), _Engine("alone", helpers=0)
    assert engine_threads.runs_own_threads(busy) and not engine_threads.runs_own_threads(alone)
    kept = json.loads(next((cache / "objcli" / "engine-threads").glob("busy-1-*.json")).read_text())
    assert kept["cores_per_call"] >= engine_threads.OWN_THREADS_AT_LEAST
    calls = busy.calls
    assert engine_threads.runs_own_threads(busy) and busy.calls == calls  # kept: not measured again


class _Tokenizer:
    def __init__(self, engine, path):
        self.engine, self.path = engine, path


class _Objective:
    tokenizes_itself = False


@pytest.mark.skipif(CORES < 2, reason="one core: a pool of one")
def test_auto_takes_processes_for_such_an_engine_and_hints_the_next_run(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_threads, "cores_per_call", lambda engine: {"busy": 1.9, "alone": 1.0}[engine.name])
    (tmp_path / "tok.json").write_text("{}")
    source = str(tmp_path / "tok.json")
    busy, alone = _Tokenizer(_Engine("busy", 1), source), _Tokenizer(_Engine("alone", 0), source)
    assert pools.choose_pool("auto", _Objective(), alone, 2, source) == "threads"
    assert not pools.will_fork("clm", "auto", 2, 4, source)
    assert pools.choose_pool("auto", _Objective(), busy, 2, source) == "processes"
    assert pools.will_fork("clm", "auto", 2, 4, source)  # the fork server starts early next time
    assert pools.choose_pool("auto", _Objective(), busy, 1, source) == "threads"  # one worker: no pool
    assert pools.choose_pool("threads", _Objective(), busy, 2, source) == "threads"  # asked for
    (tmp_path / "tok.json").write_text("{ }")  # the file changed: no hint
    assert not pools.will_fork("clm", "auto", 2, 4, source)


@pytest.mark.slow  # a timing, on the real engines
@pytest.mark.skipif(CORES < 2, reason="one core")
def test_the_pinned_pre_release_runs_threads_of_its_own_and_the_stable_library_does_not(tmp_path):
    """Measured on the real engines: ``tokenizers`` 1.0's pre-release keeps more than one core busy on
    a one-thread call, 0.x does not; so auto gives the pre-release a process per worker."""
    code = (
        "import sys; from objcli.tokenizers import open_tokenizer; "
        "from objcli.tokenizers.engine_threads import runs_own_threads; "
        "e = open_tokenizer(sys.argv[1]).library_engine; print(e.version, runs_own_threads(e))"
    )
    tokenizer = str(SAMPLE_DATA / "llama-style" / "tokenizer.json")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    stable = subprocess.run([sys.executable, "-c", code, tokenizer], capture_output=True, text=True,
                            env={**os.environ, **env}, check=True)  # fmt: skip
    fast = subprocess.run([sys.executable, "-c", code, tokenizer], capture_output=True, text=True,
                          env={**prerelease_env(), **env}, check=True)  # fmt: skip
    assert stable.stdout.split()[1] == "False" and fast.stdout.split()[1] == "True", (stable.stdout, fast.stdout)
