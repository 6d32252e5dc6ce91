"""What a run's inputs are: files (``InputFile``, its format and compression decided once), the pieces
partitions are made of (a whole file, or a byte range of one), partitions, and a piece opened for
reading, decompressed (finding them: ``members.py``; cutting partitions: ``partitioning.py``)."""

from __future__ import annotations

import enum
import io
import sys
from dataclasses import dataclass
from typing import BinaryIO

from ..formats.store import STORE
from ..storage.remote import open_input
from .streams import CountedReader, decompressing_reader

STDIN = "-"
MAGIC = {
    "gzip": b"\x1f\x8b",
    "zstd": b"\x28\xb5\x2f\xfd",
    "bz2": b"BZh",
    "xz": b"\xfd7zXZ\x00",
}
COMPRESSION_SUFFIXES = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2", ".xz": "xz"}


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
        from .token_inputs import is_token_input  # the token formats' package reads inputs: asked when needed

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
    store_partition: int | None = None  # a token store's partition (inputs/token_store.py): its index there
    store: str = ""  # and that store (a plan over several names each partition's)

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
