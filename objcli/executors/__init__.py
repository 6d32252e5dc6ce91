"""Executors run partition tasks and stream their results back as each finishes.

The interface is small on purpose, so another executor can be added beside these two::

    with executor:                                  # start / join its workers, and stop them
        for result in executor.run(tasks, report):  # PartitionResults, in completion order
            ...

The output never depends on the executor, because a partition's output depends only on its task.
"""

from __future__ import annotations

import gc
import sys

from ..errors import ObjcliError
from .local import POOLS, LocalExecutor

EXECUTORS = ("local", "dask")


def check_execution(
    workers: int | None, overwrite: bool, resume: bool, to_stdout: bool, executor: str, pool: str, scheduler=None
) -> None:
    """How a run executes, checked in this one place for the command line and library callers alike
    (``workers`` None: not given, one a core)."""
    if executor not in EXECUTORS:
        raise ObjcliError(f"--executor {executor}: choose one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise ObjcliError(f"--workers {workers}: must be at least 1")
    if scheduler and executor != "dask":
        raise ObjcliError(f"--scheduler applies to --executor dask, not to {executor}")
    if scheduler and workers is not None:
        raise ObjcliError("--workers sizes a local pool or cluster; with --scheduler the cluster's own workers run")
    if overwrite and resume:
        raise ObjcliError("--resume keeps an earlier run and --overwrite replaces it; pass one of them")
    if to_stdout and resume:
        raise ObjcliError("--resume needs an output folder; a stream on stdout cannot be resumed")
    if to_stdout and getattr(sys.stdout, "closed_at_start", False):  # objcli/__main__.py put /dev/null there
        raise ObjcliError("-o -: standard output is closed, so the rows would go nowhere; give an output folder")
    if pool not in POOLS:
        raise ObjcliError(f"--pool {pool}: choose one of {', '.join(POOLS)}")
    if pool != "auto" and executor != "local":
        raise ObjcliError(f"--pool applies to --executor local, not to {executor}")


def make_executor(name: str, workers: int, scheduler: str | None = None, pool: str = "threads"):
    """The executor a checked run asked for (``check_execution``)."""
    if name == "dask":
        from .dask import DaskExecutor

        return DaskExecutor(workers, scheduler)
    return LocalExecutor(workers, pool)


__all__ = ["EXECUTORS", "POOLS", "LocalExecutor", "check_execution", "make_executor", "run_all"]


def run_all(runs, report, on_result) -> list:
    """Every ``(executor, tasks)`` pair's results, in completion order, each also given to
    ``on_result``. What the process loaded before (modules, the tokenizer, the plan) lives through
    the partitions: it is kept out of the collector's scans meanwhile (its full collections walked it
    again and again: 0.19 s -> 0.10 s of collections on 2.8 M tiny documents) and, as the gc module
    advises before a fork, out of the pages a fork would copy; unfrozen after, for a caller that runs
    objcli in its own process again and again."""
    results = []
    gc.freeze()
    try:
        for executor, tasks in runs:
            if not tasks:
                continue
            with executor:
                for result in executor.run(tasks, report):
                    results.append(result)
                    on_result(result)
    finally:
        gc.unfreeze()
    return results
