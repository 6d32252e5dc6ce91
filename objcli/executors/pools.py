"""Which pool runs a transform's partitions when ``--pool auto``, decided twice: before the tokenizer
loads (so that a fork server can start beside the main process's planning) and after (the choice)."""

from __future__ import annotations

from ..objectives import REGISTRY

THREADS_AT_MOST = 8  # workers a thread pool feeds before the GIL bounds it (see choose_pool)


def choose_pool(pool: str, objective, tokenizer, workers: int) -> str:
    """Threads win where the tokenizer releases the GIL and does most of the work (SentencePiece,
    token-level objectives); processes where Python holds it: objectives that cut their own pieces
    to tokenize (sentences, FIM's prefix/middle/suffix; on 16 cores nsp ran 2.8x and fim 1.3x faster
    in processes), and ``tokenizers`` 0.x, whose batches scale better apart. Past THREADS_AT_MOST
    workers, threads are bound by the part of the pipeline that holds the GIL whatever the
    objective (N G > P: G is 4 ms/MB against P's 35 for clm in make bench's many-core model), and
    workers forked from the preloaded server start in 13-17 ms of CPU."""
    if pool != "auto":
        return pool
    python_bound = objective.tokenizes_itself or getattr(tokenizer.engine, "legacy", False)
    return "processes" if python_bound or workers > THREADS_AT_MOST else "threads"


def will_fork(objective_name: str, pool: str, workers: int, pooled: int) -> bool:
    """Whether ``pooled`` partitions will run in forked processes, as far as is known before the
    tokenizer loads (``choose_pool`` says the same wherever this says yes)."""
    if workers < 2 or pooled < 2:
        return False
    always = REGISTRY.get(objective_name).tokenizes_itself is True  # a class that always cuts its own pieces
    return pool == "processes" or (pool == "auto" and (always or workers > THREADS_AT_MOST))
