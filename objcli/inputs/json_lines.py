"""JSON inputs: JSON lines decoded a block at a time (one msgspec call; a block that fails is read
again line by line, to skip or report exactly the bad records), or a file holding one JSON array of
records; each record's text field, or with ``records`` its whole JSON (conversations, pairs)."""

from __future__ import annotations

import operator
from collections.abc import Iterator

import msgspec

from ..errors import ObjcliError
from .json_array import ElementLocator, array_blocks
from .lines import line_blocks
from .records import RecordLog


def _record_type(text_key: str) -> type:
    """A msgspec type that decodes only the text field: ``meta.body.text`` is a path of nested
    objects, each level a struct with one field (renamed to the key), so nothing else is built.
    The structs are left untracked by the garbage collector (``gc=False``: a decoded tree holds
    strings and the next level, never a cycle): a million tracked records a few seconds set off
    thousands of collections (decoding 24 MB of tiny records: 0.125 s with 480 collections, 0.08 s
    untracked)."""
    record_type: type = str
    for depth, key in reversed(list(enumerate(text_key.split(".")))):
        record_type = msgspec.defstruct(f"Level{depth}", [("text", record_type)], rename={"text": key}, gc=False)
    return record_type


def _decode_failure(raw: bytes, error: msgspec.DecodeError, where: str) -> tuple[str, str, str]:
    """The skip reason, place and message of a line msgspec could not decode. msgspec before 0.23
    raised UnicodeDecodeError on a string of invalid UTF-8; 0.23 raises DecodeError ("Invalid UTF-8
    encoded string"), so the reason comes from the bytes themselves: the same count either way."""
    if str(error).startswith("Invalid UTF-8"):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as utf8_error:
            return "invalid_utf8", where, f"invalid UTF-8 ({utf8_error.reason})"
    return "bad_json", where, f"broken JSON ({str(error).removeprefix('JSON is malformed: ')})"


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
                log.skip(*_decode_failure(raw, error, where))
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
            except msgspec.DecodeError as error:
                log.skip(*_decode_failure(raw, error, locate(first_line + i)))
            except RecursionError:
                log.skip("bad_json", locate(first_line + i), "JSON nested too deeply to decode")
        return records


def json_lines(stream, piece, options, log, locator, array: bool = False) -> Iterator[list[str]]:
    """Records of JSON lines, or (``array``) of a file holding one JSON array of them."""
    jsonl = _JsonRecords() if options.records else _JsonLines(options.text_key)
    if array:
        locator = ElementLocator(locator.path)
        blocks = array_blocks(stream, options.batch_bytes, log, locator)
    else:
        blocks = line_blocks(stream, piece, options.batch_bytes, locator)
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
