"""Work that a signal must be able to stop at once: a tokenizer trainer's C++ or Rust loop never returns
control to Python while it trains, so Python's SIGINT and SIGTERM handlers would wait for it (minutes).
The work runs in a forked child; the parent waits in Python, where Ctrl-C and SIGTERM arrive at once,
and kills the child (SIGKILL: the trainer ignores the others) before the one line is said."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading

from ..errors import ObjcliError

POLL_SECONDS = 0.2


def run_stoppable(work, *args):
    """``work(*args)`` in a forked child; its result (picklable) or its ``ObjcliError`` comes back. A
    KeyboardInterrupt (SIGINT, or SIGTERM as the CLI raises it) in the parent kills the child first."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, work, args, os.getpid()), daemon=True)
    child.start()
    send.close()
    try:
        while not receive.poll(POLL_SECONDS):  # signals run their handlers between two polls
            if not child.is_alive() and not receive.poll(0):
                raise ObjcliError(
                    f"the trainer stopped without a result (exit status {child.exitcode}: out of memory?); "
                    "train on fewer lines (--max-lines) or a smaller --vocab-size"
                )
        kind, value = receive.recv()
    except BaseException:
        child.kill()
        child.join()
        raise
    finally:
        receive.close()
    child.join()
    if kind == "error":
        raise ObjcliError(value)
    return value


def _child(send, work, args, parent: int) -> None:
    """The child ignores SIGINT (a terminal sends it to the whole group: the parent decides) and sends
    back its result or its error, one line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent)
    try:
        send.send(("done", work(*args)))
    except ObjcliError as error:
        send.send(("error", str(error)))
    except Exception as error:  # noqa: BLE001 - whatever the trainer raised, as one line
        first = str(error).splitlines()[0] if str(error) else ""
        send.send(("error", f"training failed ({type(error).__name__}: {first}); check the inputs and options"))
    finally:
        send.close()


def die_with_parent(parent: int | None = None) -> None:
    """Make this forked child die when its parent does, whatever killed the parent (``kill -9``, SIGHUP):
    on Linux the kernel sends SIGKILL (``PR_SET_PDEATHSIG``), elsewhere a thread watches for the parent
    to go. A trainer left running would write its model after its command ended."""
    parent = os.getppid() if parent is None else parent
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent:  # the parent went before the request was made
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
