"""A ``.json`` file holding one array of records (``[{...}, {...}]``, how Alpaca and many chat
datasets ship), read as records with the same accounting as JSON lines.

The array is never parsed into Python objects here. A byte scan over each chunk (NumPy, no loop
per byte or element) finds the array's own commas, those outside strings at nesting depth one, and
turns the chunk into JSON lines: each element's bytes exactly as written, one element a line (a
newline inside an element is whitespace outside strings, made a space; inside a string a raw
newline is invalid JSON and stays invalid as a control byte). The JSON-lines decoder then reads
each element as it reads a line, so every value (an integer past 64 bits, a lone surrogate escape,
nesting of any depth) gets the verdict it gets in a ``.jsonl`` file, memory holds one batch
however deep the nesting, and standard input reads like a file. Only damage to the array itself
(bytes cut off, an empty element, data after its end) ends the file: one ``bad_json`` skip at the
element where it breaks, as nothing after it can be found again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

CHUNK_BYTES = 1 << 20
_SPACE, _NEWLINE, _CONTROL = 32, 10, 1
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[9, 10, 13, 32]] = True


class ElementLocator:
    """Names a record of the array by its position (``file element 3``, counted from 1 as lines are)."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self, index: int) -> str:
        return f"{self.path} element {index + 1}"


class BrokenArray(Exception):
    def __init__(self, element: int, detail: str):
        super().__init__(detail)
        self.element = element


class ArrayScanner:
    """Turns the chunks of one JSON array into JSON lines, one element a line; what a chunk leaves
    open (a string, a backslash run, the nesting depth, whether the element holds anything) is
    carried to the next."""

    def __init__(self):
        self.in_string = False
        self.backslashes = 0  # the run of backslashes that ended the previous chunk
        self.depth = 0
        self.phase = "before"  # before the '[', "inside" the array, "after" its ']'
        self.elements = 0  # elements ended by a comma so far
        self.content = False  # the open element holds a non-space byte

    def feed(self, chunk: bytes) -> tuple[bytes, BrokenArray | None]:
        """The chunk as JSON lines (the same length, every finished element ended by a newline), or
        with a damage: its part up to the last whole element, and the damage."""
        a = np.frombuffer(chunk, dtype=np.uint8).copy()
        inside = self._strings(a)
        outside = ~inside & (a != ord('"'))
        step = (outside & ((a == ord("[")) | (a == ord("{")))).astype(np.int32)
        step -= outside & ((a == ord("]")) | (a == ord("}")))
        depth_after = self.depth + np.cumsum(step, dtype=np.int64)
        newline = a == _NEWLINE
        a[newline & ~inside] = _SPACE
        a[newline & inside] = _CONTROL
        if self.phase == "after":
            return self._after(a, -1)
        start = 0
        if self.phase == "before":
            found = np.flatnonzero(~_WHITESPACE[a])
            if not found.size:
                return a.tobytes(), None
            start = int(found[0])
            if a[start] != ord("["):
                return b"", BrokenArray(0, "the file does not hold a JSON array")
            a[: start + 1] = _SPACE
            self.phase, start = "inside", start + 1
        closes = np.flatnonzero(depth_after[start:] <= 0)
        end = start + int(closes[0]) if closes.size else len(a)
        self.depth = 0 if closes.size else int(depth_after[-1])
        region = slice(start, end)
        commas = start + np.flatnonzero(outside[region] & (a[region] == ord(",")) & (depth_after[region] == 1))
        filled = self._filled_segments(a, start, end, commas)
        empty = np.flatnonzero(~filled[:-1])
        if empty.size:  # a comma ends an element with nothing in it: [1,,2]
            j = int(empty[0])
            a[commas[:j]] = _NEWLINE
            self.elements += j
            return a[: int(commas[j - 1]) + 1 if j else start].tobytes(), BrokenArray(self.elements, "an empty element")
        a[commas] = _NEWLINE
        self.elements += len(commas)
        self.content = bool(filled[-1])
        if not closes.size:
            return a.tobytes(), None
        if self.content:  # the last element ends at the ']'
            a[end] = _NEWLINE
            self.elements += 1
        elif len(commas) or self.elements:  # a comma before the ']': [1,]
            return a[:end].tobytes(), BrokenArray(self.elements, "an empty element")
        else:
            a[end] = _SPACE  # []: no element
        return self._after(a, end)

    def finish(self) -> BrokenArray | None:
        """Where the array is left unfinished at the end of the file, if it is."""
        if self.phase == "after":
            return None
        return BrokenArray(self.elements, "the file ends inside the array" if self.phase == "inside" else "no array")

    def _strings(self, a: np.ndarray) -> np.ndarray:
        """Which bytes lie inside a string: quotes not escaped by an odd run of backslashes toggle."""
        n = len(a)
        if not n:
            return np.zeros(0, dtype=bool)
        backslash = a == ord("\\")
        last_other = np.maximum.accumulate(np.where(backslash, -1, np.arange(n)))
        quotes = np.flatnonzero(a == ord('"'))
        before = np.maximum(quotes - 1, 0)
        run = np.where(quotes > 0, quotes - 1 - last_other[before], 0)
        reaches_start = (quotes == 0) | (last_other[before] == -1)
        run = run + np.where(reaches_start, self.backslashes, 0)
        toggles = np.zeros(n, dtype=np.int32)
        toggles[quotes[run % 2 == 0]] = 1
        parity = (np.cumsum(toggles, dtype=np.int64) + self.in_string) & 1
        self.in_string = bool(parity[-1])
        tail = n - 1 - int(last_other[-1])
        self.backslashes = tail + (self.backslashes if last_other[-1] == -1 else 0)
        return parity.astype(bool)

    def _filled_segments(self, a: np.ndarray, start: int, end: int, commas: np.ndarray) -> np.ndarray:
        """For each piece between the region's start, its commas and its end: whether it holds a
        non-space byte (the first piece continues the open element)."""
        counts = np.concatenate(([0], np.cumsum(~_WHITESPACE[a[start:end]], dtype=np.int64)))
        bounds = np.concatenate(([0], commas - start, [end - start]))
        after = np.concatenate(([0], commas - start + 1, [end - start]))
        filled = counts[bounds[1:]] - counts[after[:-1]] > 0
        filled[0] |= self.content
        return filled

    def _after(self, a: np.ndarray, end: int) -> tuple[bytes, BrokenArray | None]:
        """The array's ']' (at ``end``) and what follows it: only whitespace may."""
        self.phase = "after"
        extra = np.flatnonzero(~_WHITESPACE[a[end + 1 :]])
        if extra.size:
            return a[: end + 1].tobytes(), BrokenArray(self.elements, "data after the end of the array")
        a[end + 1 :] = _SPACE
        return a.tobytes(), None


def array_blocks(stream: BinaryIO, batch_bytes: int, log, locator: ElementLocator) -> Iterator[tuple[int, bytes]]:
    """(index of the first element, its elements as JSON lines) in blocks of about ``batch_bytes``.
    Damage to the array is one ``bad_json`` skip at the element where it breaks; the rest of the
    file is unread."""
    scanner = ArrayScanner()
    pending: list[bytes] = []
    size = first = 0
    broken = None
    while broken is None:
        chunk = stream.read(min(batch_bytes, CHUNK_BYTES))
        if not chunk:
            broken = scanner.finish()
            break
        lines, broken = scanner.feed(chunk)
        pending.append(lines)
        size += len(lines)
        if size >= batch_bytes:
            joined = b"".join(pending)
            cut = joined.rfind(b"\n")
            if cut >= 0:
                yield first, joined[:cut]
                first += joined.count(b"\n", 0, cut) + 1
                pending, size = [joined[cut + 1 :]], len(joined) - cut - 1
            else:
                pending = [joined]
    rest = b"".join(pending)
    if broken is not None:
        # The open element is the damaged one: the elements before it are whole.
        cut = rest.rfind(b"\n")
        rest = rest[:cut] if cut >= 0 else b""
    if rest.strip():
        yield first, rest
    if broken is not None:
        log.read += 1
        log.skip(
            "bad_json", locator(broken.element), f"broken JSON in the array ({broken}); the rest of the file is unread"
        )
