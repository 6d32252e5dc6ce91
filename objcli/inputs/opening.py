"""Opening a piece for reading: its decompressed bytes, a UTF-8 byte-order mark dropped and other
encodings refused, and the failures of decompressors and storage clients as one line each."""

from __future__ import annotations

import io

from ..errors import ObjcliError
from ..storage.remote import is_url, storage_error, storage_errors
from .pieces import STDIN, Piece, open_piece

UTF_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


def head_kind(head: bytes) -> tuple[str, str, str] | None:
    """What a file's first bytes say it is besides UTF-8 text: ("binary", what, how it shows) or ("wide",
    its encoding, how it shows); None for UTF-8 text. UTF-16 and UTF-32 show by a byte-order mark, or
    without one by their NULs (every second or fourth byte of ASCII text), where the bytes read as text in
    that encoding; NUL-rich bytes that do not are binary data."""
    named = binary_kind(head)
    if named:
        return "binary", named, "its magic number"
    encoding = next((name for mark, name in UTF_BOMS.items() if head.startswith(mark)), None)
    if encoding:
        return "wide", encoding, "it starts with a byte-order mark"
    if len(head) < 8 or head.count(0) < len(head) // 3:
        return None
    width = 2 if head.count(0) < len(head) // 2 + len(head) // 8 else 4
    little_endian = head[::width].count(0) < head[width - 1 :: width].count(0)  # ASCII: "a\0" vs "\0a"
    encoding = f"UTF-{8 * width}{'LE' if little_endian else 'BE'}"
    how = f"{100 * head.count(0) // len(head)}% of its first bytes are NUL"
    return ("wide", encoding, how) if reads_as(head, encoding) else ("binary", "binary data", how)


def binary_file(stream) -> str | None:
    """What binary file a stream holds (``head_kind``), or None for text."""
    kind = head_kind(stream.peek(1024)[:1024])
    return kind[1] if kind and kind[0] == "binary" else None


def skip_byte_order_mark(stream, path: str) -> None:
    """A UTF-8 byte-order mark is dropped (it would cost the first record); UTF-16 and UTF-32 text,
    with a byte-order mark or without (then every second or fourth byte of ASCII text is NUL), is
    refused in one line: read as UTF-8 it becomes NUL-interleaved training data; a binary file too."""
    head = stream.peek(1024)[:1024]
    if head.startswith(b"\xef\xbb\xbf"):
        stream.read(3)
        return
    kind = head_kind(head)
    if kind is None:
        return
    what, name, how = kind
    if what == "binary" and name != "binary data":
        raise ObjcliError(f"input {path}: {name}, not text; leave it out of the inputs (or name the text files)")
    if what == "binary":
        raise ObjcliError(f"input {path}: binary data ({how}), not text; leave it out of the inputs")
    raise ObjcliError(
        f"input {path}: {name} text ({how}); objcli reads UTF-8: convert it, e.g. iconv -f {name} -t UTF-8 "
        f"{path} > converted.txt"
    )


# The first bytes of common binary files, which no text starts with (a NUL, or bytes invalid in UTF-8).
MAGIC_NUMBERS = {
    b"\x7fELF": "an ELF executable or library",
    b"MZ\x90\x00": "a Windows executable",
    b"\xcf\xfa\xed\xfe": "a Mach-O executable",
    b"\xca\xfe\xba\xbe": "a Mach-O or Java class file",
    b"PK\x03\x04": "a ZIP archive (or .docx, .xlsx, .jar)",
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"%PDF": "a PDF document",
    b"SQLite format 3\x00": "an SQLite database",
    b"\x93NUMPY": "a NumPy array file",
}


def binary_kind(head: bytes) -> str | None:
    """What binary file ``head`` begins, by its magic number; None for anything else."""
    return next((what for magic, what in MAGIC_NUMBERS.items() if head.startswith(magic)), None)


def reads_as(head: bytes, encoding: str) -> bool:
    """Whether NUL-rich bytes are text in a wide encoding (UTF-16LE, UTF-32BE, ...): decoded so, nine
    characters of ten printable or white space; binary data decodes to controls and invalid code points."""
    width = 4 if "32" in encoding else 2
    text = head[: len(head) // width * width].decode(encoding.replace("UTF", "utf-"), errors="replace")
    return sum(c.isprintable() or c in "\t\r\n" for c in text) >= 0.9 * max(len(text), 1)


class open_for_reading:
    """Opens the piece's stream and turns decompression failures into one-line errors."""

    def __init__(self, piece: Piece, counted: list | None = None):
        self.piece = piece
        self.counted = counted  # gets the reader that counts the input bytes read (open_piece)

    def __enter__(self) -> io.BufferedReader:
        piece = self.piece
        if piece.start:
            piece = Piece(piece.input, piece.start - 1, piece.end)
        stream = open_piece(piece, self.counted)
        self.stream = stream if hasattr(stream, "peek") else io.BufferedReader(stream)
        return self.stream

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.piece.input.path != STDIN:
            self.stream.close()
        if exc is not None and is_url(self.piece.input.path) and _is_storage_failure(exc):
            raise storage_error(exc, self.piece.input.path, "reading it") from None
        if exc is not None and isinstance(exc, decompression_errors()):
            kind = self.piece.input.compression or "file"
            raise ObjcliError(
                f"input {self.piece.input.path}: corrupt or truncated {kind} ({exc}); re-create or remove the file"
            ) from None
        return False


def _is_storage_failure(error: BaseException) -> bool:
    """A failure of the storage client while reading, not of the data: plain OSErrors (s3fs maps
    S3's errors onto OSError, FileNotFoundError, PermissionError) and the client's own errors;
    never a decompressor's (gzip's BadGzipFile is an OSError subclass of its own)."""
    plain = (OSError, FileNotFoundError, PermissionError, ConnectionError, TimeoutError)
    return type(error) in plain or (isinstance(error, storage_errors()) and not isinstance(error, OSError))


def decompression_errors() -> tuple[type[BaseException], ...]:
    import lzma
    import zlib

    import zstandard

    return (EOFError, OSError, zlib.error, lzma.LZMAError, zstandard.ZstdError)
