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
        self._partitions: dict[int, np.ndarray] = {}

    @classmethod
    def open(cls, store: str, sha256: str, plan: Path) -> StoreTokens:
        from ..readers.token_store import store_manifest

        if store_manifest_sha256(store) != sha256:
            state = "is not there" if store_manifest(store) is None else "changed since (its manifest differs)"
            raise ObjcliError(
                f"{plan}: its token store {store} {state}; put the store back as it was, or write the plan again"
            )
        return cls(store, store_manifest(store))

    def partition(self, index: int) -> np.ndarray:
        with self._lock:
            if index not in self._partitions:
                if len(self._partitions) >= KEPT_PARTITIONS:
                    self._partitions.pop(next(iter(self._partitions)))
                self._partitions[index] = self._read(index)
            return self._partitions[index]

    def _read(self, index: int) -> np.ndarray:
        from ..formats.store import read_store_table, table_documents
        from ..readers.token_store import check_shard, readable_shard
        from ..storage.remote import join

        entry = next((p for p in self.manifest["partitions"] if p["index"] == index), None)
        if entry is None:
            raise ObjcliError(f"{self.store}: has no partition {index}; the plan is not over this store")
        digests = {name: d for shard in self.manifest["shards"] for name, d in shard["sha256"].items()}
        parts = []
        for name in entry["shards"]:
            where = join(self.store, name)
            path = readable_shard(where)
            stat = path.stat()
            if (str(path), stat.st_size, stat.st_mtime_ns) not in _CHECKED:  # once a process: hashing is a read
                check_shard(path, digests, where)
                _CHECKED.add((str(path), stat.st_size, stat.st_mtime_ns))
            ids, _, _ = table_documents(read_store_table(path))
            parts.append(np.asarray(ids))
        if len(parts) == 1:  # the ids as the store keeps them, memory-mapped: nothing copied
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint16)
