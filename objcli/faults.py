"""Crash points for the resume tests: a real ``SIGKILL`` at a named moment of a run.

``OBJCLI_CRASH_AT=shard-write:3`` kills the process the third time it reaches ``shard-write``.
Unset (always, outside the tests), ``crash_point`` is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_reached: Counter = Counter()


def crash_point(name: str) -> None:
    wanted = os.environ.get("OBJCLI_CRASH_AT")
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _reached[name] += 1
    if _reached[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
