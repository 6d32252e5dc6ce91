"""Run partitions in this process, or in a pool of worker processes."""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from ..pipeline import PartitionResult, PartitionTask, Progress, run_partition

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

    def run(
        self, tasks: list[PartitionTask], report: Callable[[Progress], None]
    ) -> Iterator[PartitionResult]:
        if self.workers == 1 or len(tasks) <= 1:
            for task in tasks:
                yield run_partition(task, report)
            return
        context = multiprocessing.get_context("spawn")
        progress_queue = context.Queue()
        with ProcessPoolExecutor(
            max_workers=min(self.workers, len(tasks)),
            mp_context=context,
            initializer=_init_worker,
            initargs=(progress_queue,),
        ) as pool:
            pending = {pool.submit(_run_in_worker, task) for task in tasks}
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    _drain(progress_queue, report)
                    for future in done:
                        yield future.result()
                _drain(progress_queue, report)
            except BaseException:
                for future in pending:
                    future.cancel()
                raise


def _drain(progress_queue, report) -> None:
    while True:
        try:
            report(progress_queue.get_nowait())
        except queue.Empty:
            return
