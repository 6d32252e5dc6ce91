"""Reading a partition (its pieces, one after another) as batches of document texts.

Line-based inputs are read in blocks of about ``batch_bytes`` of complete lines, so memory is
bounded and JSON lines decode in one msgspec call per block; a block that fails to decode is
re-read line by line to skip (or, under ``--strict``, report) exactly the bad records.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import msgspec

from ..errors import ObjcliError
from ..storage.remote import open_input, public_url
from .inputs import STDIN, Partition, Piece, sniff_format
from .json_array import ElementLocator, array_blocks
from .opening import open_for_reading, skip_byte_order_mark
from .origins import count_newlines, sourced_batch
from .parquet import parquet_texts
from .records import RecordLog

PARAGRAPH_BREAK = re.compile(rb"\n[ \t\r\f\v]*\n")


@dataclass(frozen=True)
class ReadOptions:
    text_key: str = "text"
    text_unit: str = "line"  # text inputs: one document per line | paragraph | file
    strict: bool = False
    batch_bytes: int = 1 << 20
    records: bool = False  # each document is a whole JSON record (its JSON text), for conversations
    provenance: bool = False  # each text a SourcedText (origins.py): its file, record and offset


class _Locator:
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


def _line_blocks(stream: BinaryIO, piece: Piece, batch_bytes: int, locator: _Locator) -> Iterator[tuple[int, bytes]]:
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


def _decode_text_block(block: bytes, first_line: int, log: RecordLog, locate) -> list[str]:
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


def _record_type(text_key: str) -> type:
    """A msgspec type that decodes only the text field: ``meta.body.text`` is a path of nested
    objects, each level a struct with one field (renamed to the key), so nothing else is built."""
    record_type: type = str
    for depth, key in reversed(list(enumerate(text_key.split(".")))):
        record_type = msgspec.defstruct(f"Level{depth}", [("text", record_type)], rename={"text": key})
    return record_type


class _JsonLines:
    def __init__(self, text_key: str):
        self.text_key = text_key
        self.decoder = msgspec.json.Decoder(_record_type(text_key))
        self.depth = text_key.count(".") + 1
        self.text_of = operator.attrgetter(".".join(["text"] * self.depth))
        self.first_missing_fields: list[str] | None = None

    def _texts(self, records) -> list[str]:
        return list(map(self.text_of, records))  # one C-level pass (a list comprehension is a Python loop)

    def decode_block(self, block: bytes, first_line: int, log: RecordLog, locate) -> list[str]:
        try:
            texts = self._texts(self.decoder.decode_lines(block))
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return self._decode_line_by_line(block, first_line, log, locate)
        log.read += len(texts)
        return self._drop_empty(texts, block, first_line, log, locate)

    def _drop_empty(self, texts, block, first_line, log, locate) -> list[str]:
        if all(texts) and log.records is None:
            return texts
        # Name the lines: records are the block's non-blank lines in order (decode_lines skips blank
        # ones), so the k-th text is the k-th non-blank line; nothing is decoded again.
        lines = [i for i, raw in enumerate(block.split(b"\n")) if raw.strip()]
        for k, text in enumerate(texts):
            if not text:
                log.skip("empty_text", locate(first_line + lines[k]), f"field '{self.text_key}' is empty")
        log.kept(first_line + lines[k] for k, text in enumerate(texts) if text)
        return [t for t in texts if t]

    def _decode_line_by_line(self, block, first_line, log, locate) -> list[str]:
        texts = []
        key = self.text_key
        for i, raw in enumerate(block.split(b"\n")):
            if not raw.strip():
                continue
            log.read += 1
            where = locate(first_line + i)
            try:
                text = self.text_of(self.decoder.decode(raw))
                if text:
                    texts.append(text)
                    log.kept((first_line + i,))
                else:
                    log.skip("empty_text", where, f"field '{key}' is empty")
            except UnicodeDecodeError as error:
                log.skip("invalid_utf8", where, f"invalid UTF-8 ({error.reason})")
            except msgspec.ValidationError as error:
                message = str(error)
                if message.startswith("Object missing required field") or (
                    message.startswith("Expected `object`") and " - at `$." in message
                ):  # a.b where a is no object
                    if self.first_missing_fields is None:
                        self.first_missing_fields = sorted(msgspec.json.decode(raw, type=dict[str, msgspec.Raw]))
                    fields = ", ".join(self.first_missing_fields) or "none"
                    nested = f"; {message}" if self.depth > 1 else ""
                    log.skip("missing_field", where, f"record has no field '{key}' (its fields: {fields}{nested})")
                elif message.startswith("Expected `object`"):
                    log.skip("not_an_object", where, "the record is JSON but not an object")
                else:
                    log.skip("not_a_string", where, f"field '{key}' is not a string ({message})")
            except msgspec.DecodeError as error:
                log.skip("bad_json", where, f"broken JSON ({str(error).removeprefix('JSON is malformed: ')})")
            except RecursionError:
                log.skip("bad_json", where, "JSON nested too deeply to decode")
        return texts


class _JsonRecords:
    """Whole records as documents: each non-blank line that is a JSON object, as its text."""

    decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])

    def decode_block(self, block: bytes, first_line: int, log: RecordLog, locate) -> list[str]:
        try:
            self.decoder.decode_lines(block)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return self._line_by_line(block, first_line, log, locate)
        raws = block.split(b"\n")
        lines = [raw.decode("utf-8").strip() for raw in raws if raw.strip()]
        log.read += len(lines)
        log.kept(first_line + i for i, raw in enumerate(raws) if raw.strip())
        return lines

    def _line_by_line(self, block, first_line, log, locate) -> list[str]:
        records = []
        for i, raw in enumerate(block.split(b"\n")):
            if not raw.strip():
                continue
            log.read += 1
            try:
                self.decoder.decode(raw)
                records.append(raw.decode("utf-8").strip())
                log.kept((first_line + i,))
            except UnicodeDecodeError as error:
                log.skip("invalid_utf8", locate(first_line + i), f"invalid UTF-8 ({error.reason})")
            except msgspec.ValidationError:
                log.skip("not_an_object", locate(first_line + i), "the record is JSON but not an object")
            except (msgspec.DecodeError, RecursionError) as error:
                log.skip(
                    "bad_json",
                    locate(first_line + i),
                    f"broken JSON ({str(error).removeprefix('JSON is malformed: ')})",
                )
        return records


def _paragraphs(stream, piece, options, log, locator) -> Iterator[list[str]]:
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


def _whole_file(stream, piece, options, log, locator) -> Iterator[list[str]]:
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


def _json_lines(stream, piece, options, log, locator, array: bool = False) -> Iterator[list[str]]:
    """Records of JSON lines, or (``array``) of a file holding one JSON array of them."""
    jsonl = _JsonRecords() if options.records else _JsonLines(options.text_key)
    if array:
        locator = ElementLocator(locator.path)
        blocks = array_blocks(stream, options.batch_bytes, log, locator)
    else:
        blocks = _line_blocks(stream, piece, options.batch_bytes, locator)
    for first_line, block in blocks:
        texts = jsonl.decode_block(block, first_line, log, locator)
        del block  # the texts hold the data now
        if texts:
            yield texts
    if log.skipped["missing_field"] and log.documents == 0 and not log.skipped.keys() - {"missing_field"}:
        fields = ", ".join(jsonl.first_missing_fields or []) or "none"
        raise ObjcliError(
            f"input {locator.path}: no record has the field '{options.text_key}' "
            f"(fields of the first record: {fields}); choose the text field with --text-key"
        )


def read_documents(partition: Partition, options: ReadOptions, log: RecordLog) -> Iterator[list[str]]:
    """Batches of document texts from one partition, with bad records counted in ``log``. The small
    files of a partition are read one after another and their texts gathered into batches of about
    ``--batch-size``, so a thousand one-page files are not a thousand tokenizer calls."""
    carry: list[str] = []  # the short last batch of a piece, joined to what the next piece reads
    carried = 0  # its characters, kept as it grows (not summed again for every file)
    for piece in partition.pieces:
        previous = None
        log.piece_bytes, log.piece_fraction = piece.size, 0.0
        for texts in read_piece(piece, options, log):
            if previous is not None:  # a batch the reader cut at --batch-size: as it is
                yield carry + previous if carry else previous
                carry, carried = [], 0
            previous = texts
        log.pieces_done_bytes += piece.size
        log.piece_bytes, log.piece_fraction = 0, 0.0
        if previous is not None:
            carry += previous
            carried += sum(map(len, previous))
            if carried >= options.batch_bytes // 2:
                yield carry
                carry, carried = [], 0
    if carry:
        yield carry


def read_piece(piece: Piece, options: ReadOptions, log: RecordLog) -> Iterator[list[str]]:
    """Batches of document texts from one piece (a file, or a byte range of one); ``log`` learns
    how far into the piece they come from (progress). With ``options.provenance``, each text is a
    ``SourcedText`` naming its file and record."""
    if not options.provenance:
        yield from _read_piece(piece, options, log)
        return
    log.records = []
    name = public_url(piece.input.path)
    try:
        for texts in _read_piece(piece, options, log):
            yield sourced_batch(texts, name, piece.first_record, log.records)
    finally:
        log.records = None


def _read_piece(piece: Piece, options: ReadOptions, log: RecordLog) -> Iterator[list[str]]:
    fmt = piece.input.format
    if fmt == "parquet":
        yield from parquet_texts(piece, None if options.records else options.text_key, log)
        return
    locator = _Locator(piece)
    counted: list = []  # the reader that counts the input bytes read (none for a stream)
    with open_for_reading(piece, counted) as stream:
        if not piece.start:
            skip_byte_order_mark(stream, locator.path)
        for texts in _texts_of(stream, fmt, piece, options, log, locator):
            if counted and piece.size:
                log.piece_fraction = counted[0].count / piece.size
            yield texts


def _texts_of(stream, fmt: str, piece: Piece, options: ReadOptions, log: RecordLog, locator) -> Iterator[list[str]]:
    if fmt == "auto":  # a stream: decide from the first bytes
        fmt = sniff_format(stream.peek(64)[:64])
        if fmt == "parquet":
            raise ObjcliError(
                f"input {locator.path}: looks like Parquet; give Parquet as a file, or pass --input-format parquet"
            )
    if fmt in ("jsonl", "json"):
        yield from _json_lines(stream, piece, options, log, locator, array=fmt == "json")
    elif options.records:
        raise ObjcliError(
            f"input {locator.path}: conversations are JSON records; give JSON lines or Parquet "
            "(--input-format jsonl if the name does not say)"
        )
    elif options.text_unit == "line":
        for first_line, block in _line_blocks(stream, piece, options.batch_bytes, locator):
            texts = _decode_text_block(block, first_line, log, locator)
            del block
            if texts:
                yield texts
    elif options.text_unit == "paragraph":
        yield from _paragraphs(stream, piece, options, log, locator)
    else:
        yield from _whole_file(stream, piece, options, log, locator)
