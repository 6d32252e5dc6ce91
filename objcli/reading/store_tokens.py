"""The token store a plan reads its ids from: the store its manifest names, refused in one line when it
moved, changed or was edited since the plan was made (its manifest's sha256, each shard's)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ..errors import ObjcliError
from ..formats.row_plan import store_manifest_sha256

KEPT_PARTITIONS = 64  # partitions' ids held at once: memory-mapped, so the page cache holds them, not the reader
_CHECKED: set[tuple[str, int, int]] = set()  # store shards whose sha256 this process checked (path, size, mtime)


class StoreTokens:
    """Each partition's ids, flat, in the order a run reads them (its shards one after another), at the
    store's width."""

    def __init__(self, store: str, manifest: dict):
        self.store, self.manifest = store, manifest
        self._lock = threading.Lock()
        self._partitions: dict[int, PartitionIds] = {}

    @classmethod
    def open(cls, store: str, sha256: str, plan: Path) -> StoreTokens:
        from ..readers.token_store import store_manifest

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
        from ..readers.token_store import check_shard, readable_shard, shard_blocks
        from ..storage.remote import join

        entry = next((p for p in self.manifest["partitions"] if p["index"] == index), None)
        if entry is None:
            raise ObjcliError(f"{self.store}: has no partition {index}; the plan is not over this store")
        digests = {name: d for shard in self.manifest["shards"] for name, d in shard["sha256"].items()}
        chunks = []
        for name in entry["shards"]:
            where = join(self.store, name)
            path = readable_shard(where)
            blocks = shard_blocks(path, digests, where)
            stat = path.stat()
            if blocks is None and (str(path), stat.st_size, stat.st_mtime_ns) not in _CHECKED:  # a store made
                check_shard(path, digests, where)  # before block digests: its sha256, once a process
                _CHECKED.add((str(path), stat.st_size, stat.st_mtime_ns))
            chunks += _shard_chunks(path, blocks, where)
        return PartitionIds(chunks)


class _Chunk:
    """One record batch's ids as the shard holds them (memory-mapped), where they lie in the file, and the
    shard's blocks to check before any of them is used."""

    def __init__(self, ids: np.ndarray, byte_start: int, blocks, data, where: str):
        self.ids, self.byte_start, self.blocks, self.data, self.where = ids, byte_start, blocks, data, where

    def take(self, positions: np.ndarray) -> np.ndarray:
        if self.blocks is not None and len(positions):
            size = self.ids.itemsize
            touched = np.unique((self.byte_start + positions * size) // self.blocks.block)
            for block in touched.tolist():  # the blocks these ids lie in, each checked once a process
                start = block * self.blocks.block
                if not self.blocks.check(self.data, start, min(start + self.blocks.block, self.blocks.size)):
                    from ..readers.token_store import _refuse_shard

                    _refuse_shard(self.where)
        return self.ids[positions]


def _shard_chunks(path, blocks, where: str) -> list[_Chunk]:
    """A shard's record batches' ids, memory-mapped, each with its place in the file (the buffers' addresses
    in the one mapping: the tokens themselves are not read)."""
    import pyarrow as pa

    mapped = pa.memory_map(str(path))
    whole = mapped.read_buffer(mapped.size())  # the mapping itself, zero-copy: its address is the file's start
    data = np.frombuffer(whole, np.uint8)
    mapped.seek(0)
    chunks = []
    for batch in pa.ipc.open_stream(mapped):
        ids = batch.column(0)
        values = ids.values
        first, last = int(ids.offsets[0].as_py()) if len(ids) else 0, int(ids.offsets[-1].as_py()) if len(ids) else 0
        dtype = np.dtype(values.type.to_pandas_dtype())
        buffer = values.buffers()[1]
        flat = np.frombuffer(buffer, dtype, count=len(values) + values.offset)[values.offset :][first:last]
        start = buffer.address - whole.address + (values.offset + first) * dtype.itemsize
        chunks.append(_Chunk(flat, start, blocks, data, where))
    return chunks


class PartitionIds:
    """A store partition's ids, its shards' record batches one after another, gathered by position; each
    block of the shards checked against its digest the first time a position in it is read."""

    def __init__(self, chunks: list[_Chunk]):
        self.chunks = chunks
        self.starts = np.concatenate([[0], np.cumsum([len(c.ids) for c in chunks])]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def take(self, positions: np.ndarray) -> np.ndarray:
        dtype = self.chunks[0].ids.dtype if self.chunks else np.uint16
        out = np.empty(len(positions), dtype)
        owner = np.searchsorted(self.starts, positions, side="right") - 1
        for k in np.unique(owner).tolist():
            mine = owner == k
            out[mine] = self.chunks[k].take(positions[mine] - self.starts[k])
        return out
