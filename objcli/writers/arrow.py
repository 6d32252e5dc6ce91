"""Arrow IPC stream files: one record batch per chunk of rows.

Hugging Face ``datasets`` memory-maps these with ``Dataset.from_file`` (REFERENCE §12);
``pyarrow.ipc.open_stream`` reads them anywhere.
"""

from __future__ import annotations

from pathlib import Path

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
