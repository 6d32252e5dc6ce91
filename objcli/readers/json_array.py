"""A ``.json`` file holding one array of records (``[{...}, {...}]``, how Alpaca and many chat
datasets ship), read as records with the same accounting as JSON lines.

ijson parses the array as a stream (its C backend, yajl), so memory holds one batch of records
however large the file; each element is written back as one line of JSON and the batch goes
through the JSON-lines decoder, so a missing field, an element that is not an object or an empty
text is the same counted skip, named by the element's position instead of a line. yajl stops at an
integer beyond 64 bits (an id field, say); a file is then read again from the element it stopped at
with ijson's pure-Python parser, which has no such limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

import msgspec


class ElementLocator:
    """Names a record of the array by its position (``file element 3``, counted from 1 as lines are)."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self, index: int) -> str:
        return f"{self.path} element {index + 1}"


def _elements(stream: BinaryIO, reopen: Callable[[], BinaryIO] | None) -> Iterator[object]:
    import ijson

    done = 0
    try:
        for element in ijson.items(stream, "item", use_float=True):
            yield element
            done += 1
    except ijson.JSONError as error:
        if "integer overflow" not in str(error) or reopen is None:
            raise
        from ijson.backends import python as exact  # no 64-bit limit on integers

        with reopen() as again:
            for index, element in enumerate(exact.items(again, "item", use_float=True)):
                if index >= done:
                    yield element


def array_blocks(
    stream: BinaryIO, batch_bytes: int, log, locator: ElementLocator, reopen: Callable[[], BinaryIO] | None = None
) -> Iterator[tuple[int, bytes]]:
    """(index of the first element, its elements as JSON lines) in blocks of about ``batch_bytes``.
    JSON that breaks off inside the array is one ``bad_json`` skip at the element where it breaks:
    nothing after it can be found again (an array has no line to resume from). ``reopen``: the same
    bytes from the start (a file; None for a stream)."""
    import ijson

    encode = msgspec.json.encode
    lines: list[bytes] = []
    size = first = 0
    try:
        for element in _elements(stream, reopen):
            lines.append(encode(element))
            size += len(lines[-1]) + 1
            if size >= batch_bytes:
                yield first, b"\n".join(lines)
                first, lines, size = first + len(lines), [], 0
    except (ijson.JSONError, UnicodeDecodeError) as error:  # IncompleteJSONError is a JSONError
        if lines:
            yield first, b"\n".join(lines)
        log.read += 1
        detail = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
        log.skip(
            "bad_json",
            locator(first + len(lines)),
            f"broken JSON in the array ({detail}); the rest of the file is unread",
        )
        return
    if lines:
        yield first, b"\n".join(lines)
