"""Crash points for the resume tests: a real ``SIGKILL`` at a named moment of a run.

``OBJCLI_CRASH_AT=shard-write:3`` kills the process the third time it reaches ``shard-write``;
``OBJCLI_CRASH_AT=shuffle-bucket:1:ENOSPC`` raises that OS error there instead (a disk that fills up
at that moment); ``OBJCLI_CRASH_AT=stopping:1:HANG`` never returns (a stop that hangs);
``OBJCLI_CRASH_AT=shard-write:2:WORKER`` kills a process pool's worker only (the main process runs tasks too,
while the pool starts). Unset (always, outside the tests), ``crash_point`` is one dictionary lookup.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from collections import Counter

_reached: Counter = Counter()
_in_worker = False  # this process is a process pool's worker (executors/local.py says so as it starts)


def mark_worker() -> None:
    global _in_worker
    _in_worker = True


def crash_point(name: str) -> None:
    wanted = os.environ.get("OBJCLI_CRASH_AT")
    if not wanted:
        return
    point, _, rest = wanted.partition(":")
    if point != name:
        return
    nth, _, error = rest.partition(":")
    if error == "WORKER" and not _in_worker:
        return
    _reached[name] += 1
    if _reached[name] == int(nth or 1):
        if error == "HANG":  # a stop that never ends (the SIGTERM grace test)
            threading.Event().wait()
        if error and error != "WORKER":
            number = getattr(errno, error)
            raise OSError(number, os.strerror(number))
        os.kill(os.getpid(), signal.SIGKILL)
