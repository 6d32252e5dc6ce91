"""A core for each worker where the workers fill every core the run may use (run/affinity.py):
the real pools, asked where their workers may run; the bytes written are the same pinned or not."""

import hashlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest
from runs import run_transform

from objcli.executors.local import _init_worker
from objcli.run import affinity

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
many_cores = pytest.mark.skipif(len(CORES) < 2, reason="one core: nothing to pin")


def _where_i_run(_=None) -> frozenset:
    return frozenset(os.sched_getaffinity(0))


@many_cores
def test_workers_that_fill_the_cores_are_pinned_and_fewer_are_not(monkeypatch):
    assert affinity.cores_to_pin(len(CORES)) == CORES
    assert affinity.cores_to_pin(len(CORES) + 3) == CORES  # more workers than cores: round robin
    assert affinity.cores_to_pin(len(CORES) - 1) is None  # an idle core: the engine's threads may use it
    monkeypatch.setenv("OBJCLI_PIN_WORKERS", "0")
    assert affinity.cores_to_pin(len(CORES)) is None


@many_cores
def test_a_thread_pool_puts_each_worker_on_a_core_of_its_own():
    pinner = affinity.ThreadPinner(CORES)
    barrier = __import__("threading").Barrier(len(CORES))

    def where(_):
        barrier.wait(timeout=30)  # every worker thread started: each ran the initializer once
        return _where_i_run()

    with ThreadPoolExecutor(max_workers=len(CORES), initializer=pinner) as pool:
        places = list(pool.map(where, range(len(CORES))))
    assert sorted(places, key=min) == [frozenset({c}) for c in CORES]
    assert _where_i_run() == frozenset(CORES)  # the calling thread stays free


@many_cores
def test_a_process_pool_puts_each_worker_on_a_core_of_its_own():
    context = multiprocessing.get_context("spawn")
    started = context.Value("i", 0)
    initargs = (context.Queue(), os.getpid(), CORES, started)
    with ProcessPoolExecutor(len(CORES), mp_context=context, initializer=_init_worker, initargs=initargs) as pool:
        pids_and_places = set(pool.map(_pid_and_place, range(8 * len(CORES))))
    places = {pid: place for pid, place in pids_and_places}
    assert started.value == len(places) == len(CORES)
    assert sorted(places.values(), key=min) == [frozenset({c}) for c in CORES]


def _pid_and_place(_):
    import time

    time.sleep(0.02)  # long enough that every worker takes some of the tasks
    return os.getpid(), _where_i_run()


@many_cores
@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_pinned_or_free_the_same_bytes(pool, small_corpus, sample_tokenizer, tmp_path, monkeypatch):
    digests = []
    for pin in ("1", "0"):
        monkeypatch.setenv("OBJCLI_PIN_WORKERS", pin)
        out = tmp_path / f"out-{pin}"
        settings = {"objective": "mlm", "seq_len": 128, "partition_size": "64KiB"}
        summary = run_transform([small_corpus], sample_tokenizer, out, workers=len(CORES), pool=pool, **settings)
        assert len(summary.manifest["partitions"]) > 1  # a pool ran
        digests.append({p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.glob("*.arrow")})
    assert digests[0] == digests[1] and len(digests[0]) >= 1


PROBE_LEAVES_NO_HELPERS = """
import json, os, sys, time
from objcli.tokenizers import open_tokenizer
from objcli.tokenizers.engine_probe import choose_engine

def helpers():
    time.sleep(0.2)  # a thread just started may not be listed yet
    return len(os.listdir("/proc/self/task"))  # this script starts no thread of its own

tokenizer = open_tokenizer(sys.argv[1])
before = helpers()
choice = choose_engine(tokenizer, "auto", ["a first batch, as a run reads it"] * 64)
probed = helpers()
choice.engine.encode_batch(["text " * 2000] * 64, 1)  # a call free to use both cores
print(json.dumps({"engine": choice.engine.name, "probe": choice.probe, "added": [probed - before, helpers() - probed]}))
"""


@many_cores
def test_the_probe_leaves_no_engine_threads_behind_for_pinned_workers_to_share(sample_dir, tmp_path):
    """tokenizers 1.0 starts helper threads on a call free to run on several cores, and later calls
    share them; the probe runs on one core (``engine_probe.on_one_core``) so that it starts none."""
    import json
    import subprocess
    import sys

    from runs import prerelease_env

    env = {**prerelease_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}  # no kept verdict: a probe runs
    command = [sys.executable, "-c", PROBE_LEAVES_NO_HELPERS, str(sample_dir / "llama-style" / "tokenizer.json")]
    found = json.loads(subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout)
    assert found["engine"] == "tokenizers" and found["probe"].startswith("identical")
    assert found["added"][0] == 0  # the probe: none
    assert found["added"][1] > 0, found  # a call on several cores does start them (what the probe avoids)


@many_cores
def test_a_pinned_worker_is_free_for_a_batch_that_asks_for_more_threads():
    """At a run's end a partition left with idle cores beside it encodes with more threads
    (``pipeline.encode_threads``): its worker is free for those batches, then back on its core."""

    def places(_):
        seen = [_where_i_run()]
        for threads in (1, 2):
            with affinity.free_for(threads):
                seen.append(_where_i_run())
            seen.append(_where_i_run())
        return seen

    with ThreadPoolExecutor(max_workers=1, initializer=affinity.ThreadPinner(CORES)) as pool:
        pinned, one_thread, after_one, two_threads, after_two = pool.submit(places, None).result()
    assert pinned == one_thread == after_one == after_two == frozenset({CORES[0]})
    assert two_threads == frozenset(CORES)
    with ThreadPoolExecutor(max_workers=1) as pool:  # a worker never pinned is left as it is
        assert set(pool.submit(places, None).result()) == {frozenset(CORES)}
