"""Which pool runs a transform's partitions when ``--pool auto``, decided twice: before the tokenizer
loads (so that a fork server can start beside the main process's planning) and after (the choice)."""

from __future__ import annotations

import json
import os

from ..objectives import REGISTRY
from ..tokenizers.user_cache import cache_folder, write_quietly

THREADS_AT_MOST = 8  # workers a thread pool feeds before the GIL bounds it (see choose_pool)


def choose_pool(pool: str, objective, tokenizer, workers: int, source: str = "") -> str:
    """Threads win where the tokenizer releases the GIL and does most of the work (SentencePiece,
    token-level objectives); processes where Python holds it: objectives that cut their own pieces
    to tokenize (sentences, FIM's prefix/middle/suffix; on 16 cores nsp ran 2.8x and fim 1.3x faster
    in processes), and ``tokenizers`` 0.x, whose batches scale better apart. Processes too for an
    engine that runs threads of its own inside a call (measured: ``tokenizers/engine_threads.py``;
    ``tokenizers`` 1.0's pre-releases): Python threads would queue on the same engine threads, one
    engine per process takes a core each. Past THREADS_AT_MOST workers, threads are bound by the part
    of the pipeline that holds the GIL whatever the objective (N G > P: G is 4 ms/MB against P's 35
    for clm in make bench's many-core model), and workers forked from the preloaded server start in
    13-17 ms of CPU. ``source``: the tokenizer as the command names it, under which the choice is
    kept as the next run's hint (``will_fork``)."""
    if pool != "auto":
        return pool
    chosen = "threads"
    python_bound = objective.tokenizes_itself or getattr(tokenizer.engine, "legacy", False)
    if python_bound or workers > THREADS_AT_MOST:
        chosen = "processes"
    elif workers > 1 and _cores() > 1:
        from ..tokenizers.engine_threads import runs_own_threads

        chosen = "processes" if runs_own_threads(tokenizer.engine) else "threads"
        _keep_hint(source, chosen == "processes")
    return chosen


def will_fork(objective_name: str, pool: str, workers: int, pooled: int, tokenizer: str = "") -> bool:
    """Whether ``pooled`` partitions will run in forked processes, as far as is known before the
    tokenizer loads (``choose_pool`` says the same wherever this says yes, but for the hint: the
    last run of this tokenizer file found its engine running threads of its own)."""
    if workers < 2 or pooled < 2:
        return False
    always = REGISTRY.get(objective_name).tokenizes_itself is True  # a class that always cuts its own pieces
    auto = always or workers > THREADS_AT_MOST or (_cores() > 1 and _hinted(tokenizer))
    return pool == "processes" or (pool == "auto" and auto)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _hint_path(tokenizer) -> object:
    """The hint's file for a tokenizer file as it is now (its path, size and modification time)."""
    import hashlib

    try:
        stat = os.stat(tokenizer)
    except OSError:
        return None
    key = f"{os.path.realpath(tokenizer)}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return cache_folder("pool-hints") / hashlib.sha256(key.encode()).hexdigest()[:32]


def _keep_hint(tokenizer, processes: bool) -> None:
    path = _hint_path(tokenizer) if tokenizer else None
    if path is not None:
        write_quietly(path, json.dumps({"processes": processes}) + "\n")


def _hinted(tokenizer: str) -> bool:
    path = _hint_path(tokenizer) if tokenizer else None
    try:
        return path is not None and json.loads(path.read_text(encoding="utf-8")).get("processes") is True
    except (OSError, ValueError, AttributeError):
        return False
