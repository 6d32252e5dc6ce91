"""Run partitions on a Dask distributed cluster: one task per partition.

Without a scheduler address this starts a ``LocalCluster`` on 127.0.0.1 (worker processes with
one thread each, no dashboard); with one it joins that scheduler, which may run anywhere the
inputs and the output folder are reachable at the same paths (a shared filesystem), or where the
output (and the inputs) are in object storage: workers then write their shards to the bucket, and
fetch the tokenizer from it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterator

from .. import __version__
from ..errors import ObjcliError
from ..run.pipeline import PartitionResult, PartitionTask, Progress, run_partition
from ..storage.remote import is_url
from .base import partition_failed


def _absolute(task: PartitionTask) -> PartitionTask:
    """Workers may run in another directory: send them absolute paths."""
    partition = task.partition
    pieces = tuple(
        dataclasses.replace(p, input=dataclasses.replace(p.input, path=_absolute_path(p.input.path)))
        for p in partition.pieces
    )
    return dataclasses.replace(
        task,
        partition=dataclasses.replace(partition, pieces=pieces),
        config=dataclasses.replace(task.config, tokenizer=_absolute_path(task.config.tokenizer)),
        folder=_absolute_path(task.folder),
    )


def _absolute_path(path: str) -> str:
    return path if is_url(path) else os.path.abspath(path)


class DaskExecutor:
    name = "dask"

    def __init__(self, workers: int, scheduler: str | None = None):
        try:
            import dask  # noqa: F401
            import distributed  # noqa: F401
        except ImportError:
            raise ObjcliError("--executor dask needs Dask; install it with: pip install 'objcli[dask]'") from None
        self.workers = workers
        self.scheduler = scheduler
        self.cluster = None
        self.client = None

    def __enter__(self) -> DaskExecutor:
        import dask
        from dask.utils import parse_timedelta
        from distributed import Client, LocalCluster

        timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="s")
        if self.scheduler:
            try:
                self.client = Client(self.scheduler, timeout=timeout, set_as_default=False)
            except (OSError, TimeoutError, ValueError) as error:
                raise ObjcliError(
                    f"--scheduler {self.scheduler}: cannot reach a Dask scheduler ({_first_line(error)}); "
                    "start one with 'dask scheduler', or drop --scheduler to run a local cluster"
                ) from None
        else:
            self.cluster = LocalCluster(
                n_workers=self.workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                # A free port of its own: None still binds the scheduler's HTTP server to 8787, and a second
                # run on the machine then warns on stderr that the port is taken.
                dashboard_address=":0",
                silence_logs=logging.CRITICAL,  # a failed task is reported once, by us
            )
            self.client = Client(self.cluster, set_as_default=False)
        try:
            self._check_workers(timeout)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _check_workers(self, timeout: float) -> None:
        try:
            self.client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise ObjcliError(
                f"--scheduler {self.scheduler}: no Dask worker joined within {timeout:g}s; start workers with "
                f"'dask worker {self.scheduler}'"
            ) from None
        # ``eval`` travels by reference, so this probe needs nothing of objcli on the worker.
        found = self.client.run(eval, "__import__('objcli').__version__", on_error="return")
        for worker, version in sorted(found.items()):
            if version != __version__:
                problem = (
                    f"cannot import objcli ({version!r})"
                    if isinstance(version, BaseException)
                    else f"has objcli {version}"
                )
                raise ObjcliError(
                    f"Dask worker {worker} {problem}; install objcli {__version__} (pip install 'objcli[dask]') "
                    "in the environment every worker runs in"
                )

    def __exit__(self, *exc) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    def run(self, tasks: list[PartitionTask], report: Callable[[Progress], None]) -> Iterator[PartitionResult]:
        from distributed import as_completed

        tasks = [_absolute(t) for t in tasks]
        keys = [f"objcli-partition-{t.partition.index:05d}-{t.run_key[:12] or os.getpid()}" for t in tasks]
        futures = self.client.map(run_partition, tasks, key=keys, pure=False)
        task_of = dict(zip((f.key for f in futures), tasks))
        try:
            for future in as_completed(futures, loop=self.client.loop):
                task = task_of[future.key]
                if future.status != "finished":
                    raise partition_failed(task, future.exception())
                result = future.result()
                tokens = sum(s.tokens for s in result.shards)
                # Workers on other machines report when a partition is done: its input counts whole then.
                report(Progress(result.documents_read, result.text_bytes, tokens, task.partition.size))
                yield result
        finally:
            self.client.cancel(futures)


def _first_line(error: BaseException) -> str:
    return (str(error) or type(error).__name__).splitlines()[0]
