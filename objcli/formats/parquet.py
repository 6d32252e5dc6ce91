"""Parquet files (``--format parquet``), zstd-compressed, one row group per chunk of rows."""

from __future__ import annotations

from pathlib import Path

from ..rows import ColumnSpec, RowBatch
from ..storage.manifest import Manifest
from ..storage.shard_info import ShardRecord
from .base import Column, OutputFormat, commit, register, temp_file


class ParquetWriter:
    suffix = ".parquet"

    def __init__(self, base: Path, columns: list[ColumnSpec]):
        import pyarrow.parquet as pq  # here, not at the top: 25 ms of every command's start-up otherwise

        from ._arrow_columns import arrow_schema, to_record_batch

        self.columns = columns
        self.to_record_batch = to_record_batch
        self.temp = temp_file(base, self.suffix)
        self.writer = pq.ParquetWriter(self.temp, arrow_schema(columns), compression="zstd")

    def write(self, rows: RowBatch) -> None:
        self.writer.write_batch(self.to_record_batch(rows, self.columns))

    def close(self) -> list[tuple[Path, str]]:
        self.writer.close()
        return [commit(self.temp)]


class ParquetFormat(OutputFormat):
    stores_values = True
    name = "parquet"
    writer = ParquetWriter
    hub_loadable = True

    def read_columns(self, folder: Path, manifest: Manifest, shard: ShardRecord) -> dict[str, Column]:
        from ._arrow_columns import read_parquet, table_columns

        return table_columns(read_parquet(folder / shard.files[0]), manifest.columns)


PARQUET = register(ParquetFormat())
