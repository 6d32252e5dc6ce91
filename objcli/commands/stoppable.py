"""Work that a signal must be able to stop at once: a tokenizer trainer's C++ or Rust loop never returns
control to Python while it trains, so Python's SIGINT and SIGTERM handlers would wait for it (minutes).
The work runs in a forked child; the parent waits in Python, where Ctrl-C and SIGTERM arrive at once,
and kills the child (SIGKILL: the trainer ignores the others) before the one line is said."""

from __future__ import annotations

import multiprocessing
import signal

from ..errors import ObjcliError

POLL_SECONDS = 0.2


def run_stoppable(work, *args):
    """``work(*args)`` in a forked child; its result (picklable) or its ``ObjcliError`` comes back. A
    KeyboardInterrupt (SIGINT, or SIGTERM as the CLI raises it) in the parent kills the child first."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, work, args), daemon=True)
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


def _child(send, work, args) -> None:
    """The child ignores SIGINT (a terminal sends it to the whole group: the parent decides) and sends
    back its result or its error, one line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        send.send(("done", work(*args)))
    except ObjcliError as error:
        send.send(("error", str(error)))
    except Exception as error:  # noqa: BLE001 - whatever the trainer raised, as one line
        first = str(error).splitlines()[0] if str(error) else ""
        send.send(("error", f"training failed ({type(error).__name__}: {first}); check the inputs and options"))
    finally:
        send.close()
