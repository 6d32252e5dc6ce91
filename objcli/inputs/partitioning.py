"""Text inputs described and cut into partitions: each file the door recognised as text
(``members.py``) with its compression and, where the door's answer is ``auto``, the format its first
bytes show (``text_formats.content_format``); partitions of about ``--partition-size``.

A partition is a stable unit of work: consecutive small files (in the sorted input order) grouped
together, a whole file, or a fixed byte range of a large uncompressed line-based file; each of these
is a *piece*. Partitions depend only on the inputs and ``--partition-size``, never on the number of
workers, so output is the same whatever runs it.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from ..errors import ObjcliError
from ..options import LiveChoices
from ..storage.remote import is_url, open_input, version_of
from .opening import decompression_errors
from .pieces import STDIN, InputFile, Partition, Piece, sniff_compression
from .streams import decompressing_reader
from .text_formats import TEXT_INPUTS, content_format
from .token_inputs import TOKEN_INPUTS

# The --input-format choices: auto, the text formats, then the tokenized inputs (a format registered later too).
INPUT_FORMATS = LiveChoices(lambda: ["auto", *TEXT_INPUTS, *TOKEN_INPUTS])


def _describe_file(path: str, named: str, requested_format: str) -> InputFile:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            # Opening a pipe to sniff it would consume what it holds (or wait for a writer).
            return InputFile(path, named, None, None)
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as error:
        raise ObjcliError(f"input {path}: cannot read ({error.strerror}); check the path and its permissions") from None
    compression = sniff_compression(head)
    fmt = _content_format(path, compression, named, requested_format)
    return InputFile(path, fmt, compression, os.path.getsize(path))


def _describe_object(url: str, info: dict, named: str, requested_format: str) -> InputFile:
    """As ``_describe_file``, for a listed object (its size, version and first bytes)."""
    size = info.get("size") or 0
    compression = sniff_compression(info["head"]) if size else None
    return InputFile(
        url, _content_format(url, compression, named, requested_format), compression, size, version_of(info)
    )


def _content_format(path: str, compression: str | None, named: str, requested_format: str) -> str:
    """The door's answer (``named``), else the one the decompressed first bytes show
    (``text_formats.content_format``: sniffing, a suffix another format claims by content, its checks)."""

    def head() -> bytes:
        with open_input(path) as raw, decompressing_reader(raw, compression) as f:
            return _read_head(f, path)

    return content_format(path, compression, named, requested_format, head)


def _read_head(f: BinaryIO, path: str) -> bytes:
    try:
        return f.read(64)
    except decompression_errors() as error:  # a file cut inside a zstd frame too (ZstdError is no OSError)
        raise ObjcliError(f"input {path}: corrupt compressed data ({error})") from None


def _unique(files: list[InputFile], warn) -> list[InputFile]:
    """The same file named twice (``a.jsonl ./a.jsonl``, a file and its folder, overlapping globs)
    is read once, at its first place."""
    seen, unique = set(), []
    for f in files:
        key = f.path if f.path == STDIN or is_url(f.path) else os.path.realpath(f.path)
        if key in seen:
            if warn:
                warn(f"input {f.path} is named more than once; reading it once")
            continue
        seen.add(key)
        unique.append(f)
    return unique


def text_files(members: list, requested_format: str = "auto", warn=None) -> list[InputFile]:
    """A group's text inputs (``members.Member``s the door recognised as text) as the run reads them: each
    file's compression from its first bytes, its format the door's answer (its bytes say where that is
    ``auto``); ``-`` is standard input, its format said when it is read."""
    files = []
    for member in members:
        if member.path == STDIN:
            files.append(InputFile(STDIN, requested_format, None, None))
        elif member.listed is not None:
            files.append(_describe_object(member.path, member.listed, member.detected.format, requested_format))
        else:
            files.append(_describe_file(member.path, member.detected.format, requested_format))
    return _unique(files, warn)


def cut_partitions(files: list[InputFile], partition_bytes: int, text_unit: str) -> list[Partition]:
    """Partitions of about ``partition_bytes``: large uncompressed line-based files cut into byte
    ranges, smaller files grouped with their neighbours (in input order) until a group reaches the
    size. A folder of small files is then a few partitions, each dropping at most one partial row,
    not one partition (and one dropped remainder, and one shard) per file. A stream stays alone."""
    groups: list[list[Piece]] = []
    size = 0
    for input_file in files:
        if input_file.is_stream:
            groups.append([Piece(input_file)])
            size = partition_bytes  # nothing joins a stream's partition
            continue
        for piece in _pieces(input_file, partition_bytes, text_unit):
            piece_bytes = (piece.end - piece.start) if piece.end is not None else input_file.size
            if not groups or (size > 0 and size + piece_bytes > partition_bytes):  # a full group: start one
                groups.append([])
                size = 0
            groups[-1].append(piece)
            size += piece_bytes
    return [Partition(index, tuple(pieces)) for index, pieces in enumerate(groups)]


def _pieces(input_file: InputFile, partition_bytes: int, text_unit: str) -> list[Piece]:
    splittable = (
        input_file.compression is None
        and input_file.size > partition_bytes
        and input_file.format in TEXT_INPUTS
        and TEXT_INPUTS[input_file.format].splits_by_lines(text_unit)
    )
    if not splittable:
        return [Piece(input_file)]
    return [
        Piece(input_file, start, min(start + partition_bytes, input_file.size))
        for start in range(0, input_file.size, partition_bytes)
    ]
