"""Run partitions in this process, or in a pool of worker processes."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import multiprocessing
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from ..errors import ObjcliError
from ..run.affinity import ThreadPinner, cores_to_pin, pin_process
from ..run.pipeline import PartitionResult, PartitionTask, Progress, run_partition
from ..storage.faults import crash_point, mark_worker
from .base import partition_failed

IN_FLIGHT = 4  # tasks submitted ahead for each worker: none waits on the parent for its next

_progress_queue = None
_process_pools: list[ProcessPoolExecutor] = []  # the process pools running in this process now


def process_pool_running() -> bool:
    """Whether a process pool runs here now: a stop (SIGTERM) then goes through its bookkeeping, which
    can wait on a lock the interrupted main thread held (a thread pool's stop waits for its partitions)."""
    return bool(_process_pools)


def _init_worker(progress_queue, parent: int | None, cores: list[int] | None = None, started=None) -> None:
    global _progress_queue
    _progress_queue = progress_queue
    mark_worker()
    if parent is None:
        _release_fork_server()
    _exit_with_parent(parent)
    pin_process(cores, started)


def _release_fork_server() -> None:
    """A worker of the fork server holds the write end of the pipe by which the server learns that
    every process using it is gone; closed here, the server exits when the main process does (killed
    too), and the kernel then ends the workers (their parent-death signal). This worker starts no
    processes of its own, which is all the pipe is for."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        os.close(fd)
        server._forkserver_alive_fd = None


def _exit_with_parent(parent: int | None) -> None:
    """A worker must not outlive the run that started it (a killed main process left its workers
    running for minutes): on Linux the kernel sends SIGTERM when the parent dies; if it died
    before this line ran, exit now. A worker of the fork server has the server as its parent, which
    exits when the main process does (``parent`` None: orphaned means adopted by init)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if os.getppid() != parent if parent is not None else os.getppid() == 1:
        os._exit(1)


def _process_context(tasks: list[PartitionTask]):
    """Where workers come from: Linux forks them from a server that has imported objcli and loaded
    the run's tokenizer (``preload.py``), started by ``start_fork_server`` or on the first pool's
    first worker; elsewhere they are spawned. Forking from the server, not from this process, keeps
    the parent's threads (the tokenizers' pools, the progress bar) out of the workers."""
    config = tasks[0].config
    context = _fork_context(config.tokenizer, config.engine, compiled_kernels(config))
    return (context, None) if context is not None else (multiprocessing.get_context("spawn"), os.getpid())


def compiled_kernels(config) -> str:
    """The compiled kernels a run calls (its objective names them), for its fork server to load once."""
    from ..objectives import REGISTRY

    return ",".join(REGISTRY.named(config.objective).compiled_kernels(config.objective_options))


def _fork_context(tokenizer: str, engine: str, compiled: str):
    """The fork server's context, with what it preloads (read when it starts: a server already
    running keeps what it loaded); None where there is no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["objcli.executors.preload"])  # no effect once the server runs
    os.environ["OBJCLI_PRELOAD_TOKENIZER"] = f"{tokenizer}\t{engine}"
    os.environ["OBJCLI_PRELOAD_COMPILED"] = compiled
    return context


def start_fork_server(tokenizer: str, compiled: str, engine: str = "auto") -> None:
    """Start the fork server now, before the main process loads and probes the tokenizer: both load
    it at once (a 128k tokenizer.json takes 0.5 s, objcli's imports 0.3 s, numba's 0.4 s), and the
    pool that connects later forks its workers at once. The run's engine is not chosen yet: the
    server opens the tokenizer (``engine``: "reference" for a run that encodes nothing, which takes it),
    and each worker gives it the engine its task names."""
    if _fork_context(tokenizer, engine, compiled) is not None:
        from multiprocessing import forkserver, resource_tracker

        # The server must start with SIGINT blocked (a Ctrl-C during its imports printed a traceback;
        # its workers inherit the mask). The resource tracker's own start unblocks SIGINT when it is
        # done, so it starts first, outside the block (the pool's Queue starts it otherwise).
        resource_tracker.ensure_running()
        with _workers_ignore_sigint():
            forkserver.ensure_running()


STOPS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _workers_ignore_sigint() -> Iterator[None]:
    """Workers started inside this block start with SIGINT blocked (a thread's signal mask survives
    fork and exec, and Python does not unblock it). Ctrl-C reaches the whole process group: without
    this each worker, even one still importing, printed its own KeyboardInterrupt traceback. The
    main process alone handles it, and stops the workers. A Ctrl-C during the block is held until
    its end, never lost: interrupting a spawn halfway would leave a child reading half its start-up
    data (another traceback)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGTERM is held by its handler only, never masked: a mask would pass to the workers, which
    # must die of SIGTERM (PR_SET_PDEATHSIG, terminate()).
    with _stops_held():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _stops_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held while this thread is inside ``concurrent.futures.wait`` (or a pool
    starts its workers), and handed to their own handlers (the CLI's one line, a caller's own, the
    default, or none where it is ignored) as it returns. Raised inside the wait, between taking one
    future's lock and the next, the KeyboardInterrupt left locks taken that the pool's manager thread
    then waited for, forever, and the pool's shutdown with it (a Ctrl-C in a loaded CI run printed
    nothing for 120 s; a SIGTERM, once in twenty loaded runs). The wait returns within its timeout,
    so a stop is late by that at most."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    # A handler not set from Python (an embedding program's: getsignal says None) cannot be put back: left.
    held = [signum for signum in STOPS if signal.getsignal(signum) is not None]
    previous = [(signum, signal.signal(signum, lambda signum, _: caught.append(signum))) for signum in held]
    # Each handler put back even where one put back runs at once and raises (ExitStack runs every callback).
    with contextlib.ExitStack() as restore:
        for signum, handler in previous:
            restore.callback(signal.signal, signum, handler)
        yield
    if caught:
        signal.raise_signal(caught[0])  # its handler runs here: raises, ends the process, or ignores it


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """On Ctrl-C, stop now rather than wait for the running partitions (a rerun resumes them)."""
    # ``_processes`` (pid -> Process) has been the pool's worker table since Python 3.2.
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def _run_in_worker(task: PartitionTask) -> PartitionResult:
    return run_partition(task, report=_progress_queue.put)


POOLS = ("auto", "threads", "processes")


class LocalExecutor:
    """``workers == 1``, or a single task: run in this thread. Otherwise a pool of threads (the
    tokenizers release the GIL, and threads start at no cost and share one loaded tokenizer) or of
    processes (forked from a server that has objcli and the tokenizer loaded, so no worker inherits
    this process's threads; better where an objective does much of its work in Python, holding
    the GIL)."""

    name = "local"

    def __init__(self, workers: int, pool: str = "threads"):
        if pool not in ("threads", "processes"):
            raise ValueError(pool)
        self.workers = workers
        self.pool = pool

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def run(self, tasks: list[PartitionTask], report: Callable[[Progress], None]) -> Iterator[PartitionResult]:
        if self.workers == 1 or len(tasks) <= 1:
            for task in tasks:
                try:
                    result = run_partition(task, report)
                except Exception as error:
                    raise partition_failed(task, error) from error
                yield result
            return
        workers = min(self.workers, len(tasks))
        cores = cores_to_pin(workers)  # a core for each worker where they fill every core (affinity.py)
        if self.pool == "threads":
            progress_queue = queue.SimpleQueue()  # progress reaches ``report`` in this thread only
            pinner = ThreadPinner(cores) if cores else None
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="objcli-partition", initializer=pinner)
            submit = lambda task: pool.submit(run_partition, task, progress_queue.put)  # noqa: E731
        else:
            context, parent = _process_context(tasks)
            progress_queue = context.Queue()
            initargs = (progress_queue, parent, cores, context.Value("i", 0) if cores else None)
            pool = ProcessPoolExecutor(
                max_workers=workers, mp_context=context, initializer=_init_worker, initargs=initargs
            )
            submit = lambda task: pool.submit(_run_in_worker, task)  # noqa: E731
        processes = [pool] if isinstance(pool, ProcessPoolExecutor) else []
        light = bool(processes) and tasks[0].config.format.packs_positions  # a plan's partitions: _while_workers_start
        here = (lambda task: _run_here(task, report)) if light else None  # noqa: E731
        _process_pools.extend(processes)
        with pool, _removed_after(processes):
            task_of = {}
            try:
                for future in _in_flight(submit, tasks, workers * IN_FLIGHT, task_of, progress_queue, report, here):
                    yield _result(future, task_of[future])
                _drain(progress_queue, report)
            except BaseException as error:
                if isinstance(error, KeyboardInterrupt) and isinstance(pool, ProcessPoolExecutor):
                    crash_point("stopping")
                    _stop_workers(pool)  # the pool then fails every pending future itself: no cancel, or
                    raise  # it would fail a cancelled one (InvalidStateError in its manager thread)
                for future in task_of:
                    future.cancel()
                raise


def _in_flight(submit, tasks: list, window: int, task_of: dict, progress_queue, report, here=None) -> Iterator:
    """Each task's future as it completes, at most ``window`` submitted and not yet done: a wait over the
    futures in flight, not over every task of the run (a wait each completion over all of them made a run of
    thousands of partitions quadratic in the main process). ``task_of`` gains each future's task. ``here``:
    runs a task in this process, while a process pool's workers start (``_while_workers_start``)."""
    queued, pending = collections.deque(tasks), set()
    if here is not None and len(queued) > window:
        yield from _while_workers_start(submit, queued, window, task_of, pending, here)
    while True:
        with _workers_ignore_sigint():  # process pools spawn their workers on submit
            while queued and len(pending) < window:
                task = queued.popleft()
                future = submit(task)
                task_of[future] = task
                pending.add(future)
        if not pending:
            return
        with _stops_held():
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
        _drain(progress_queue, report)
        yield from done


def _while_workers_start(submit, queued, window: int, task_of: dict, pending: set, here) -> Iterator:
    """A process pool's first ``window`` tasks submitted from a thread: a submit starts a worker, which waits
    for the fork server to import objcli and load the tokenizer (0.2-0.5 s, on another core). Meanwhile this
    process runs tasks from the end of ``queued``, which the pool would run last (a 1 GB chat plan on 2 cores:
    the main process idle 0.18 s of 1.1); once the workers have started, the pool takes the rest. Only a plan
    run's tasks: a plan's partition holds its documents' lengths (7 MB more at this process's peak), an Arrow
    run's its rows (a chat run over 1 GB: 90 -> 352 MB, for an even wall)."""
    first, failed = [queued.popleft() for _ in range(window)], []

    def start() -> None:
        if hasattr(signal, "pthread_sigmask"):  # workers spawned from this thread ignore Ctrl-C (as
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # _workers_ignore_sigint makes them)
        try:
            for task in first:
                future = submit(task)
                task_of[future] = task
                pending.add(future)
        except BaseException as error:  # noqa: BLE001 - raised in the main thread, below
            failed.append(error)

    starter = threading.Thread(target=start, name="objcli-pool-start", daemon=True)
    starter.start()
    try:
        while starter.is_alive() and queued:
            task = queued.pop()
            future = here(task)
            task_of[future] = task
            yield future
    finally:
        starter.join()  # every worker started is in the pool's table, for a stop to end
    if failed:
        raise failed[0]


def _run_here(task: PartitionTask, report) -> Future:
    """A task run in this process, as a done future (its result, or the exception it raised)."""
    future = Future()
    try:
        future.set_result(run_partition(task, report))
    except Exception as error:  # noqa: BLE001 - handed to ``_result``, as a worker's error is
        future.set_exception(error)
    return future


@contextlib.contextmanager
def _removed_after(pools: list) -> Iterator[None]:
    try:
        yield
    finally:
        for pool in pools:
            _process_pools.remove(pool)


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
