"""The sink that cuts a partition's rows into shards, each written by its format's writer.

Every file is written under a temporary name and renamed when complete, so a crash never leaves
a file that looks finished; the manifest, written last, is what marks a run complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.shard_info import ShardRecord, work_prefix
from .base import ShardWriter
from .provenance import SPECS, ProvenanceWriter


@dataclass
class ShardSink:
    """Cuts the rows of one partition into shards of ``shard_rows`` rows or ``shard_bytes`` bytes."""

    folder: Path
    partition: int
    writer_type: type[ShardWriter]  # a format's writer (formats.FORMATS[name].writer)
    columns: list[ColumnSpec]
    shard_rows: int | None = None
    shard_bytes: int | None = None
    split: str = ""  # with --split: the split, in the work file names
    row_counts: tuple[int, ...] = ()  # reshard --num-shards: each shard's rows, in order (instead of shard_rows)
    publish: Callable[[Path], None] | None = None  # object storage: uploads each finished file
    # --provenance: the run's input names, which the rows' hidden __p_file columns index; each shard
    # then gets its .provenance file (formats/provenance.py). A work file of the row shuffle keeps
    # the hidden columns itself (its writer is given them).
    provenance: list[str] | None = None
    shards: list[ShardRecord] = field(default_factory=list)

    def __post_init__(self):
        self._writer = None
        self._spans = None
        self._info: ShardRecord | None = None
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
            if self._spans is not None:
                self._spans.write(part)
            info = self._info
            info.rows += part.num_rows
            info.tokens += int(part.tokens.sum())
            info.padding_tokens += _padding_written(part, getattr(self._writer, "drops_padding", False))
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
        if self._row_limit is None and self.shard_bytes is None:  # a format that keeps a partition whole
            return remaining
        if self._row_limit:
            return min(remaining, self._row_limit - self._info.rows)
        room = self.shard_bytes - self._bytes
        fitting = int(np.searchsorted(np.cumsum(row_bytes[start:]), room, side="right"))
        return max(1, min(remaining, fitting))  # a row larger than a shard gets a shard of its own

    def _full(self) -> bool:
        if self._row_limit:
            return self._info.rows >= self._row_limit
        return self.shard_bytes is not None and self._bytes >= self.shard_bytes

    def _open(self) -> None:
        ordinal = len(self.shards)
        base = self.folder / work_prefix(self.partition, self.split, ordinal)
        keeps_hidden = self.provenance is not None and getattr(self.writer_type, "keeps_hidden", False)
        self._writer = self.writer_type(base, self.columns + list(SPECS) if keeps_hidden else self.columns)
        if self.provenance is not None and not keeps_hidden:
            self._spans = ProvenanceWriter(base, self.provenance)
        self._info = ShardRecord(self.partition, ordinal, [], {}, split=self.split)
        self._bytes = 0

    def _close_shard(self) -> None:
        files = self._writer.close()
        if self._spans is not None:
            files.append(self._spans.close())
            self._spans = None
        self._info.files = [path.name for path, _ in files]
        self._info.sha256 = {path.name: digest for path, digest in files}
        self._info.bytes = {path.name: path.stat().st_size for path, _ in files}
        for path, _ in files if self.publish else ():
            self.publish(path)
        self.shards.append(self._info)
        self._writer = None
        self._info = None

    def close(self) -> list[ShardRecord]:
        if self._writer is not None and self._info.rows:
            self._close_shard()
        return self.shards


def _padding_written(rows: RowBatch, drops_padding: bool) -> int:
    """The padding a shard holds: the rows', or for a writer that drops the rows' padding (NVIDIA's packed
    rows) only what lies inside sequences (``--pad-to-multiple``: the tokens of segments past their real ones)."""
    if not drops_padding:
        return int(rows.padding.sum())
    segments = rows.columns.get("segment_ids")
    if segments is None or "cu_seqlens" not in rows.columns:
        return 0
    values = segments.values if isinstance(segments, Ragged) else segments
    return int((np.asarray(values) > 0).sum()) - int(rows.tokens.sum())
