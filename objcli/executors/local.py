"""Run partitions in this process, or in a pool of worker processes."""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from ..errors import ObjcliError
from ..pipeline import PartitionResult, PartitionTask, Progress, run_partition
from .base import partition_failed

_progress_queue = None


def _init_worker(progress_queue) -> None:
    global _progress_queue
    _progress_queue = progress_queue


def _run_in_worker(task: PartitionTask) -> PartitionResult:
    return run_partition(task, report=_progress_queue.put)


class LocalExecutor:
    """``workers == 1``, or a single task: run in-process. Otherwise a process pool (spawned, so
    no worker inherits the parent's tokenizer threads)."""

    name = "local"

    def __init__(self, workers: int):
        self.workers = workers

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def run(
        self, tasks: list[PartitionTask], report: Callable[[Progress], None]
    ) -> Iterator[PartitionResult]:
        if self.workers == 1 or len(tasks) <= 1:
            for task in tasks:
                try:
                    result = run_partition(task, report)
                except Exception as error:
                    raise partition_failed(task, error) from error
                yield result
            return
        context = multiprocessing.get_context("spawn")
        progress_queue = context.Queue()
        with ProcessPoolExecutor(
            max_workers=min(self.workers, len(tasks)),
            mp_context=context,
            initializer=_init_worker,
            initargs=(progress_queue,),
        ) as pool:
            task_of = {pool.submit(_run_in_worker, task): task for task in tasks}
            pending = set(task_of)
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    _drain(progress_queue, report)
                    for future in done:
                        yield _result(future, task_of[future])
                _drain(progress_queue, report)
            except BaseException:
                for future in pending:
                    future.cancel()
                raise


def _result(future, task: PartitionTask) -> PartitionResult:
    try:
        return future.result()
    except BrokenProcessPool:
        raise ObjcliError(
            f"a worker process died while running partition {task.partition.index} ({task.partition.label}), "
            "killed or out of memory; rerun the same command to resume, perhaps with fewer --workers"
        ) from None
    except Exception as error:
        raise partition_failed(task, error) from error


def _drain(progress_queue, report) -> None:
    while True:
        try:
            report(progress_queue.get_nowait())
        except queue.Empty:
            return
