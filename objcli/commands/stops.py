"""How a command stops: Ctrl-C and SIGTERM as one line and a shell's exit status (130, 143), a process
pool's stop given a grace, and a closed pipe on standard output as the end Unix tools make (141)."""

from __future__ import annotations

import os
import sys

import click

from ..errors import INTERRUPTED


class Interrupted(click.ClickException):
    exit_code = 130  # as a shell reports a command stopped by SIGINT


class TerminatedLine(click.ClickException):
    exit_code = 143  # as a shell reports a command stopped by SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's stop, ``kill``), handled as Ctrl-C is: workers stopped, the lock
    released, one line; the default action left the pool's semaphores to a warning of their own."""


TERMINATED = INTERRUPTED.replace("interrupted", "terminated (SIGTERM)", 1)
said: list[bool] = []  # the terminated line went to Click to print


def raise_terminated(signum, frame):
    from ..executors.local import process_pool_running

    if process_pool_running():
        end_after_grace()
    raise Terminated


def end_after_grace() -> None:
    """A stop that hangs must not keep a job a scheduler stopped: a process pool's stop (workers stopped,
    the lock released) gets ``OBJCLI_STOP_GRACE_S`` seconds (30), then the line is said, if it was not, and
    the process ends with 143; multiprocessing's resource tracker then unlinks the pool's semaphores, and
    says so. (A thread pool's stop waits for its running partitions, however long they take.) The hang
    once seen (a signal raised inside ``concurrent.futures.wait`` left futures' locks taken) is closed
    where it began (``executors.local._stops_held``); the grace stays for a stop that hangs elsewhere."""
    import threading

    def end() -> None:
        if not said:
            sys.stderr.write(f"Error: {TERMINATED}\n")
            sys.stderr.flush()
        os._exit(143)

    timer = threading.Timer(float(os.environ.get("OBJCLI_STOP_GRACE_S") or 30), end)
    timer.daemon = True
    timer.start()


def reader_went_away() -> None:
    """Standard output's reader stopped reading (``objcli inspect OUT | head``): stop quietly with the
    status a shell gives a command ended by SIGPIPE, as Unix tools do; nothing is wrong with the output.
    Standard output goes to /dev/null first, so that the interpreter's last flush finds no pipe."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(141)
