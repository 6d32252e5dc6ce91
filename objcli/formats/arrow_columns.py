"""Rows to Arrow arrays and back, for the Arrow and Parquet formats and the row shuffle's work files.

Arrow arrays are read as NumPy views without pyarrow's ``to_numpy``, which imports pandas (200 ms on
every ``stats``, ``verify``, ``inspect``, ``reshard`` and ``--shuffle-rows``) to answer the same
question. Imported only where Arrow is written or read: pyarrow is 25 ms of a command's start-up."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from ..rows import ColumnSpec, Ragged, RowBatch
from ..storage.manifest import ColumnInfo
from .base import Column

_WIDTHS = {
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
}


def numpy_of(array) -> np.ndarray:
    """A fixed-width integer Arrow array with no nulls as a read-only NumPy view of its buffer;
    anything else through pyarrow."""
    dtype = _WIDTHS.get(str(array.type))
    if dtype is None or array.null_count:
        return array.to_numpy(zero_copy_only=False)
    item = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * item)


def list_parts(column) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a list array, values as stored (offsets may not start at 0 in a slice)."""
    offsets = numpy_of(column.offsets)
    return numpy_of(column.values), offsets


def arrow_schema(columns: list[ColumnSpec]) -> pa.Schema:
    """int32 lists for token-like columns, int32 scalars: what every Arrow reader handles."""
    return pa.schema(
        [pa.field(c.name, pa.int32() if c.kind == "scalar" else pa.list_(pa.int32()), nullable=False) for c in columns]
    )


def _int32_array(values: np.ndarray) -> pa.Array:
    # Built from the buffer directly: no copy, and no detour through pyarrow's pandas shim.
    values = np.ascontiguousarray(values, dtype=np.int32)
    return pa.Array.from_buffers(pa.int32(), len(values), [None, pa.py_buffer(values)])


def to_arrow(column) -> pa.Array:
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
    return pa.record_batch([to_arrow(rows.columns[c.name]) for c in columns], schema=arrow_schema(columns))


def table_columns(table: pa.Table, specs: list[ColumnInfo]) -> dict[str, Column]:
    """An Arrow or Parquet shard's columns, checked against the manifest's schema."""
    # Parquet names a list's values "element", Arrow "item": compare the types, not the names.
    expected = [(c.name, re.sub(r"list<\w+: ", "list<", c.arrow_type)) for c in specs]
    found = [(f.name, f"list<{f.type.value_type}>" if pa.types.is_list(f.type) else str(f.type)) for f in table.schema]
    if found != expected:
        raise ValueError(f"schema {found} is not the manifest's {expected}")
    columns = {}
    for spec in specs:
        array = table.column(spec.name).combine_chunks()
        if spec.kind == "scalar":
            columns[spec.name] = Column.of_rows(numpy_of(array))
        else:
            values, offsets = list_parts(array)
            columns[spec.name] = Column(values, offsets.astype(np.int64))
    return columns
