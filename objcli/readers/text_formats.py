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
from pathlib import PurePath
from typing import ClassVar

from ..errors import ObjcliError
from ..options import Registry
from .inputs import COMPRESSION_SUFFIXES, Piece
from .json_lines import json_lines
from .lines import Locator, decode_text_block, line_blocks, paragraphs, whole_file
from .opening import binary_file, open_for_reading, skip_byte_order_mark
from .parquet import parquet_texts
from .records import RecordLog

BOM = b"\xef\xbb\xbf"


class TextInputFormat:
    """One text format. ``read`` gives a piece's texts; stream formats implement ``texts``."""

    name: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]] = ()
    # Suffixes another format owns that this one takes when the first bytes show it (.json: an array).
    claims_by_content: ClassVar[tuple[str, ...]] = ()
    records: ClassVar[bool] = True  # a document a record (JSON, a row): --text-unit does not apply
    detection_rank: ClassVar[int] = 50  # a stream's first bytes are asked of formats in this order

    def check_compression(self, path: str, compression: str | None) -> None:
        """A compression the format cannot be read through is one line (none here)."""

    def sniffs(self, head: bytes) -> bool:
        raise NotImplementedError

    def splits_by_lines(self, text_unit: str) -> bool:
        """Whether a large uncompressed file is cut into byte ranges (a document never spans a line)."""
        return False

    def read(self, piece: Piece, options, log: RecordLog) -> Iterator[list[str]]:
        locator = Locator(piece)
        counted: list = []  # the reader that counts the input bytes read (none for a stream)
        with open_for_reading(piece, counted) as stream:
            binary = binary_file(stream) if options.text_unit == "file" and not self.records else None
            if binary:  # a file a document, whatever its name: a binary one is a counted skip
                log.read += 1
                log.skip("binary", locator.path, f"{binary}, not text")
                return
            if not piece.start:
                skip_byte_order_mark(stream, locator.path)
            for texts in self.texts(stream, piece, options, log, locator):
                if counted and piece.size:
                    log.piece_fraction = counted[0].count / piece.size
                yield texts

    def texts(self, stream, piece: Piece, options, log: RecordLog, locator: Locator) -> Iterator[list[str]]:
        raise NotImplementedError


# Text formats by name (--input-format's choices), asked of a stream's first bytes by ``detection_rank``:
# ``@register`` on a TextInputFormat (kept as an instance).
TEXT_INPUTS: Registry[TextInputFormat] = Registry("text input format", instances=True, order=lambda f: f.detection_rank)
register = TEXT_INPUTS.register


def _first_byte(head: bytes) -> bytes:
    return head.removeprefix(BOM).lstrip()[:1]


@register
class ParquetText(TextInputFormat):
    detection_rank = 10
    name, suffixes = "parquet", (".parquet",)

    def check_compression(self, path: str, compression: str | None) -> None:
        if compression is not None:
            raise ObjcliError(
                f"input {path}: Parquet inside {compression} compression cannot be read in place; "
                "decompress it first (Parquet compresses its own pages)"
            )

    def sniffs(self, head: bytes) -> bool:
        return head.startswith(b"PAR1")

    def read(self, piece: Piece, options, log: RecordLog) -> Iterator[list[str]]:
        yield from parquet_texts(piece, None if options.records else options.text_key, log)


@register
class JsonArray(TextInputFormat):
    detection_rank = 20
    name = "json"
    claims_by_content = (".json",)  # .json files are told from JSON lines by their first bytes

    def sniffs(self, head: bytes) -> bool:
        return _first_byte(head) == b"["

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        yield from json_lines(stream, piece, options, log, locator, array=True)


@register
class JsonLines(TextInputFormat):
    detection_rank = 30
    name, suffixes = "jsonl", (".jsonl", ".ndjson", ".json")

    def sniffs(self, head: bytes) -> bool:
        return _first_byte(head) == b"{"

    def splits_by_lines(self, text_unit: str) -> bool:
        return True

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        yield from json_lines(stream, piece, options, log, locator)


@register
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

    detection_rank = 40

    name = "auto"

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        found = sniffed_format(stream.peek(64)[:64])
        if found == ParquetText.name:
            raise ObjcliError(
                f"input {locator.path}: looks like Parquet; give Parquet as a file, or pass --input-format parquet"
            )
        yield from TEXT_INPUTS[found].texts(stream, piece, options, log, locator)


# In the order detection asks them: plain text takes whatever the others do not.


def text_format(name: str) -> TextInputFormat:
    return TEXT_INPUTS[name] if name in TEXT_INPUTS else SniffedStream()


def sniffed_format(head: bytes) -> str:
    """The format of decompressed leading bytes: Parquet magic, a JSON array, a JSON object, or text."""
    return next(name for name, f in TEXT_INPUTS.items() if f.sniffs(head))


def last_suffix(path: str) -> str | None:
    """The suffix that names the content (``a.json.gz``: ``.json``)."""
    suffixes = [s.lower() for s in PurePath(path).suffixes]
    while suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else None


def format_from_name(path: str) -> str | None:
    """The text format whose suffix the name has (compression suffixes aside), or None."""
    suffix = last_suffix(path) or ""
    return next((name for name, f in TEXT_INPUTS.items() if suffix in f.suffixes), None)


def suffix_list() -> str:
    """Every text format's suffixes, as a message lists them (``.parquet, .jsonl, ... or .text``)."""
    names = [suffix for f in TEXT_INPUTS.values() for suffix in f.suffixes]
    return f"{', '.join(names[:-1])} or {names[-1]}"


def content_format(path: str, compression: str | None, requested: str, head) -> str:
    """A text file's format: the one asked for, else the one its name says, else the one its
    decompressed first bytes show (``head()`` reads them); a suffix another format claims by content is
    looked at (``claims_by_content``), and the format checks the compression it is read through."""
    fmt = requested if requested != "auto" else format_from_name(path)
    sharing = [f.name for f in TEXT_INPUTS.values() if last_suffix(path) in f.claims_by_content]
    if fmt is None or (requested == "auto" and sharing):
        sniffed = sniffed_format(head())
        fmt = sniffed if fmt is None or sniffed in sharing else fmt
    if fmt in TEXT_INPUTS:
        TEXT_INPUTS[fmt].check_compression(path, compression)
    return fmt


def check_text_unit(formats: list[str], text_unit: str) -> None:
    """--text-unit cuts plain text: given with inputs that are all records (a document a record), it is refused."""
    records = [f in TEXT_INPUTS and TEXT_INPUTS[f].records for f in formats]
    if text_unit != "line" and formats and all(records):
        raise ObjcliError(
            f"--text-unit {text_unit}: applies to plain-text inputs, and these are all "
            f"{' and '.join(sorted(set(formats)))} (one document per record); drop it"
        )
