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
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - for the process's life


def _no_blas_threads() -> None:
    """objcli does no linear algebra, but NumPy's OpenBLAS starts a thread a core at import, and they
    spin for a while: 0.06-0.12 s of CPU in every process (a core each on many-core machines) for
    nothing. One thread unless the user asked for more; set before NumPy is first imported."""
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def run() -> None:
    _closed_streams_to_devnull()
    _no_blas_threads()
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
