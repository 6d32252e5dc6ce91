"""The ``objcli`` command (and ``python -m objcli``).

Importing the command line takes a moment (Click, NumPy, PyArrow); a Ctrl-C that lands during the
import is the same one line as one that lands during a run, not an import traceback.
"""

import gc
import signal
import sys


def _closed_streams_to_devnull() -> None:
    """A command started with standard error (or output) closed (``2>&-``) gets None for it from
    Python: what it would have printed goes to /dev/null instead, and the run's status is the run's."""
    import os

    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the process's life
            stream.closed_at_start = True  # what needs the stream (rows to -o -) refuses to run
            setattr(sys, name, stream)


def _no_blas_threads() -> None:
    """objcli does no linear algebra, but NumPy's OpenBLAS starts a thread a core at import, and they
    spin for a while: 0.06-0.12 s of CPU in every process (a core each on many-core machines) for
    nothing. One thread unless the user asked for more; set before NumPy is first imported."""
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# glibc's malloc for a run that makes and frees arrays of a few MB many times a second on each thread:
# arrays up to 32 MB (the most glibc allows) from the heap, never a fresh mapping, and up to 256 MB of
# freed heap kept rather than handed back, so the next batch's arrays find their pages already there.
# By default the heap's top is trimmed at twice the last freed mapping's size, and a worker thread's
# arena gives its pages back and faults them in again batch after batch: 0.3-1.8 s of system time a
# run (performance.md, issue 73's sixth round: up to 18 % of the wall; peak memory 5-16 % higher).
MALLOC_TUNABLES = {"mmap_threshold": 32 << 20, "trim_threshold": 256 << 20}
_MALLOPT = {"mmap_threshold": -3, "trim_threshold": -1}  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD (malloc.h)


def _kept_heap() -> bool:
    """Tune glibc's malloc for this process (``mallopt``) and the ones the run starts (a pool's fork
    server, Dask's local workers read ``GLIBC_TUNABLES`` at their start), unless the user set their own
    (``GLIBC_TUNABLES=`` or ``MALLOC_*_`` in the environment, even empty). Whether it was applied."""
    import os

    if "GLIBC_TUNABLES" in os.environ or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc's: another C library (musl, macOS) has its own allocator
    except (OSError, AttributeError, TypeError):  # TypeError: Windows, where no library is the process
        return False
    os.environ["GLIBC_TUNABLES"] = ":".join(f"glibc.malloc.{k}={v}" for k, v in MALLOC_TUNABLES.items())
    return all(libc.mallopt(_MALLOPT[k], v) == 1 for k, v in MALLOC_TUNABLES.items())


def run() -> None:
    _closed_streams_to_devnull()
    _no_blas_threads()
    _kept_heap()
    try:
        from .cli import main
    except KeyboardInterrupt:
        from .errors import INTERRUPTED

        sys.stderr.write(f"Error: {INTERRUPTED}\n")
        sys.exit(130)
    try:
        main()
    finally:
        # The run is done and reported: a Ctrl-C now, while the interpreter shuts down (the pool's
        # finalizers, the fork server), would only print an "Exception ignored" traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # The interpreter's last collection would walk every object the command loaded (0.12-0.15 s
        # of a run's wall, measured): frozen, they are left to the process's end, which frees them all.
        gc.freeze()


if __name__ == "__main__":
    run()
