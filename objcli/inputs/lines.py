"""Plain text and line-based inputs read as blocks of whole lines: the line blocks JSON lines decode
too, a text file's lines, paragraphs or whole file as documents, and where a line is (``file:line``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

from ..storage.remote import open_input
from .origins import count_newlines
from .pieces import STDIN, Piece
from .records import RecordLog

PARAGRAPH_BREAK = re.compile(rb"\n[ \t\r\f\v]*\n")


class Locator:
    """Turns a line index within a piece into ``file:line``; counts lines before a byte-range
    piece only when an error needs it."""

    def __init__(self, piece: Piece):
        self.path = "<stdin>" if piece.input.path == STDIN else piece.input.path
        self.piece = piece
        self.data_start = piece.start
        self._base: int | None = None if piece.start else 0

    def __call__(self, line_index: int) -> str:
        if self._base is None:
            with open_input(self.piece.input.path) as f:
                remaining, self._base = self.data_start, 0
                while remaining > 0:
                    block = f.read(min(remaining, 1 << 24))
                    self._base += count_newlines(block)
                    remaining -= len(block)
        return f"{self.path}:{self._base + line_index + 1}"


def line_blocks(stream: BinaryIO, piece: Piece, batch_bytes: int, locator: Locator) -> Iterator[tuple[int, bytes]]:
    """Yield (index of the block's first line, bytes of complete lines)."""
    position, end = piece.start, piece.end
    if piece.start:
        # The stream starts one byte early: this piece's first line is the first one that
        # starts at or after ``start`` (the line in progress belongs to the previous piece).
        position += len(stream.readline()) - 1
        locator.data_start = position
    line_index = 0
    carry: list[bytes] = []  # the start of a line longer than one read, in parts (never re-copied)
    while end is None or position < end:
        want = batch_bytes if end is None else min(batch_bytes, end - position)
        data = stream.read(want)
        if not data:
            break
        position += len(data)
        last = end is not None and position >= end
        if last and not data.endswith(b"\n"):
            data += stream.readline()  # finish the line that started inside the range
        cut = len(data) if last else data.rfind(b"\n") + 1
        if cut == 0:
            carry.append(data)
            continue
        block = [b"".join([*carry, data[:cut]]) if carry else data[:cut]]
        carry = [data[cut:]] if cut < len(data) else []
        del data
        lines = count_newlines(block[0])
        # Handed over, not kept: a suspended generator would otherwise hold the block (a huge
        # line, maybe) for as long as its consumer works on it.
        yield line_index, block.pop()
        line_index += lines
    if carry:
        yield line_index, b"".join(carry)


def decode_text_block(block: bytes, first_line: int, log: RecordLog, locate) -> list[str]:
    try:
        lines = block.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        lines = []
        for i, raw in enumerate(block.split(b"\n")):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as error:
                lines.append("")  # a line of its own still: the next lines keep their numbers
                if raw.strip():
                    log.read += 1
                    log.skip("invalid_utf8", locate(first_line + i), f"invalid UTF-8 ({error.reason})")
    texts = [line.rstrip("\r") for line in lines if line.strip()]
    log.read += len(texts)
    log.kept(first_line + i for i, line in enumerate(lines) if line.strip())
    return texts


def paragraphs(stream, piece, options, log, locator) -> Iterator[list[str]]:
    carry = b""
    carry_line = 0
    line_index = 0
    while True:
        data = stream.read(options.batch_bytes)
        block = carry + data
        pieces = PARAGRAPH_BREAK.split(block) if block else []
        if data:
            carry = pieces.pop() if pieces else b""
        else:
            carry = b""
        texts = []
        line_index = carry_line
        for piece, separator in zip(pieces, PARAGRAPH_BREAK.findall(block) + [b""]):
            if piece.strip():
                log.read += 1
                try:
                    # As line mode does: no line ends kept at the edges, CRLF read as LF.
                    texts.append(piece.decode("utf-8").replace("\r\n", "\n").strip("\r\n"))
                    log.kept((line_index + piece[: len(piece) - len(piece.lstrip(b"\r\n"))].count(b"\n"),))
                except UnicodeDecodeError as error:
                    log.skip("invalid_utf8", locator(line_index), f"invalid UTF-8 ({error.reason})")
            line_index += piece.count(b"\n") + separator.count(b"\n")
        carry_line = line_index
        if texts:
            yield texts
        if not data:
            return


def whole_file(stream, piece, options, log, locator) -> Iterator[list[str]]:
    data = stream.read()
    if not data.strip():
        return
    log.read += 1
    try:
        text = data.decode("utf-8")
        log.kept((0,))
        yield [text]
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n")
        log.skip("invalid_utf8", locator(line), f"invalid UTF-8 ({error.reason})")
