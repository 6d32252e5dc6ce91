"""Finding inputs and cutting them into partitions: files, folders (recursive, sorted), globs and
object-storage prefixes expanded; each file's compression and format decided (its name, then its
first bytes: ``text_formats.py``, ``token_inputs/``); partitions of about ``--partition-size``.

A partition is a stable unit of work: consecutive small files (in the sorted input order) grouped
together, a whole file, or a fixed byte range of a large uncompressed line-based file; each of these
is a *piece*. Partitions depend only on the inputs and ``--partition-size``, never on the number of
workers, so output is the same whatever runs it.
"""

from __future__ import annotations

import glob
import lzma
import os
import stat
from pathlib import Path
from typing import BinaryIO

from ..errors import ObjcliError
from ..options import LiveChoices
from ..storage.remote import is_url, open_input, version_of
from .folders import folder_files
from .objects import list_objects
from .pieces import STDIN, InputFile, Partition, Piece, sniff_compression
from .streams import decompressing_reader
from .text_formats import TEXT_INPUTS, content_format, format_from_name, suffix_list
from .token_inputs import TOKEN_INPUTS
from .token_store import is_store

# The --input-format choices: auto, the text formats, then the tokenized inputs (a format registered later too).
INPUT_FORMATS = LiveChoices(lambda: ["auto", *TEXT_INPUTS, *TOKEN_INPUTS])


def _describe_file(path: str, requested_format: str) -> InputFile:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            # Opening a pipe to sniff it would consume what it holds (or wait for a writer).
            fmt = requested_format if requested_format != "auto" else format_from_name(path)
            return InputFile(path, fmt or "auto", None, None)
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as error:
        raise ObjcliError(f"input {path}: cannot read ({error.strerror}); check the path and its permissions") from None
    compression = sniff_compression(head)
    return InputFile(path, _content_format(path, compression, requested_format), compression, os.path.getsize(path))


def _describe_object(url: str, info: dict, requested_format: str) -> InputFile:
    """As ``_describe_file``, for a listed object (its size, version and first bytes)."""
    size = info.get("size") or 0
    compression = sniff_compression(info["head"]) if size else None
    return InputFile(url, _content_format(url, compression, requested_format), compression, size, version_of(info))


def _content_format(path: str, compression: str | None, requested_format: str) -> str:
    """The format asked for, else the one the name says, else the one the decompressed first bytes
    show (``text_formats.content_format``: a format's own suffixes, sniffing and checks)."""

    def head() -> bytes:
        with open_input(path) as raw, decompressing_reader(raw, compression) as f:
            return _read_head(f, path)

    return content_format(path, compression, requested_format, head)


def _read_head(f: BinaryIO, path: str) -> bytes:
    try:
        return f.read(64)
    except (OSError, EOFError, lzma.LZMAError) as error:
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


def resolve_inputs(
    specs: list[str], requested_format: str = "auto", warn=None, text_unit: str = "line"
) -> list[InputFile]:
    """Expand files, folders (recursive, sorted) and globs; ``-`` is standard input. A folder's files are
    those a text format names by suffix, or with ``text_unit`` "file" (a file a document) every file
    (man pages, source code, ``ls.1.gz``): its bytes say its format, and a binary one is a counted skip."""
    named = format_from_name if text_unit != "file" else (lambda name: format_from_name(name) or "text")
    if not specs:
        raise ObjcliError("no input given; name files, folders or globs, or '-' for standard input")
    files: list[InputFile] = []
    for spec in specs:
        if spec == STDIN:
            files.append(InputFile(STDIN, requested_format, None, None))
            continue
        if is_url(spec):
            objects = list_objects(spec, lambda name: format_from_name(name) is not None)
            files.extend(_describe_object(url, info, requested_format) for url, info in objects)
            continue
        if glob.has_magic(spec):
            matches = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
            if not matches:
                raise ObjcliError(f"input {spec}: the pattern matches no file; check the glob")
            paths = _not_objcli_files(spec, matches)
        elif os.path.isdir(spec):
            paths = folder_files(spec, named, warn)
            if not paths:
                raise ObjcliError(
                    f"input {spec}: the folder holds no {suffix_list()} file (compressed or not); name the files "
                    "directly, or pass --text-unit file to read every file of it as a document"
                    if text_unit != "file"
                    else f"input {spec}: the folder holds no file; name the files directly"
                )
        elif os.path.exists(spec):
            paths = [spec]  # a file, or a pipe named by path: read like standard input
        else:
            raise ObjcliError(f"input {spec}: no such file or directory; check the path")
        files.extend(_describe_file(p, requested_format) for p in paths)
    if sum(f.path == STDIN for f in files) > 1:
        raise ObjcliError("standard input '-' is named twice; name it once")
    return _unique(files, warn)


def _not_objcli_files(spec: str, matches: list[str]) -> list[str]:
    """A glob's files less a token store's own (its manifest, ``.store`` shards, side files), as a
    folder walk leaves an output's out: they are no text, and a store is read by its folder. Only
    those matched: one line naming the store."""
    from .folders import objcli_output_files

    own = {}
    for folder in {os.path.dirname(p) or "." for p in matches}:
        found = objcli_output_files(Path(folder)) if is_store(folder) else None
        own[folder] = found[0] if found else set()
    kept = [p for p in matches if os.path.basename(p) not in own[os.path.dirname(p) or "."]]
    if not kept:
        folder = os.path.dirname(matches[0]) or "."
        raise ObjcliError(
            f"input {spec}: the pattern matches only the files of the token store {folder}, which are no text; "
            f"give the store's folder ({folder}) to read its tokens, or name the text files"
        )
    return kept


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
