"""The token store a plan reads its ids from: the store its manifest names, refused in one line when it
moved, changed or was edited since the plan was made (its manifest's sha256; each block of a shard against
its digest when first read, ``storage/blocks.py``). A store in object storage is read by byte ranges: the
blocks a row's ids lie in, kept in a bounded cache in memory; nothing is copied whole. A store made before
block digests is copied (object storage) and checked whole, as before."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..formats.row_plan import store_manifest_sha256

KEPT_PARTITIONS = 64  # partitions' ids held at once: memory-mapped, so the page cache holds them, not the reader
KEPT_BYTES = 64 << 20  # blocks of a store in object storage held in memory: 64 MiB at most a reader
FETCH_BYTES = 4 << 20  # one ranged GET brings this much (whole blocks): a read ahead, few round trips
KEPT_CHECKS = 1 << 20  # blocks remembered checked (256 GiB of 256 KiB blocks; about 150 MB at most)
_CHECKED_BLOCKS: set[tuple[str, int, int, bytes]] = set()  # (shard, mtime, block, digest) checked by this process
_CHECKED: set[tuple[str, int, int]] = set()  # store shards whose sha256 this process checked (path, size, mtime)


class StoreTokens:
    """Each partition's ids, in the order a run reads them (its shards one after another), at the store's width."""

    def __init__(self, store: str, manifest: dict):
        self.store, self.manifest = store, manifest
        self._lock = threading.Lock()
        self._partitions: dict[int, PartitionIds] = {}
        self._blocks = _BlockCache(KEPT_BYTES)

    @classmethod
    def open(cls, store: str, sha256: str, plan: Path) -> StoreTokens:
        from ..inputs.token_store import store_manifest

        if store_manifest_sha256(store) != sha256:
            state = "is not there" if store_manifest(store) is None else "changed since (its manifest differs)"
            raise ObjcliError(
                f"{plan}: its token store {store} {state}; put the store back as it was, or write the plan again"
            )
        return cls(store, store_manifest(store))

    def partition(self, index: int) -> PartitionIds:
        with self._lock:
            if index not in self._partitions:
                if len(self._partitions) >= KEPT_PARTITIONS:
                    self._partitions.pop(next(iter(self._partitions)))
                self._partitions[index] = self._read(index)
            return self._partitions[index]

    def _read(self, index: int) -> PartitionIds:
        from ..inputs.token_store import store_index
        from ..storage.remote import join

        entries, digests = store_index(self.manifest)
        entry = entries.get(index)
        if entry is None:
            raise ObjcliError(f"{self.store}: has no partition {index}; the plan is not over this store")
        chunks = []
        for name in entry["shards"]:
            chunks += self._shard(join(self.store, name), name, digests)
        return PartitionIds(chunks)

    def _shard(self, where: str, name: str, digests: dict) -> list:
        from ..inputs.store_shards import shard_blocks
        from ..storage.remote import is_url

        blocks = shard_blocks(Path(name), digests, where)
        if blocks is None:
            return _whole_shard(where, digests)
        dtype = np.dtype(np.uint16 if blocks.file.itemsize == 2 else np.uint32)
        source = _Ranged(where, blocks, self._blocks) if is_url(where) else _Mapped(where, blocks)
        return [_Chunk(source, start, count, dtype) for count, start in blocks.file.batches]


class _Mapped:
    """A local shard, memory-mapped: each block checked when first read."""

    def __init__(self, where: str, blocks):
        self.where, self.blocks = where, blocks
        # A plain array over the map: slicing a np.memmap makes a memmap each time (0.1 ms a read).
        self.data = np.memmap(where, np.uint8, "r").view(np.ndarray) if blocks.size else np.zeros(0, np.uint8)

    def read(self, start: int, stop: int, touched: np.ndarray) -> np.ndarray:
        stat = os.stat(self.where)
        if stat.st_size != self.blocks.size:  # cut short since: its mapped pages would not be there
            _refuse(self.where)
        for block in touched.tolist():
            # Checked once a process while the shard is unchanged, though its partition is opened again.
            key = (self.where, stat.st_mtime_ns, block, self.blocks.digests[block])
            if key in _CHECKED_BLOCKS:
                continue
            first = block * self.blocks.block
            if not self.blocks.check(self.data, first, min(first + self.blocks.block, self.blocks.size)):
                _refuse(self.where)
            if len(_CHECKED_BLOCKS) >= KEPT_CHECKS:
                _CHECKED_BLOCKS.clear()
            _CHECKED_BLOCKS.add(key)
        return self.data[start:stop]


class _Ranged:
    """A shard in object storage: the blocks a read needs fetched by byte ranges, each checked, a few kept."""

    def __init__(self, where: str, blocks, cache: _BlockCache):
        from ..storage.remote import filesystem

        self.where, self.blocks, self.cache = where, blocks, cache
        self.fs, self.inner = filesystem(where)

    def read(self, start: int, stop: int, touched: np.ndarray) -> np.ndarray:
        size = self.blocks.block
        out = np.empty(stop - start, np.uint8)
        for block in touched.tolist():
            data = self.cache.get((self.where, block)) or self._fetch(block)
            lo, hi = max(start, block * size), min(stop, block * size + len(data))
            out[lo - start : hi - start] = np.frombuffer(data, np.uint8)[lo - block * size : hi - block * size]
        return out

    def _fetch(self, block: int) -> bytes:
        """Block ``block``, fetched with the blocks beside it up to ``FETCH_BYTES`` in one ranged GET, each
        checked and kept."""
        from ..storage.remote import storage_error, storage_errors

        size = self.blocks.block
        per = max(1, FETCH_BYTES // size)
        group = block - block % per
        first = group * size
        try:
            data = self.fs.cat_file(self.inner, start=first, end=min(first + per * size, self.blocks.size))
        except storage_errors() as error:
            raise storage_error(error, self.where, "reading it") from None
        for k in range(-(-len(data) // size)):
            piece = data[k * size : (k + 1) * size]
            if not self.blocks.matches(group + k, piece):
                _refuse(self.where)
            self.cache.put((self.where, group + k), piece)
        return data[(block - group) * size : (block - group + 1) * size]


class _BlockCache:
    """The last blocks fetched from object storage, ``size`` bytes at most, in memory (a reader's bound,
    whatever it reads)."""

    def __init__(self, size: int):
        self.size, self.blocks, self._lock = size, OrderedDict(), threading.Lock()
        self.held = 0

    def get(self, key):
        with self._lock:
            if key in self.blocks:
                self.blocks.move_to_end(key)
                return self.blocks[key]
        return None

    def put(self, key, data: bytes) -> None:
        with self._lock:
            self.held += len(data) - len(self.blocks.pop(key, b""))
            self.blocks[key] = data
            while self.held > self.size and len(self.blocks) > 1:
                self.held -= len(self.blocks.popitem(last=False)[1])


class _Chunk:
    """One record batch's ids: ``count`` of them from byte ``start`` of their shard."""

    def __init__(self, source, start: int, count: int, dtype: np.dtype):
        self.source, self.start, self.count, self.dtype = source, start, count, dtype

    def __len__(self) -> int:
        return self.count

    def take(self, positions: np.ndarray, in_order: bool = False) -> np.ndarray:
        """The ids at ``positions`` (``in_order``: each past the one before, as a concat row's or shard's are)."""
        if not len(positions):
            return np.zeros(0, self.dtype)
        size = self.dtype.itemsize
        low, high = (positions[0], positions[-1]) if in_order else (positions.min(), positions.max())
        low, high = int(low), int(high) + 1
        touched = self._blocks(positions, low, high, in_order)  # only the blocks they lie in are read
        ids = self.source.read(self.start + low * size, self.start + high * size, touched).view(self.dtype)
        return ids if in_order and len(positions) == high - low else ids[positions - low]  # a stretch: as read

    def _blocks(self, positions: np.ndarray, low: int, high: int, in_order: bool) -> np.ndarray:
        """The blocks the positions' ids lie in, in order: where positions come in order, the blocks any
        falls in (a search a block); else a mark a block spanned (no sort of the positions)."""
        size, block = self.dtype.itemsize, self.source.blocks.block
        lowest = (self.start + low * size) // block
        spanned = np.arange(lowest, (self.start + (high - 1) * size) // block + 1)
        if in_order:  # each block's first position (rounded up), the last block's end after it
            edges = -((self.start - np.append(spanned, spanned[-1] + 1) * block) // size)
            return spanned[np.diff(np.searchsorted(positions, np.maximum(edges, 0).astype(positions.dtype))) > 0]
        hit = np.zeros(len(spanned), bool)
        hit[(positions.astype(np.int64) * size + self.start) // block - lowest] = True  # int32 would wrap past 2 GiB
        return spanned[hit]


def _whole_shard(where: str, digests: dict) -> list:
    """A shard of a store made before block digests: copied (object storage), its sha256 checked once a
    process, its record batches' ids memory-mapped."""
    from ..formats.store import read_store_table
    from ..inputs.store_shards import check_shard
    from ..inputs.token_store import readable_shard

    path = readable_shard(where)
    stat = path.stat()
    if (str(path), stat.st_size, stat.st_mtime_ns) not in _CHECKED:
        check_shard(path, digests, where)
        _CHECKED.add((str(path), stat.st_size, stat.st_mtime_ns))
    table = read_store_table(path)
    chunks = []
    for chunk in table.column("ids").chunks:
        values = chunk.values
        first, last = (int(chunk.offsets[0].as_py()), int(chunk.offsets[-1].as_py())) if len(chunk) else (0, 0)
        dtype = np.dtype(np.uint16 if values.type.bit_width == 16 else np.uint32)
        flat = np.frombuffer(values.buffers()[1], dtype, count=len(values) + values.offset)[values.offset :]
        chunks.append(_Whole(flat[first:last]))
    return chunks


class _Whole:
    """Ids checked whole already."""

    def __init__(self, ids: np.ndarray):
        self.ids, self.dtype = ids, ids.dtype

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, positions: np.ndarray, in_order: bool = False) -> np.ndarray:
        return self.ids[positions]


def _refuse(where: str) -> None:
    from ..inputs.store_shards import refuse_shard

    refuse_shard(where)


class PartitionIds:
    """A store partition's ids, its shards' record batches one after another, gathered by position."""

    def __init__(self, chunks: list):
        self.chunks = chunks
        self.starts = np.concatenate([[0], np.cumsum([len(c) for c in chunks])]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def take(self, positions: np.ndarray) -> np.ndarray:
        dtype = self.chunks[0].dtype if self.chunks else np.uint16
        increasing = len(positions) > 0 and bool(np.all(positions[1:] > positions[:-1]))  # a concat row's, a shard's
        if len(self.chunks) == 1:  # a partition of one record batch: nothing to split
            return self.chunks[0].take(positions, in_order=increasing)
        starts = self.starts.astype(positions.dtype)  # searched at the positions' width: no copy of them
        if increasing:
            bounds = np.searchsorted(positions, starts)  # a chunk's positions: a stretch
            parts = [
                self.chunks[k].take(positions[lo:hi] - int(starts[k]), in_order=True)
                for k, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
                if hi > lo
            ]
            return np.concatenate(parts).astype(dtype, copy=False)
        out = np.empty(len(positions), dtype)
        owner = np.searchsorted(starts, positions, side="right") - 1
        order = np.argsort(owner, kind="stable")  # each chunk's positions together
        bounds = np.searchsorted(owner[order], np.arange(len(self.chunks) + 1))
        for k, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
            if hi > lo:
                mine = order[lo:hi]
                out[mine] = self.chunks[k].take(positions[mine] - int(starts[k]))
        return out
