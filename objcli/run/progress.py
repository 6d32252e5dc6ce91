"""Progress a person can plan around: the phase, how far (bytes of input, or shards, against the
total), the rate and the time left, on a terminal as one tqdm bar; in a log (``OBJCLI_PROGRESS=lines``,
or ``=SECONDS`` for the interval) as a line every so often with the percentage and the time left;
nothing when standard error is not a terminal, or with ``--quiet``. An unknown total (standard input,
a pipe) shows a counter that climbs, as before.

The command line decides once (``configure``); library calls make their phases with ``phase(...)``,
which is silent unless a command turned progress on, so the API and the tests print nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

_MODE: str | None = None  # "bar", "lines" or None
_INTERVAL = 30.0  # seconds between lines in "lines" mode


def configure(quiet: bool) -> str | None:
    """The progress mode for this command: ``OBJCLI_PROGRESS`` (``lines``, a number of seconds, or
    ``off``) first, then a bar when standard error is a terminal; never with ``--quiet``."""
    global _MODE, _INTERVAL
    wanted = os.environ.get("OBJCLI_PROGRESS", "").strip().lower()
    if wanted not in ("", "auto", "bar", "lines", "off", "0", "no", "none") and not _is_number(wanted):
        from ..errors import ObjcliError

        raise ObjcliError(
            f"OBJCLI_PROGRESS={os.environ['OBJCLI_PROGRESS']!r}: not a progress setting; set it to lines, "
            "a number of seconds between lines, bar, off or auto (or unset it)"
        )
    if quiet or wanted in ("off", "0", "no", "none"):
        _MODE = None
    elif wanted == "lines" or _is_number(wanted):
        _MODE = "lines"
        _INTERVAL = float(wanted) if _is_number(wanted) else 30.0
    else:
        _MODE = "bar" if wanted == "bar" or sys.stderr.isatty() else None
    return _MODE


def _is_number(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


def phase(name: str, total: int | None, unit: str = "B", done: int = 0) -> Display:
    """A phase of a command: ``total`` units (None: unknown), ``done`` of them already (a resumed run)."""
    if _MODE == "bar":
        return _Bar(name, total, unit, done)
    if _MODE == "lines":
        return _Lines(name, total, unit, done)
    return Display()


class Display:
    """Silent: what a phase shows when progress is off."""

    def update(self, amount: int, note: str = "") -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Bar(Display):
    def __init__(self, name: str, total: int | None, unit: str, done: int):
        from tqdm import tqdm

        scaled = unit == "B"
        # A terminal that reports no size (a bare pseudo-terminal, a serial console) would get a bar of no
        # width on no line, which tqdm hides: use $COLUMNS and $LINES, or 80 by 24.
        sized = _terminal_width() > 0
        fallback = shutil.get_terminal_size()
        self.bar = tqdm(
            desc=name,
            total=total,
            initial=done,
            unit=unit if scaled else f" {unit}",
            unit_scale=scaled,
            unit_divisor=1000,
            file=sys.stderr,
            dynamic_ncols=sized,
            smoothing=0.1,
            ncols=None if sized else fallback.columns,
            nrows=None if sized else fallback.lines,
        )

    def update(self, amount: int, note: str = "") -> None:
        if self.bar.disable:  # closed: it reached its total
            return
        if note:
            self.bar.set_postfix_str(note, refresh=False)
        self.bar.update(amount)
        if self.bar.total and self.bar.n >= self.bar.total:
            self.close()

    def close(self) -> None:
        self.bar.close()


class _Lines(Display):
    """One line every ``_INTERVAL`` seconds and at the end: ``objcli NAME: 42% (1.2 of 2.9 GB), 35 MB/s, 0:48 left``."""

    def __init__(self, name: str, total: int | None, unit: str, done: int):
        self.name, self.total, self.unit, self.done = name, total, unit, done
        self.started, self.first, self.last = time.monotonic(), done, time.monotonic()
        self.note = ""
        self.closed = False

    def update(self, amount: int, note: str = "") -> None:
        if self.closed:
            return
        self.done += amount
        self.note = note or self.note
        if self.total and self.done >= self.total:
            self.close()
        elif time.monotonic() - self.last >= _INTERVAL:
            self._write()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._write()

    def _write(self) -> None:
        self.last = time.monotonic()
        elapsed = max(self.last - self.started, 1e-9)
        rate = (self.done - self.first) / elapsed
        how_far = f"{_amount(self.done, self.unit)}"
        if self.total:
            left = (self.total - self.done) / rate if rate > 0 else float("inf")
            how_far = (
                f"{100 * self.done / self.total:.0f}% ({_amount(self.done, self.unit)} of "
                f"{_amount(self.total, self.unit)}), {_amount(rate, self.unit)}/s, {_clock(left)} left"
            )
        note = f", {self.note}" if self.note else ""
        sys.stderr.write(f"objcli {self.name}: {how_far}{note}\n")
        sys.stderr.flush()


def _terminal_width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 0


def _amount(value: float, unit: str) -> str:
    if unit != "B":
        return f"{value:,.0f} {unit}"
    for scale, name in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if value >= scale:
            return f"{value / scale:.1f} {name}"
    return f"{value:.0f} B"


def _clock(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
