"""Arrow stream shards (``arrow``, ``hf``) read a record batch at a time for ``Rows``: each shard
memory-mapped once and its schema checked against the manifest, each batch's columns NumPy views of
the mapped file (nothing copied, nothing widened), so a row at random costs its batch's lookup only."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ..rows import Ragged
from ..storage.manifest import Manifest
from ..storage.shard_info import ShardRecord

KEPT_SHARDS = 64  # shards mapped at once: address space, not memory (the page cache holds what is read)


class StreamShards:
    def __init__(self, folder: Path, manifest: Manifest):
        self.folder, self.manifest = folder, manifest
        self._lock = threading.Lock()
        self._tables: dict[str, tuple] = {}  # file -> (table, each batch's first row)

    def __getstate__(self) -> dict:  # to a process of its own (a spawned DataLoader worker): mapped there anew
        return {"folder": self.folder, "manifest": self.manifest}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["folder"], state["manifest"])

    def _table(self, record: ShardRecord) -> tuple:
        name = record.files[0]
        with self._lock:
            if name not in self._tables:
                from ..formats._arrow_columns import table_columns
                from ..formats.arrow import read_arrow_table

                table = read_arrow_table(self.folder / name)
                if table.num_rows != record.rows:
                    raise ValueError(f"{table.num_rows:,} rows, the manifest says {record.rows:,}")
                table_columns(table.slice(0, 0), self.manifest.columns)  # the schema, checked
                batches = table.to_batches()
                starts = np.cumsum([0, *(b.num_rows for b in batches)]).astype(np.int64)
                if len(self._tables) >= KEPT_SHARDS:
                    self._tables.pop(next(iter(self._tables)))
                self._tables[name] = (batches, starts)
            return self._tables[name]

    def block(self, record: ShardRecord, row: int) -> tuple[int, int, dict]:
        """(first row, rows, columns) of the record batch holding ``row`` of a shard."""
        from ..formats._arrow_columns import list_parts, numpy_of

        batches, starts = self._table(record)
        index = int(np.searchsorted(starts, row, side="right")) - 1
        batch = batches[index]
        columns = {}
        for info in self.manifest.columns:
            array = batch.column(info.name)
            if info.kind == "value":
                values = np.empty(len(array), dtype=object)
                values[:] = array.to_pylist()
                columns[info.name] = values
            elif info.kind == "scalar":
                columns[info.name] = numpy_of(array)
            else:
                values, offsets = list_parts(array)
                columns[info.name] = Ragged(values, offsets.astype(np.int64))
        return int(starts[index]), batch.num_rows, columns
