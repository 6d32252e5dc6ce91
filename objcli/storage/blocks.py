"""Per-block digests of a store shard, recorded as it is written, so a reader checks exactly the blocks it
reads: a rank reading a few rows of a trillion-token store checks a few blocks, not the store.

A shard ``part-00000-of-00004.store`` gets ``part-00000-of-00004.store.blocks`` beside it (listed with it in
the manifest, so its sha256 is there): ``MAGIC``, then little-endian uint64s: the block size, the shard's
size, the width of its ids in bytes and how many record batches it holds; one 16-byte XXH3-128 digest a
``BLOCK_BYTES`` block (the last shorter); then for each record batch its ids' count and where they start in
the file (uint64 pairs): a reader over object storage fetches the blocks its ids lie in by byte ranges, and
nothing else. XXH3 (``xxhash``) hashes 19 GB/s on one core where sha256 does 1.7 (64 MiB, best of three;
``objcli/docs/performance.md``); it finds damage and edits as sha256 does, and the manifest's sha256 of the
block file ties the digests to the run. ``verify`` checks every block and every file's sha256."""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass

import numpy as np

MAGIC = b"OBJBLK1\x00"
# 256 KiB: a first read from a local shard hashes the block its ids lie in (a random row of a plan over 2.3 B
# tokens 1.04-1.07 ms with 1 MiB blocks, 0.84-0.88 ms; 4 MiB took 1.6-1.75), a plan run the blocks besides ids;
# object storage fetches sixteen at a time (reading/store_tokens.FETCH_BYTES). Tokenizing and the derived runs
# were even (1 GB: tokenize 5.50-5.78 -> 5.21-5.30 s, clm Arrow 2.34-2.50 against 2.46-2.47 s).
BLOCK_BYTES = 1 << 18
DIGEST_BYTES = 16
SUFFIX = ".blocks"
_HEADER = struct.Struct("<QQQQ")


def _xxh3():
    import xxhash

    return xxhash.xxh3_128


class BlockDigester:
    """Digests of ``BLOCK_BYTES`` blocks of a stream, fed as it is written."""

    def __init__(self):
        self.new = _xxh3()
        self.current, self.filled, self.size = self.new(), 0, 0
        self.digests: list[bytes] = []

    def update(self, data) -> None:
        view = memoryview(data).cast("B")
        self.size += len(view)
        while len(view):
            take = min(BLOCK_BYTES - self.filled, len(view))
            self.current.update(view[:take])
            self.filled += take
            view = view[take:]
            if self.filled == BLOCK_BYTES:
                self.digests.append(self.current.digest())
                self.current, self.filled = self.new(), 0

    def finish(self, itemsize: int, batches: list[tuple[int, int]]) -> bytes:
        """The block file's bytes (``batches``: each record batch's ids' count and first byte)."""
        if self.filled:
            self.digests.append(self.current.digest())
            self.current, self.filled = self.new(), 0
        layout = b"".join(struct.pack("<QQ", count, start) for count, start in batches)
        header = _HEADER.pack(BLOCK_BYTES, self.size, itemsize, len(batches))
        return MAGIC + header + b"".join(self.digests) + layout


@dataclass(frozen=True)
class BlockFile:
    block: int  # bytes a block
    size: int  # the shard's bytes
    itemsize: int  # bytes an id
    digests: list[bytes]
    batches: list[tuple[int, int]]  # each record batch's ids: (count, first byte in the shard)


def read_block_file(data: bytes, name: str) -> BlockFile:
    """A block file's contents; ``ValueError`` naming it when damaged."""
    head = len(MAGIC) + _HEADER.size
    if data[: len(MAGIC)] != MAGIC or len(data) < head:
        raise ValueError(f"{name} is not a block file")
    block, size, itemsize, batches = _HEADER.unpack_from(data, len(MAGIC))
    count = -(-size // block) if block else -1
    if block <= 0 or itemsize not in (2, 4) or len(data) != head + count * DIGEST_BYTES + batches * 16:
        raise ValueError(f"{name} does not hold one digest for each block of its shard, and its batches")
    digests = [data[head + k * DIGEST_BYTES : head + (k + 1) * DIGEST_BYTES] for k in range(count)]
    layout = head + count * DIGEST_BYTES
    places = [struct.unpack_from("<QQ", data, layout + 16 * k) for k in range(batches)]
    if any(start + n * itemsize > size for n, start in places):
        raise ValueError(f"{name} places a batch's ids past the end of its shard")
    return BlockFile(block, size, itemsize, digests, places)


class ShardBlocks:
    """A shard's blocks, each checked against its digest the first time a reader reads from it."""

    def __init__(self, path, block_file: bytes):
        self.path = path
        self.file = read_block_file(block_file, f"{path.name}{SUFFIX}")
        self.block, self.size, self.digests = self.file.block, self.file.size, self.file.digests
        self.checked = [False] * len(self.digests)
        self._lock = threading.Lock()

    def check(self, data, start: int, stop: int) -> bool:
        """Whether bytes ``start:stop`` of the shard lie in blocks that match their digests (``data``: the
        shard's bytes, a memory map, so only the blocks read are touched)."""
        if not 0 <= start <= stop <= self.size or len(data) != self.size:
            return False
        first, last = start // self.block, max(start, stop - 1) // self.block
        with self._lock:
            for k in range(first, last + 1):
                if not self.checked[k]:
                    if not self.matches(k, data[k * self.block : (k + 1) * self.block]):
                        return False
                    self.checked[k] = True
        return True

    def matches(self, index: int, data) -> bool:
        """Whether ``data`` is block ``index`` as written."""
        return _xxh3()(data).digest() == self.digests[index]

    def check_all_but_ids(self, data) -> bool:
        """Every block that holds anything besides ids (offsets, metadata, the stream's framing): what a run
        that places tokens by position reads; a block of ids alone is checked by whoever reads its ids."""
        if len(data) != self.size:
            return False
        ids_only = np.zeros(len(self.digests), bool)
        for count, start in self.file.batches:
            first, stop = -(-start // self.block), (start + count * self.file.itemsize) // self.block
            ids_only[first:stop] = True  # blocks lying wholly inside the batch's ids
        return all(
            self.check(data, k * self.block, min((k + 1) * self.block, self.size)) for k in np.flatnonzero(~ids_only)
        )

    def check_all(self, data) -> bool:
        return self.check(data, 0, self.size) if self.size else len(data) == 0
