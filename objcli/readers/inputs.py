"""Finding inputs, detecting their compression and format, and cutting them into partitions.

A partition is a stable unit of work of about ``--partition-size``: consecutive small files (in
the sorted input order) grouped together, a whole file, or a fixed byte range of a large
uncompressed line-based file; each of these is a *piece*. Partitions depend only on the inputs and
``--partition-size``, never on the number of workers, so output is the same whatever runs it.
"""

from __future__ import annotations

import enum
import glob
import io
import lzma
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import ObjcliError
from ..formats.store import STORE
from ..storage.remote import is_url, open_input, version_of
from .folders import folder_files
from .objects import list_objects
from .streams import CountedReader, decompressing_reader
from .token_inputs import TOKEN_INPUTS, is_token_input

STDIN = "-"
MAGIC = {
    "gzip": b"\x1f\x8b",
    "zstd": b"\x28\xb5\x2f\xfd",
    "bz2": b"BZh",
    "xz": b"\xfd7zXZ\x00",
}
COMPRESSION_SUFFIXES = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}
FORMAT_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".txt": "text",
    ".text": "text",
    ".parquet": "parquet",
}
TEXT_FORMATS = ("text", "jsonl", "json", "parquet")  # json: one JSON array of records


class _InputFormatNames(Sequence):
    """The --input-format choices: auto, the text formats, then the tokenized inputs (``token_inputs/``),
    read from their registry at every use, so a format registered later is a choice like the rest."""

    def __getitem__(self, index):
        return ["auto", *TEXT_FORMATS, *TOKEN_INPUTS][index]

    def __len__(self) -> int:
        return 1 + len(TEXT_FORMATS) + len(TOKEN_INPUTS)


INPUT_FORMATS = _InputFormatNames()


class InputKind(enum.Enum):
    """What an input is, decided once from its format: text (tokenized by the run), ids another tool
    wrote (``token_inputs/``), or a token store objcli wrote (``token_store.py``)."""

    TEXT = "text"
    TOKENS = "tokens"
    STORE = "store"


@dataclass(frozen=True)
class InputFile:
    path: str  # "-" for standard input
    format: str  # text | jsonl | parquet; "auto" for a stream: decided from its first bytes
    compression: str | None
    size: int | None  # bytes on disk; None for a stream
    version: str = ""  # an object's ETag or modification time, from its listing (for the run key)

    @property
    def kind(self) -> InputKind:
        if self.format == STORE:
            return InputKind.STORE
        return InputKind.TOKENS if is_token_input(self.format) else InputKind.TEXT

    @property
    def is_stream(self) -> bool:
        """Standard input, a pipe (``<(cmd)``, a FIFO) or a device: read once, front to back, in the
        main process; never sniffed ahead, split or compared with an earlier run."""
        return self.size is None


@dataclass(frozen=True)
class Piece:
    """A whole input file, or the byte range [start, end) of one (lines belong to the piece in
    which they start)."""

    input: InputFile
    start: int = 0
    end: int | None = None
    first_record: int = 0  # with --provenance: the records (lines) of the file before ``start``

    @property
    def size(self) -> int:
        """Bytes of input the piece covers (compressed bytes for a compressed file; 0 for a stream)."""
        if self.end is not None:
            return self.end - self.start
        return self.input.size or 0

    @property
    def label(self) -> str:
        if self.end is None:
            return self.input.path
        return f"{self.input.path}[bytes {self.start}:{self.end}]"

    def to_json(self) -> dict:
        return {
            "input": self.input.path,
            "format": self.input.format,
            "compression": self.input.compression,
            "byte_range": None if self.end is None else [self.start, self.end],
        }


@dataclass(frozen=True)
class Partition:
    index: int
    pieces: tuple[Piece, ...]
    source: str = ""  # with --source: the mixture source the pieces belong to
    store_partition: int | None = None  # a token store's partition (readers/token_store.py): its index there

    @property
    def input(self) -> InputFile:
        """The first piece's input (a stream is always alone in its partition)."""
        return self.pieces[0].input

    @property
    def size(self) -> int:
        """Bytes of input (what progress counts against; 0 for a stream, whose size is unknown)."""
        return sum(piece.size for piece in self.pieces)

    @property
    def label(self) -> str:
        if len(self.pieces) == 1:
            return self.pieces[0].label
        return f"{self.pieces[0].label} … {self.pieces[-1].label} ({len(self.pieces)} files)"

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "pieces": [p.to_json() for p in self.pieces],
            **({"source": self.source} if self.source else {}),
        }


def sniff_compression(head: bytes) -> str | None:
    for name, magic in MAGIC.items():
        if head.startswith(magic):
            return name
    return None


def _last_suffix(path: str) -> str | None:
    """The suffix that names the content (``a.json.gz``: ``.json``)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    while suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else None


def _format_from_name(path: str) -> str | None:
    return FORMAT_SUFFIXES.get(_last_suffix(path) or "")


def sniff_format(head: bytes) -> str:
    """Format of decompressed leading bytes: Parquet magic, a JSON object, or text."""
    if head.startswith(b"PAR1"):
        return "parquet"
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    return {b"{": "jsonl", b"[": "json"}.get(first, "text")


def _describe_file(path: str, requested_format: str) -> InputFile:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            # Opening a pipe to sniff it would consume what it holds (or wait for a writer).
            fmt = requested_format if requested_format != "auto" else _format_from_name(path)
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
    show; Parquet inside a compression stream is refused (it cannot be read by ranges)."""
    fmt = requested_format if requested_format != "auto" else _format_from_name(path)
    # A .json file is JSON lines or one array of records (Alpaca's layout): its first bytes say which.
    if fmt is None or (fmt == "jsonl" and requested_format == "auto" and _last_suffix(path) == ".json"):
        with open_input(path) as raw, decompressing_reader(raw, compression) as f:
            sniffed = sniff_format(_read_head(f, path))
        fmt = sniffed if fmt is None or sniffed == "json" else fmt
    if fmt == "parquet" and compression is not None:
        raise ObjcliError(
            f"input {path}: Parquet inside {compression} compression cannot be read in place; "
            "decompress it first (Parquet compresses its own pages)"
        )
    return fmt


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


def resolve_inputs(specs: list[str], requested_format: str = "auto", warn=None) -> list[InputFile]:
    """Expand files, folders (recursive, sorted) and globs; ``-`` is standard input."""
    if not specs:
        raise ObjcliError("no input given; name files, folders or globs, or '-' for standard input")
    files: list[InputFile] = []
    for spec in specs:
        if spec == STDIN:
            files.append(InputFile(STDIN, requested_format, None, None))
            continue
        if is_url(spec):
            objects = list_objects(spec, lambda name: _format_from_name(name) is not None)
            files.extend(_describe_object(url, info, requested_format) for url, info in objects)
            continue
        if glob.has_magic(spec):
            matches = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
            if not matches:
                raise ObjcliError(f"input {spec}: the pattern matches no file; check the glob")
            paths = _not_objcli_files(spec, matches)
        elif os.path.isdir(spec):
            paths = folder_files(spec, _format_from_name, warn)
            if not paths:
                raise ObjcliError(
                    f"input {spec}: the folder holds no .jsonl, .txt or .parquet file "
                    "(compressed or not); name the files directly"
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
        found = objcli_output_files(Path(folder)) if _is_token_store(folder) else None
        own[folder] = found[0] if found else set()
    kept = [p for p in matches if os.path.basename(p) not in own[os.path.dirname(p) or "."]]
    if not kept:
        folder = os.path.dirname(matches[0]) or "."
        raise ObjcliError(
            f"input {spec}: the pattern matches only the files of the token store {folder}, which are no text; "
            f"give the store's folder ({folder}) to read its tokens, or name the text files"
        )
    return kept


def _is_token_store(folder: str) -> bool:
    import json

    try:
        with open(os.path.join(folder, "manifest.json"), "rb") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == "store" and "token_store" in manifest


def plan_partitions(files: list[InputFile], partition_bytes: int, text_unit: str) -> list[Partition]:
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
        and (input_file.format == "jsonl" or (input_file.format == "text" and text_unit == "line"))
    )
    if not splittable:
        return [Piece(input_file)]
    return [
        Piece(input_file, start, min(start + partition_bytes, input_file.size))
        for start in range(0, input_file.size, partition_bytes)
    ]


def open_piece(piece: Piece, counted: list | None = None) -> BinaryIO:
    """A binary stream of the piece's decompressed bytes (the whole file, or from ``start``).
    ``counted``: gets the ``CountedReader`` under it, which says how many input bytes were read."""
    input_file = piece.input
    if input_file.is_stream:
        raw = sys.stdin.buffer if input_file.path == STDIN else open(input_file.path, "rb")  # noqa: SIM115
        head = raw.peek(8)[:8] if hasattr(raw, "peek") else b""
        return decompressing_reader(raw, sniff_compression(head))
    raw = open_input(input_file.path)  # closed by the caller via the wrapper
    if piece.start:
        raw.seek(piece.start)
    if counted is not None:
        raw = CountedReader(raw)
        counted.append(raw)
        if input_file.compression is None:
            raw = io.BufferedReader(raw, buffer_size=1 << 16)
    return decompressing_reader(raw, input_file.compression)
