"""Which pool runs a transform's partitions when ``--pool auto``, decided twice: before the tokenizer
loads (so that a fork server can start beside the main process's setup) and after (the choice)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..run.affinity import allowed_cores
from ..storage.user_cache import cache_folder, write_quietly

THREADS_AT_MOST = 8  # workers a thread pool feeds before the GIL bounds it, for the slowest engines
# make bench's many-core model: the part of the pipeline that holds the GIL, and objcli's own work
# beside the engine at steady state (clm, the held-out corpus: 9.4 ms/MB), CPU ms per MB of text.
GIL_MS_PER_MB = 4.0
OWN_MS_PER_MB = 10.0
# A run that encodes nothing (a token store's or tokenized inputs) is objcli's own NumPy work alone, most of
# it holding the GIL (arrays of a batch's documents): from this many partitions its workers are processes.
# Measured on 2 cores, clm 2048 over the 1 GB store (85 partitions) and its copies by links: a plan 0.88 s in
# threads against 0.93 in processes (the fork server's start), 255 partitions 2.10 against 1.77 s, 850
# partitions 7.5-7.9 against 5.2-5.5 s; the Arrow run at 85 partitions 3.90-3.96 against 3.56-3.61 s (the
# fork server's start, 0.05 s, is what a plan of 85 partitions loses). A partition of a store that keeps
# records (chat, pairs) counts twice: its batches' work holds the GIL longer (a chat plan, 250 MB a store of
# 15 partitions, threads 0.60-0.69 s against 0.73-0.76; 500 MB, 30: 0.88-0.92 against 0.82-0.84; 1 GB, 60:
# 1.45-1.49 against 1.10-1.13 s). Below it such a run threads whatever the engine: a store made with a
# tokenizer.json that tokenizers 0.x loads went to processes for the engine's sake, though it encodes nothing
# (2 cores, llama-style stores, interleaved: clm plan over 1 GB, 60 partitions, 1.15-1.17 -> 0.65-0.66 s, its
# Arrow run 2.94-2.97 -> 2.64-2.68 s; chat plan over 250 MB 1.08-1.13 -> 0.75-0.79 s, Arrow 3.33-3.56 ->
# 2.49-2.75 s). An objective whose work holds the GIL forks however few (UL2 over 30: 4.97 s in threads, 3.51 s).
TOKEN_RUN_PROCESSES_FROM = 64
RECORD_PARTITION_WEIGHT = 2


def threads_bound(engine_ms_per_mb: float) -> int:
    """Workers a thread pool feeds before the part of the pipeline that holds the GIL binds it: N
    workers each at 1/P MB per ms need N G / P of the GIL (P = the engine's cost + objcli's own), so
    at most P / G of them; between 2 and THREADS_AT_MOST."""
    return max(2, min(THREADS_AT_MOST, int((engine_ms_per_mb + OWN_MS_PER_MB) / GIL_MS_PER_MB)))


def choose_pool(pool: str, objective, tokenizer, workers: int, source: str = "", token_partitions: int = 0) -> str:
    """Threads win where the tokenizer releases the GIL and does most of the work (SentencePiece,
    token-level objectives); processes where Python holds it: objectives that cut their own pieces
    to tokenize (sentences, FIM's prefix/middle/suffix; on 16 cores nsp ran 2.8x and fim 1.3x faster
    in processes), and ``tokenizers`` 0.x, whose batches scale better apart. Past ``threads_bound``
    workers, threads are bound by the part of the pipeline that holds the GIL whatever the objective:
    the faster the engine, the sooner (its cost measured once, ``tokenizers/engine_cost.py``: a 32k
    byte-level BPE on ``tokenizers`` 1.0 rc3 about 9 ms/MB, so threads up to 4 workers; SentencePiece
    about 26, so up to THREADS_AT_MOST); workers forked from the preloaded server start in 13-17 ms
    of CPU. On 2 cores, workers pinned to a core each (``affinity.py``), processes ran the fast engine
    2.35-2.72 s on 200 MB against threads' 2.41-2.66 s, with 1.7x the memory: threads stay.
    ``source``: the tokenizer as the command names it, under which a measured choice is kept as the
    next run's hint (``will_fork``). ``token_partitions``: the partitions of a run that encodes nothing
    (``TOKEN_RUN_PROCESSES_FROM``; such a run's pool never depends on its engine), else 0."""
    if pool != "auto":
        return pool
    # tokenizers 0.x's batches scale better apart, where a batch is encoded: a run over token stores encodes none.
    legacy = not token_partitions and getattr(tokenizer.engine, "legacy", False)
    python_bound = objective.tokenizes_itself or legacy
    if python_bound or workers > THREADS_AT_MOST:
        return "processes"
    busy = min(workers, _cores())  # workers beyond the cores add no throughput to bound
    if busy >= 2 and token_partitions >= TOKEN_RUN_PROCESSES_FROM:
        return "processes"
    if busy <= 2 or token_partitions:  # a run that encodes nothing: below the threshold it threads, whatever its engine
        return "threads"
    from ..tokenizers.engine_cost import engine_cost

    cost = engine_cost(tokenizer.engine, tokenizer.sha256)
    chosen = "processes" if busy > threads_bound(cost["ms_per_mb"]) else "threads"
    _keep_hint(source, chosen == "processes")
    return chosen


def will_fork(reads, pool: str, workers: int, pooled: int, tokenizer: str = "", token_partitions: int = 0) -> bool:
    """Whether ``pooled`` partitions will run in forked processes, as far as is known before the
    tokenizer loads (``choose_pool`` says the same wherever this says yes, but for the hint: the
    last run of this tokenizer file found its engine too fast for a thread pool of its workers).
    ``token_partitions``: as ``choose_pool`` takes it."""
    if workers < 2 or pooled < 2:
        return False
    tokens_only = token_partitions >= TOKEN_RUN_PROCESSES_FROM and min(workers, _cores()) >= 2
    always = reads.tokenizes_itself or tokens_only  # ``reads``: what the objective reads (Objective.reads)
    hinted = min(workers, _cores()) > 2 and not token_partitions and _hinted(tokenizer)  # a hint of its engine's
    auto = always or workers > THREADS_AT_MOST or hinted
    return pool == "processes" or (pool == "auto" and auto)


def _cores() -> int:
    return len(allowed_cores())


def _hint_path(tokenizer: str) -> Path | None:
    """The hint's file for a tokenizer file as it is now (its path, size and modification time)."""
    try:
        stat = os.stat(tokenizer)
    except OSError:
        return None
    key = f"{os.path.realpath(tokenizer)}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return cache_folder("pool-hints") / hashlib.sha256(key.encode()).hexdigest()[:32]


def _keep_hint(tokenizer: str, processes: bool) -> None:
    path = _hint_path(tokenizer) if tokenizer else None
    if path is not None:
        write_quietly(path, json.dumps({"processes": processes}) + "\n")


def _hinted(tokenizer: str) -> bool:
    path = _hint_path(tokenizer) if tokenizer else None
    try:
        return path is not None and json.loads(path.read_text(encoding="utf-8")).get("processes") is True
    except (OSError, ValueError, AttributeError):
        return False


def token_partitions(config, partitions) -> int:
    """The pooled partitions of a run that encodes nothing (every input a token store's or ids another tool
    wrote, an objective that encodes no pieces of its own, as FIM does), a store's of records twice, each as many
    as fork where the objective's work holds the GIL (``Objective.holds_gil``), else 0: what ``choose_pool`` weighs."""
    from ..inputs.pieces import InputKind
    from ..objectives import REGISTRY

    objective = REGISTRY.named(config.objective)
    if objective.encodes_rows(config.objective_options) or any(p.input.kind is InputKind.TEXT for p in partitions):
        return 0
    records = objective.reads(config.objective_options).needs.records
    weight = RECORD_PARTITION_WEIGHT if records else 1
    return sum(not p.input.is_stream for p in partitions) * (
        TOKEN_RUN_PROCESSES_FROM if objective.holds_gil else weight
    )
