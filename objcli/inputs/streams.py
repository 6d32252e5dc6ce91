"""Byte streams under the readers: decompression (gzip, bz2, xz, concatenated zstd frames) and a
count of the input bytes read, for progress."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from typing import BinaryIO


def decompressing_reader(raw: BinaryIO, compression: str | None) -> BinaryIO:
    if compression is None:
        return raw
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if compression == "bz2":
        return bz2.BZ2File(raw)
    if compression == "xz":
        return lzma.LZMAFile(raw)
    if compression == "zstd":
        return io.BufferedReader(ZstdFrames(raw), buffer_size=1 << 20)
    raise ValueError(compression)


class ZstdFrames(io.RawIOBase):
    """Decompresses concatenated zstd frames, and, unlike zstandard's stream reader, raises
    ``ZstdError`` when the data ends inside a frame (a truncated file), instead of stopping quietly."""

    def __init__(self, raw: BinaryIO):
        import zstandard

        self.raw = raw
        self.error = zstandard.ZstdError
        self.context = zstandard.ZstdDecompressor()
        self.frame = self.context.decompressobj()
        self.in_frame = False
        self.pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.pending:
            data = self.raw.read(1 << 20)
            if not data:
                if self.in_frame:
                    raise self.error("the data ends inside a zstd frame")
                return 0
            self.pending = memoryview(self._decompress(data))
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n

    def _decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            self.in_frame = True
            out.append(self.frame.decompress(data))
            data = b""
            if self.frame.eof:
                data = self.frame.unused_data
                self.frame = self.context.decompressobj()
                self.in_frame = False
        return b"".join(out)

    def close(self) -> None:
        self.raw.close()
        super().close()


class CountedReader(io.RawIOBase):
    """A file whose bytes read are counted (before any decompression): how far a piece has been read,
    for progress, in the units its size is given in."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        read = self.raw.readinto(buffer)
        self.count += read or 0
        return read

    def close(self) -> None:
        self.raw.close()
        super().close()
