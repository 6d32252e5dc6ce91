"""Executors and pools (issue 54: tests shaped like the package): the bytes never depend on the
number of workers, threads or processes; the pool ``auto`` picks; a partition running alone takes its
process's tokenizer threads; the fork server's tokenizer is the workers' first load."""

import dataclasses
import os
from pathlib import Path

import pytest
from runs import SAMPLE, manifest_json, run_transform


def _shard_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name.startswith("part-")}


@pytest.mark.parametrize("output_format", ["arrow", "parquet", "npy", "megatron"])
def test_byte_identical_for_one_or_two_workers_threads_or_processes_and_repeat_runs(
    small_corpus, sample_tokenizer, tmp_path, output_format
):
    common = dict(seq_len=128, output_format=output_format, partition_size=20_000, shard_size="30")
    one = run_transform([small_corpus], sample_tokenizer, tmp_path / "w1", workers=1, **common)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "w2", workers=2, **common)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "w1b", workers=1, **common)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "p2", workers=2, pool="processes", **common)
    assert len(one.manifest["partitions"]) > 3
    first = _shard_bytes(tmp_path / "w1")
    assert first and first == _shard_bytes(tmp_path / "w2") == _shard_bytes(tmp_path / "w1b") == _shard_bytes(
        tmp_path / "p2"
    )
    manifests = {(tmp_path / name / "manifest.json").read_bytes() for name in ("w1", "w2", "w1b", "p2")}
    assert len(manifests) == 1  # the manifest too: it records what was written, not how


def test_a_partition_running_alone_gets_the_process_threads():
    """Threads of one process share its tokenizer threads among the partitions running now, never
    fewer than a task's own share (that the tokens never depend on it: the workers tests above)."""
    from objcli.run.pipeline import PartitionTask, _running_partition, encode_threads

    task = PartitionTask(partition=None, config=None, special=None, folder="", threads=1, process_threads=4)
    with _running_partition():
        assert encode_threads(task) == 4  # alone: a run's tail
        with _running_partition(), _running_partition():
            assert encode_threads(task) == 1  # three running: 4 // 3
            assert encode_threads(dataclasses.replace(task, threads=3)) == 3  # never below its own share
        with _running_partition():
            assert encode_threads(task) == 2


@pytest.mark.parametrize(
    ("objective", "workers", "expected"),
    [
        ("clm", 2, "threads"),
        ("clm", 8, "threads"),
        ("clm", 9, "processes"),
        ("mlm", 16, "processes"),
        ("nsp", 2, "processes"),
        ("bart", 1, "processes"),
    ],
)
def test_auto_pool_takes_processes_where_threads_would_be_gil_bound(
    objective, workers, expected, small_corpus, sample_tokenizer, tmp_path
):
    """Sentence objectives cut their own pieces in Python (processes at any count); token-level ones
    run on threads until more workers than the GIL-held share of the pipeline can feed."""
    from objcli.recipe import config_from_values
    from objcli.transform import set_up_run

    values = {
        "inputs": [str(small_corpus)],
        "tokenizer": sample_tokenizer,
        "output": str(tmp_path / "o"),
        "objective": objective,
        "seq_len": 128,
    }
    assert set_up_run(config_from_values(values), "auto", workers=workers).pool == expected
    assert set_up_run(config_from_values(values), "threads", workers=workers).pool == "threads"


def test_nine_workers_write_what_one_writes(small_corpus, sample_tokenizer, tmp_path):
    common = dict(seq_len=128, partition_size=20_000, shard_size="30")
    run_transform([small_corpus], sample_tokenizer, tmp_path / "w1", workers=1, **common)
    run_transform([small_corpus], sample_tokenizer, tmp_path / "w9", workers=9, **common)
    assert _shard_bytes(tmp_path / "w1") == _shard_bytes(tmp_path / "w9")


def test_a_tokenizer_opened_before_the_engine_was_chosen_is_taken_by_the_first_load(sample_tokenizer):
    """The fork server, started before the run chooses its engine, opens the tokenizer; a worker forked
    from it gives that object the engine its task names instead of opening the file again."""
    from objcli import tokenizers

    path = str(Path(sample_tokenizer).resolve())
    earlier = tokenizers._LOADED.pop((path, "sentencepiece"), None)  # an earlier test's, in this process
    tokenizers.preload_tokenizer(path)
    opened = tokenizers._OPENED[path]
    try:
        loaded = tokenizers.load_tokenizer(path, "sentencepiece")
        assert loaded is opened and path not in tokenizers._OPENED
        assert loaded.engine.name == "sentencepiece"
    finally:
        tokenizers._OPENED.pop(path, None)
        tokenizers._LOADED.pop((path, "sentencepiece"), None)
        if earlier is not None:
            tokenizers._LOADED[path, "sentencepiece"] = earlier


def test_the_engine_auto_tries_first_is_built_and_warmed_before_workers_fork(monkeypatch):
    """Issue 73, point 3: the fork server builds and warms the first engine ``--engine auto`` can make
    for a tokenizer.json (gigatoken's first encode costs each worker a quarter of a second); a worker
    given that engine takes it, encodes what a fresh engine encodes, and sizes its own thread pool."""
    from objcli import tokenizers

    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    path = str((SAMPLE / "llama-style" / "tokenizer.json").resolve())
    for key in [k for k in tokenizers._LOADED if k[0] == path]:
        monkeypatch.delitem(tokenizers._LOADED, key)
    tokenizers.preload_tokenizer(path)
    built = {name: engine for (where, name), engine in tokenizers._BUILT.items() if where == path}
    try:
        assert len(built) == 1 and "RAYON_NUM_THREADS" not in os.environ
        ((name, engine),) = built.items()
        fresh = tokenizers.open_tokenizer(path).make_engine(name)
        assert list(fresh.encode_batch(["warm up", "naïve text"], 1)[0]) == list(
            engine.encode_batch(["warm up", "naïve text"], 1)[0]
        )
        assert tokenizers.load_tokenizer(path, name).engine is engine and (path, name) not in tokenizers._BUILT
    finally:
        tokenizers._OPENED.pop(path, None)
        tokenizers._LOADED.pop((path, name), None)
        for key in [k for k in tokenizers._BUILT if k[0] == path]:
            tokenizers._BUILT.pop(key)


def test_a_run_that_encodes_nothing_has_its_fork_server_read_no_engine(monkeypatch):
    """A run over token stores takes its tokenizer's reference engine and encodes nothing: its fork server opens
    the tokenizer alone (it built and warmed a fast engine that no worker used, and each worker read the library
    again: 0.43 s for a 128k tokenizer.json), and a worker's reference is read where it encodes, as the library's."""
    from objcli import tokenizers

    path = str((SAMPLE / "llama-style" / "tokenizer.json").resolve())
    for table in (tokenizers._OPENED, tokenizers._BUILT, tokenizers._LOADED):
        for key in [k for k in table if (k if isinstance(k, str) else k[0]) == path]:
            monkeypatch.delitem(table, key)
    tokenizers.preload_tokenizer(path, "reference")
    name = tokenizers._OPENED[path].reference_engine_name()
    try:
        assert not [key for key in tokenizers._BUILT if key[0] == path]
        worker = tokenizers.load_tokenizer(path, name)
        assert worker.engine.name == name and "library_engine" not in worker.__dict__  # not read yet
        ids = worker.encode(["Hello there"], 1)[0].tolist()
        assert ids == worker.library_engine.encode_batch(["Hello there"], 1)[0].tolist()
    finally:
        tokenizers._OPENED.pop(path, None)
        tokenizers._LOADED.pop((path, name), None)


def test_a_pool_waits_on_the_tasks_in_flight_not_on_every_task(small_corpus, sample_tokenizer, tmp_path, monkeypatch):
    """A run of many partitions submits a few tasks ahead of each worker and waits on those: a wait over every
    task at each completion made the main process quadratic in the partitions; every partition is still
    written, in its place."""
    import objcli.executors.local as local

    waited = []
    wait = local.wait
    monkeypatch.setattr(local, "wait", lambda futures, **kw: waited.append(len(futures)) or wait(futures, **kw))
    out = tmp_path / "many"
    run_transform([small_corpus], sample_tokenizer, out, workers=2, pool="threads", partition_size="16KiB")
    one = tmp_path / "one"
    run_transform([small_corpus], sample_tokenizer, one, workers=1, partition_size="16KiB")
    partitions = len(manifest_json(out)["partitions"])
    assert partitions > 4 * local.IN_FLIGHT and max(waited) <= 2 * local.IN_FLIGHT
    assert _shard_bytes(out) == _shard_bytes(one)


def test_the_main_process_runs_the_last_tasks_while_the_workers_start():
    """A process pool's first submit waits for its worker to start (the fork server importing objcli): meanwhile
    the main process runs tasks from the end of the queue, and every task is run once, by one or the other."""
    import queue
    import threading
    from concurrent.futures import Future

    import objcli.executors.local as local

    workers_up = threading.Event()
    submitted, here = [], []

    def done(value) -> Future:
        future = Future()
        future.set_result(value)
        return future

    def submit(task):
        assert workers_up.wait(timeout=10)  # a worker's start, until the main process has run three tasks
        submitted.append(task)
        return done(task)

    def run_here(task):
        here.append(task)
        if len(here) == 3:
            workers_up.set()
        return done(task)

    tasks = list(range(20))
    results = [f.result() for f in local._in_flight(submit, tasks, 4, {}, queue.SimpleQueue(), print, run_here)]
    assert sorted(results) == tasks and not set(submitted) & set(here)
    assert here == tasks[::-1][: len(here)] and len(here) >= 3 and submitted[:4] == [0, 1, 2, 3]
