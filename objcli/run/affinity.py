"""A core of its own for each worker, where the run's workers fill every core it may use.

Why: an engine that starts threads of its own inside one call (``tokenizers`` 1.0's helper threads,
sized from the cores the calling thread may run on) helps a lone worker with idle cores beside it,
but where every core already has a worker its threads only compete with them: on 2 cores, 2
workers each pinned to a core ran clm on the held-out corpus in 2.33 s against 2.59 s free (18.3
against 20.1 ms of CPU per MB, 310 against 338 MiB; the engine then encodes in the calling thread),
and SentencePiece, which starts no threads, alike or a few % faster (objcli/docs/performance.md).
With fewer workers than cores nothing is pinned: the engine's threads, and the scheduler, use the
idle cores.

Worker k (in the order the pool starts them) takes the k-th core of those this process may use, so
two runs side by side each put one worker on every core, as they would unpinned. A batch that is
to be encoded with more than one thread (a partition left running with fewer beside it, at the end
of a run: ``pipeline.encode_threads``) is encoded with the worker free again (``free_for``), so the
engine's threads can use the cores the finished workers left. ``OBJCLI_PIN_WORKERS=0`` leaves every
worker free. The bytes written do not depend on any of it.
"""

from __future__ import annotations

import itertools
import os
import threading
from contextlib import contextmanager

_pinned = threading.local()  # .cores: what the calling thread may use unpinned, where it is pinned


def allowed_cores() -> list[int]:
    """The cores this thread may run on (all of the machine's where the system cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def cores_to_pin(workers: int) -> list[int] | None:
    """The cores to hand out, in order, where ``workers`` fill them all; else None."""
    if os.environ.get("OBJCLI_PIN_WORKERS", "") == "0" or not hasattr(os, "sched_setaffinity"):
        return None
    cores = allowed_cores()
    return cores if 1 < len(cores) <= workers else None


def pin_to(cores: list[int], index: int) -> None:
    """The calling thread (the process, for a worker process's main thread) to one core."""
    try:
        os.sched_setaffinity(0, {cores[index % len(cores)]})
        _pinned.cores = cores
    except OSError:  # the core was taken away since (a cgroup's cpuset changed): stay free
        pass


@contextmanager
def free_for(threads: int):
    """The calling worker free to run on all its cores for the block, where it is pinned and the
    block asks for more than one thread (its engine's threads start from it and inherit where it
    may run); back on its core after."""
    cores = getattr(_pinned, "cores", None)
    if threads <= 1 or cores is None:
        yield
        return
    own = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cores)
    except OSError:  # a core taken away since: the batch runs where the worker is
        own = None
    try:
        yield
    finally:
        if own is not None:
            os.sched_setaffinity(0, own)


class ThreadPinner:
    """A thread pool's initializer: each new worker thread takes the next core."""

    def __init__(self, cores: list[int]):
        self.cores = cores
        self.started = itertools.count()  # next() on a count is atomic under the GIL

    def __call__(self) -> None:
        pin_to(self.cores, next(self.started))


def pin_process(cores: list[int] | None, started) -> None:
    """In a worker process: take the next core, counted in ``started`` (a shared
    ``multiprocessing.Value``) across the pool's processes."""
    if cores is None:
        return
    with started.get_lock():
        index = started.value
        started.value += 1
    pin_to(cores, index)
