"""Parquet files, zstd-compressed, one row group per chunk of rows."""

from __future__ import annotations

from pathlib import Path

from ..rows import ColumnSpec, RowBatch
from .base import TEMP_SUFFIX, HashingFile, arrow_schema, commit, stored_as_int32, to_record_batch


class ParquetWriter:
    stored_columns = staticmethod(stored_as_int32)  # what the manifest lists, with the dtype on disk
    suffix = ".parquet"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        import pyarrow.parquet as pq  # here, not at the top: 25 ms of every command's start-up otherwise

        self.columns = columns
        self.temp = HashingFile(base.with_name(base.name + self.suffix + TEMP_SUFFIX))
        self.writer = pq.ParquetWriter(self.temp, arrow_schema(columns), compression="zstd")

    def write(self, rows: RowBatch) -> None:
        self.writer.write_batch(to_record_batch(rows, self.columns))

    def close(self) -> list[tuple[Path, str]]:
        self.writer.close()
        return [commit(self.temp)]
