"""Crash points for the resume tests: a real ``SIGKILL`` at a named moment of a run.

``OBJCLI_CRASH_AT=shard-write:3`` kills the process the third time it reaches ``shard-write``;
``OBJCLI_CRASH_AT=shuffle-bucket:1:ENOSPC`` raises that OS error there instead (a disk that fills up
at that moment); ``OBJCLI_CRASH_AT=stopping:1:HANG`` never returns (a stop that hangs). Unset (always,
outside the tests), ``crash_point`` is one dictionary lookup.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from collections import Counter

_reached: Counter = Counter()


def crash_point(name: str) -> None:
    wanted = os.environ.get("OBJCLI_CRASH_AT")
    if not wanted:
        return
    point, _, rest = wanted.partition(":")
    if point != name:
        return
    nth, _, error = rest.partition(":")
    _reached[name] += 1
    if _reached[name] == int(nth or 1):
        if error == "HANG":  # a stop that never ends (the SIGTERM grace test)
            threading.Event().wait()
        if error:
            number = getattr(errno, error)
            raise OSError(number, os.strerror(number))
        os.kill(os.getpid(), signal.SIGKILL)
