"""Text inputs, one ``TextInputFormat`` a format in a module of ``text_inputs/``, registered as the tokenized
ones are (``token_inputs/``): how each is named (its suffixes), recognised from its first bytes, cut into
byte ranges, and read into batches of document texts. Here: what they share, the registry, and naming and
sniffing by it.

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

from ..errors import ObjcliError
from .pieces import COMPRESSION_SUFFIXES
from .text_inputs import TEXT_INPUTS, TextInputFormat


class SniffedStream(TextInputFormat):
    """A stream (standard input, a pipe) read as the format its first bytes show."""

    detection_rank = 40

    name = "auto"

    def texts(self, stream, piece, options, log, locator) -> Iterator[list[str]]:
        found = sniffed_format(stream.peek(64)[:64])
        if found == "parquet":  # a stream cannot be read by row groups
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


def content_format(path: str, compression: str | None, named: str, requested: str, head) -> str:
    """A text file's format: the door's answer (``named``: the one asked for, else the one its name says),
    else the one its decompressed first bytes show (``head()`` reads them); a suffix another format claims by
    content is looked at (``claims_by_content``), and the format checks the compression it is read through."""
    fmt = None if named == "auto" else named
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
