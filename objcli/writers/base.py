"""Shard writers and the sink that cuts a partition's rows into shards.

Every file is written under a temporary name and renamed when complete, so a crash never leaves
a file that looks finished; the manifest, written last, is what marks a run complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.faults import crash_point
from ..storage.files import HashingFile
from ..storage.shard_info import TEMP_SUFFIX, ShardInfo, work_prefix  # noqa: F401 - the writers' names


def commit(temp: HashingFile) -> tuple[Path, str]:
    """Close (flush + fsync) a finished temporary file, give it its final name, return its sha256."""
    temp.close()
    final = temp.path.with_name(temp.path.name.removesuffix(TEMP_SUFFIX))
    os.replace(temp.path, final)
    crash_point("shard-committed")
    return final, temp.digest.hexdigest()


def stored_as_int32(columns: list[ColumnSpec]) -> list[tuple[ColumnSpec, np.dtype]]:
    """What Arrow and Parquet shards store: every column, as int32 (see ``arrow_schema``)."""
    return [(c, np.dtype(np.int32)) for c in columns]


def arrow_schema(columns: list[ColumnSpec]) -> pa.Schema:
    """int32 lists for token-like columns, int32 scalars: what every Arrow reader handles."""
    return pa.schema(
        [
            pa.field(c.name, pa.int32() if c.kind == "scalar" else pa.list_(pa.int32()), nullable=False)
            for c in columns
        ]
    )


def _int32_array(values: np.ndarray) -> pa.Array:
    # Built from the buffer directly: no copy, and no detour through pyarrow's pandas shim.
    values = np.ascontiguousarray(values, dtype=np.int32)
    return pa.Array.from_buffers(pa.int32(), len(values), [None, pa.py_buffer(values)])


def to_arrow(column, spec: ColumnSpec) -> pa.Array:
    if isinstance(column, Ragged):
        values, offsets = column.values, column.offsets
    elif column.ndim == 2:
        rows, length = column.shape
        values = column.reshape(-1)
        offsets = np.arange(0, rows * length + 1, length, dtype=np.int64)
    else:
        return _int32_array(column)
    offsets = np.ascontiguousarray(offsets, dtype=np.int32)
    return pa.ListArray.from_buffers(
        pa.list_(pa.int32()), len(offsets) - 1, [None, pa.py_buffer(offsets)], children=[_int32_array(values)]
    )


def to_record_batch(rows: RowBatch, columns: list[ColumnSpec]) -> pa.RecordBatch:
    return pa.record_batch(
        [to_arrow(rows.columns[c.name], c) for c in columns], schema=arrow_schema(columns)
    )


class ShardWriter(Protocol):
    def __init__(self, base: Path, columns: list[ColumnSpec]) -> None: ...

    def write(self, rows: RowBatch) -> None: ...

    def close(self) -> list[tuple[Path, str]]:
        """Finish, rename to final names, and return each file written with its sha256."""
        ...


@dataclass
class ShardSink:
    """Cuts the rows of one partition into shards of ``shard_rows`` rows or ``shard_bytes`` bytes."""

    folder: Path
    partition: int
    writer_type: type[ShardWriter]  # one of writers.WRITERS
    columns: list[ColumnSpec]
    shard_rows: int | None = None
    shard_bytes: int | None = None
    split: str = ""  # with --split: the split, in the work file names
    row_counts: tuple[int, ...] = ()  # reshard --num-shards: each shard's rows, in order (instead of shard_rows)
    publish: Callable[[Path], None] | None = None  # object storage: uploads each finished file
    shards: list[ShardInfo] = field(default_factory=list)

    def __post_init__(self):
        self._writer = None
        self._info: ShardInfo | None = None
        self._bytes = 0

    def write(self, rows: RowBatch | None) -> None:
        if rows is None:
            return
        start = 0
        row_bytes = rows.row_nbytes() if self.shard_bytes else None
        while start < rows.num_rows:
            if self._writer is None:
                self._open()
            take = self._rows_that_fit(rows, start, row_bytes)
            part = rows.slice(start, start + take)
            self._writer.write(part)
            info = self._info
            info.rows += part.num_rows
            info.tokens += int(part.tokens.sum())
            info.padding_tokens += int(part.padding.sum())
            info.documents += int(part.documents.sum())
            info.segments += part.segments()
            if row_bytes is not None:
                self._bytes += int(row_bytes[start : start + take].sum())
            start += take
            if self._full():
                self._close_shard()

    @property
    def _row_limit(self) -> int | None:
        if self.row_counts:
            return self.row_counts[min(len(self.shards), len(self.row_counts) - 1)]
        return self.shard_rows

    def _rows_that_fit(self, rows: RowBatch, start: int, row_bytes) -> int:
        remaining = rows.num_rows - start
        if self._row_limit:
            return min(remaining, self._row_limit - self._info.rows)
        room = self.shard_bytes - self._bytes
        fitting = int(np.searchsorted(np.cumsum(row_bytes[start:]), room, side="right"))
        return max(1, min(remaining, fitting))  # a row larger than a shard gets a shard of its own

    def _full(self) -> bool:
        if self._row_limit:
            return self._info.rows >= self._row_limit
        return self._bytes >= self.shard_bytes

    def _open(self) -> None:
        ordinal = len(self.shards)
        base = self.folder / work_prefix(self.partition, self.split, ordinal)
        self._writer = self.writer_type(base, self.columns)
        self._info = ShardInfo(self.partition, ordinal, [], {}, split=self.split)
        self._bytes = 0

    def _close_shard(self) -> None:
        files = self._writer.close()
        self._info.files = [path.name for path, _ in files]
        self._info.sha256 = {path.name: digest for path, digest in files}
        self._info.bytes = {path.name: path.stat().st_size for path, _ in files}
        for path, _ in files if self.publish else ():
            self.publish(path)
        self.shards.append(self._info)
        self._writer = None
        self._info = None

    def close(self) -> list[ShardInfo]:
        if self._writer is not None and self._info.rows:
            self._close_shard()
        return self.shards
