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

CHUNK_BYTES = 1 << 16  # the scan's temporaries (about 30 bytes a byte) stay under two batches
_SPACE, _NEWLINE, _CONTROL = 32, 10, 1
_STEP = np.zeros(256, dtype=np.int64)  # what a structural byte does to the nesting depth
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
_BACKSLASH = ord("\\")


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
    carried to the next. Only the chunk's quotes, newlines and structural bytes are looked at one by
    one (as sparse position arrays): a byte's place inside or outside a string is the parity of the
    real quotes before it."""

    def __init__(self):
        self.in_string = False
        self.backslashes = 0  # the run of backslashes that ended the previous chunk
        self.depth = 0
        self.phase = "before"  # before the '[', "inside" the array, "after" its ']'
        self.elements = 0  # elements ended so far
        self.content = False  # the open element holds a non-space byte

    def feed(self, chunk: bytes) -> tuple[bytes, BrokenArray | None]:
        """The chunk as JSON lines (the same length, every finished element ended by a newline), or
        with a damage: its part up to the last whole element, and the damage."""
        a = np.frombuffer(chunk, dtype=np.uint8).copy()
        quotes, string_before = self._real_quotes(a), self.in_string
        self.in_string ^= bool(len(quotes) & 1)

        def outside(positions: np.ndarray) -> np.ndarray:
            return ((np.searchsorted(quotes, positions) + string_before) & 1) == 0

        newlines = np.flatnonzero(a == _NEWLINE)
        plain = outside(newlines)
        a[newlines[plain]] = _SPACE
        a[newlines[~plain]] = _CONTROL  # a raw newline in a string: invalid JSON, and stays invalid
        folded = a | 0x20  # '[' and '{' both become '{', ']' and '}' both '}': two comparisons, not four
        marks = np.flatnonzero((folded == ord("{")) | (folded == ord("}")) | (a == ord(",")))
        marks = marks[outside(marks)]
        if self.phase == "after":
            return self._after(a, -1)
        start = 0
        if self.phase == "before":
            text = a > _SPACE
            if not text.any():
                return a.tobytes(), None
            start = int(np.argmax(text))
            if a[start] != ord("["):
                return b"", BrokenArray(0, "the file does not hold a JSON array")
            a[: start + 1] = _SPACE
            self.phase, self.depth, start = "inside", 1, start + 1
            marks = marks[marks >= start]
        return self._elements(a, start, marks)

    def _elements(self, a: np.ndarray, start: int, marks: np.ndarray) -> tuple[bytes, BrokenArray | None]:
        kinds = a[marks]
        step = _STEP[kinds]
        depth_after = self.depth + np.cumsum(step, dtype=np.int64)
        closes = np.flatnonzero(depth_after <= 0)
        end = int(marks[closes[0]]) if closes.size else len(a)
        self.depth = 0 if closes.size else int(depth_after[-1]) if len(depth_after) else self.depth
        before_end = marks < end
        commas = marks[before_end & (kinds == ord(",")) & (depth_after == 1)]
        filled = self._filled_pieces(a, start, end, commas)
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

    def _real_quotes(self, a: np.ndarray) -> np.ndarray:
        """The positions of the quotes not escaped by an odd run of backslashes before them (runs are
        short: a few steps back from every quote at once; a long one is counted over the chunk)."""
        quotes = np.flatnonzero(a == ord('"'))
        run = np.zeros(len(quotes), dtype=np.int64)
        alive = np.ones(len(quotes), dtype=bool)
        for back in range(1, 17):
            at = quotes - back
            reached = alive & (at < 0)
            run[reached] += self.backslashes  # the run goes on into the previous chunk
            alive &= (at >= 0) & (a[np.maximum(at, 0)] == _BACKSLASH)
            if not alive.any():
                break
            run += alive
        else:
            run = self._long_runs(a, quotes)
        ends_in = a[-1] == _BACKSLASH if len(a) else False
        if ends_in:
            others = np.flatnonzero(a != _BACKSLASH)
            tail = len(a) - 1 - int(others[-1]) if others.size else len(a) + self.backslashes
            self.backslashes = tail
        else:
            self.backslashes = 0 if len(a) else self.backslashes
        return quotes[run % 2 == 0]

    def _long_runs(self, a: np.ndarray, quotes: np.ndarray) -> np.ndarray:
        """Each quote's run of backslashes, over the whole chunk (a run of more than 16)."""
        last_other = np.maximum.accumulate(np.where(a == _BACKSLASH, -1, np.arange(len(a), dtype=np.int64)))
        before = np.maximum(quotes - 1, 0)
        run = np.where(quotes > 0, quotes - 1 - last_other[before], 0)
        reaches_start = (quotes == 0) | (last_other[before] == -1)
        return run + np.where(reaches_start, self.backslashes, 0)

    def _filled_pieces(self, a: np.ndarray, start: int, end: int, commas: np.ndarray) -> np.ndarray:
        """For each piece between the region's start, its commas and its end: whether it holds a
        non-space byte (the first piece continues the open element)."""
        text = a[:end] > _SPACE  # JSON's whitespace is all below; a control byte there is no element either
        text[commas] = False
        lows = np.concatenate(([start], commas + 1))
        filled = np.zeros(len(lows), dtype=bool)
        if commas.size:  # each piece with its comma (made blank): never an empty range
            filled[:-1] = np.logical_or.reduceat(text[: int(commas[-1]) + 1], lows[:-1])
        filled[-1] = text[int(lows[-1]) : end].any()
        filled[0] |= self.content
        return filled

    def _after(self, a: np.ndarray, end: int) -> tuple[bytes, BrokenArray | None]:
        """The array's ']' (at ``end``) and what follows it: only whitespace may."""
        self.phase = "after"
        if (a[end + 1 :] > _SPACE).any():
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
