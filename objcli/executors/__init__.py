"""Executors run partition tasks and stream their results back as each finishes.

The interface is small on purpose, so another engine can be added beside these two::

    with executor:                                  # start / join the engine, and stop it
        for result in executor.run(tasks, report):  # PartitionResults, in completion order
            ...

The output never depends on the executor, because a partition's output depends only on its task.
"""

from __future__ import annotations

from ..errors import ObjcliError
from .local import POOLS, LocalExecutor

EXECUTORS = ("local", "dask")


def make_executor(name: str, workers: int, scheduler: str | None = None, pool: str = "threads"):
    if name == "local":
        if scheduler:
            raise ObjcliError("--scheduler applies to --executor dask, not to local")
        return LocalExecutor(workers, pool)
    if name == "dask":
        from .dask import DaskExecutor

        return DaskExecutor(workers, scheduler)
    raise ObjcliError(f"--executor {name}: choose one of {', '.join(EXECUTORS)}")


__all__ = ["EXECUTORS", "POOLS", "LocalExecutor", "make_executor"]
