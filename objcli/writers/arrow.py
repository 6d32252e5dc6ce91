"""Arrow IPC stream files: one record batch per chunk of rows.

Hugging Face ``datasets`` memory-maps these with ``Dataset.from_file`` (REFERENCE §12);
``pyarrow.ipc.open_stream`` reads them anywhere.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from ..rows import ColumnSpec, RowBatch
from .base import TEMP_SUFFIX, HashingFile, arrow_schema, commit, stored_as_int32, to_record_batch


class ArrowWriter:
    stored_columns = staticmethod(stored_as_int32)  # what the manifest lists, with the dtype on disk
    suffix = ".arrow"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        self.columns = columns
        self.temp = HashingFile(base.with_name(base.name + self.suffix + TEMP_SUFFIX))
        self.writer = pa.ipc.new_stream(pa.PythonFile(self.temp, mode="w"), arrow_schema(columns))

    def write(self, rows: RowBatch) -> None:
        self.writer.write_batch(to_record_batch(rows, self.columns))

    def close(self) -> list[tuple[Path, str]]:
        self.writer.close()
        return [commit(self.temp)]


class HfWriter(ArrowWriter):
    """``--format hf``: the same Arrow stream shards, in a folder that ``datasets.load_from_disk``
    opens; its ``state.json`` and ``dataset_info.json`` (features declared) come with the manifest."""


BOOKKEEPING = ("__tokens", "__padding", "__documents")  # RowBatch's per-row counts, by name


class RowsToShuffle(ArrowWriter):
    """``--shuffle-rows``, first pass: a partition's rows in order, as Arrow work files that also
    keep each row's bookkeeping (the counts the manifest sums), for the shuffle to move with it."""

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        self.columns = columns
        self.temp = HashingFile(base.with_name(base.name + self.suffix + TEMP_SUFFIX))
        self.schema = arrow_schema(columns)
        for name in BOOKKEEPING:
            self.schema = self.schema.append(pa.field(name, pa.int64(), nullable=False))
        self.writer = pa.ipc.new_stream(pa.PythonFile(self.temp, mode="w"), self.schema)

    def write(self, rows: RowBatch) -> None:
        batch = to_record_batch(rows, self.columns)
        counts = [pa.array(np.asarray(c, dtype=np.int64)) for c in (rows.tokens, rows.padding, rows.documents)]
        self.writer.write_batch(pa.RecordBatch.from_arrays([*batch.columns, *counts], schema=self.schema))
