"""Text inputs, one ``TextInputFormat`` a format, registered as the tokenized ones are
(``token_inputs/``): how each is named (its suffixes), recognised from its first bytes, cut into
byte ranges, and read into batches of document texts.

==============  =========================  ===================================================
format          names                      one document is
==============  =========================  ===================================================
``text``        ``.txt``, ``.text``        a line, a paragraph or the whole file (``--text-unit``)
``jsonl``       ``.jsonl``, ``.ndjson``    a record's ``--text-key`` field (or the whole record)
``json``        a ``.json`` of one array   the same, for each element of the array
``parquet``     ``.parquet``               a row's ``--text-key`` column (or the whole row)
==============  =========================  ===================================================

A ``.json`` file is JSON lines or one array, as its first bytes say; a stream (standard input, a
pipe) is whichever format its first bytes show."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from ..errors import ObjcliError
from .inputs import Piece
from .json_lines import json_lines
from .lines import Locator, decode_text_block, line_blocks, paragraphs, whole_file
from .opening import open_for_reading, skip_byte_order_mark
from .parquet import parquet_texts
from .records import RecordLog

BOM = b"\xef\xbb\xbf"


class TextInputFormat:
    """One text format. ``read`` gives a piece's texts; stream formats implement ``texts``."""

    name: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]] = ()
    records: ClassVar[bool] = True  # a document a record (JSON, a row): --text-unit does not apply

    def sniffs(self, head: bytes) -> bool:
        raise NotImplementedError

    def splits_by_lines(self, text_unit: str) -> bool:
        """Whether a large uncompressed file is cut into byte ranges (a document never spans a line)."""
        return False

    def read(self, piece: Piece, options, log: RecordLog) -> Iterator[list[str]]:
        locator = Locator(piece)
        counted: list = []  # the reader that counts the input bytes read (none for a stream)
        with open_for_reading(piece, counted) as stream:
            if not piece.start:
                skip_byte_order_mark(stream, locator.path)
            for texts in self.texts(stream, piece, options, log, locator):
                if counted and piece.size:
                    log.piece_fraction = counted[0].count / piece.size
                yield texts

    def texts(self, stream, piece: Piece, options, log: RecordLog, locator: Locator) -> Iterator[list[str]]:
        raise NotImplementedError


def _first_byte(head: bytes) -> bytes:
    return head.removeprefix(BOM).lstrip()[:1]


class ParquetText(TextInputFormat):
    name, suffixes = "parquet", (".parquet",)

    def sniffs(self, head: bytes) -> bool:
        return head.startswith(b"PAR1")

    def read(self, piece: Piece, options, log: RecordLog) -> Iterator[list[str]]:
        yield from parquet_texts(piece, None if options.records else options.text_key, log)


class JsonArray(TextInputFormat):
    name = "json"  # .json files are told from JSON lines by their first bytes

    def sniffs(self, head: bytes) -> bool:
        return _first_byte(head) == b"["

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        yield from json_lines(stream, piece, options, log, locator, array=True)


class JsonLines(TextInputFormat):
    name, suffixes = "jsonl", (".jsonl", ".ndjson", ".json")

    def sniffs(self, head: bytes) -> bool:
        return _first_byte(head) == b"{"

    def splits_by_lines(self, text_unit: str) -> bool:
        return True

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        yield from json_lines(stream, piece, options, log, locator)


class PlainText(TextInputFormat):
    """Anything else: detected last."""

    name, suffixes, records = "text", (".txt", ".text"), False

    def sniffs(self, head: bytes) -> bool:
        return True

    def splits_by_lines(self, text_unit: str) -> bool:
        return text_unit == "line"

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        if options.records:
            raise ObjcliError(
                f"input {locator.path}: conversations are JSON records; give JSON lines or Parquet "
                "(--input-format jsonl if the name does not say)"
            )
        if options.text_unit == "paragraph":
            yield from paragraphs(stream, piece, options, log, locator)
        elif options.text_unit != "line":
            yield from whole_file(stream, piece, options, log, locator)
        else:
            for first_line, block in line_blocks(stream, piece, options.batch_bytes, locator):
                texts = decode_text_block(block, first_line, log, locator)
                del block
                if texts:
                    yield texts


class SniffedStream(TextInputFormat):
    """A stream (standard input, a pipe) read as the format its first bytes show."""

    name = "auto"

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        found = sniffed_format(stream.peek(64)[:64])
        if found == ParquetText.name:
            raise ObjcliError(
                f"input {locator.path}: looks like Parquet; give Parquet as a file, or pass --input-format parquet"
            )
        yield from TEXT_INPUTS[found].texts(stream, piece, options, log, locator)


# In the order detection asks them: plain text takes whatever the others do not.
TEXT_INPUTS: dict[str, TextInputFormat] = {f.name: f for f in (ParquetText(), JsonArray(), JsonLines(), PlainText())}
SUFFIXES = {suffix: f.name for f in TEXT_INPUTS.values() for suffix in f.suffixes}


def text_format(name: str) -> TextInputFormat:
    return TEXT_INPUTS[name] if name in TEXT_INPUTS else SniffedStream()


def sniffed_format(head: bytes) -> str:
    """The format of decompressed leading bytes: Parquet magic, a JSON array, a JSON object, or text."""
    return next(name for name, f in TEXT_INPUTS.items() if f.sniffs(head))
